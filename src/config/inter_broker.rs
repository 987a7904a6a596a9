//! How this broker connects to the other brokers' inter-broker listener (replication,
//! transaction markers), with Kafka's keys: the listener's own `ssl.*` settings for TLS
//! (its truststore checks the other broker's certificate, its keystore is this broker's
//! client certificate, `ssl.endpoint.identification.algorithm` whether the certificate
//! must name the host), and for SASL the mechanism of
//! `sasl.mechanism.inter.broker.protocol` with the `username` and `password` options of
//! that mechanism's `listener.name.<l>.<mechanism>.sasl.jaas.config`, as Kafka's broker
//! logs in to its peers.
//!
//! Must not: open connections or read key material (`crate::peer` does both).

use super::listeners::Listener;
use super::sasl::parse_jaas;
use super::tls::TlsSettings;
use super::{ConfigError, ConfigMap};

/// The mechanisms a broker logs in to another one with.
const CLIENT_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// How connections to the inter-broker listener of another broker are secured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterBrokerClient {
    /// The inter-broker listener's name (empty on a controller-only node).
    pub listener: String,
    /// TLS: the listener's settings (truststore set).
    pub tls: Option<TlsSettings>,
    /// SASL: the mechanism and this broker's credentials.
    pub sasl: Option<SaslLogin>,
}

/// A SASL login with a user name and password.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The client side of `listener`, the inter-broker one.
pub fn client(values: &ConfigMap, listener: &Listener) -> Result<InterBrokerClient, ConfigError> {
    let lower = listener.name.to_ascii_lowercase();
    let tls = match &listener.tls {
        Some(settings) if settings.trust.is_none() => {
            return Err(refuse(
                format!("listener.name.{lower}.ssl.truststore.location"),
                "",
                format!(
                    "brokers connect to each other over {} ({}) and check the other \
                     broker's certificate: set ssl.truststore.location (or \
                     ssl.truststore.certificates) for it",
                    listener.name,
                    listener.protocol.name()
                ),
            ))
        }
        other => other.clone(),
    };
    let sasl = match &listener.sasl {
        Some(offered) => Some(login(values, &lower, &offered.mechanisms)?),
        None => None,
    };
    Ok(InterBrokerClient {
        listener: listener.name.clone(),
        tls,
        sasl,
    })
}

/// The mechanism and credentials this broker logs in with on listener `lower`, which
/// offers `offered`.
fn login(values: &ConfigMap, lower: &str, offered: &[String]) -> Result<SaslLogin, ConfigError> {
    let key = "sasl.mechanism.inter.broker.protocol";
    // Kafka's default is GSSAPI, which is not served.
    let mechanism = values
        .get(key)
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "GSSAPI".to_string());
    if !CLIENT_MECHANISMS.contains(&mechanism.as_str()) {
        let reason = format!(
            "brokers log in to each other with {} only",
            CLIENT_MECHANISMS.join(", ")
        );
        return Err(refuse(key.to_string(), &mechanism, reason));
    }
    if !offered.contains(&mechanism) {
        let reason = format!(
            "the inter-broker listener offers {} only (sasl.enabled.mechanisms)",
            offered.join(", ")
        );
        return Err(refuse(key.to_string(), &mechanism, reason));
    }
    let jaas = format!(
        "listener.name.{lower}.{}.sasl.jaas.config",
        mechanism.to_ascii_lowercase()
    );
    let Some(text) = values.get(&jaas) else {
        let reason = format!(
            "{mechanism} is the inter-broker mechanism: this JAAS config must give the \
             username=\"…\" password=\"…\" brokers log in with"
        );
        return Err(refuse(jaas, "", reason));
    };
    // The value holds passwords: never repeated in an error.
    let (_, options) =
        parse_jaas(text).map_err(|reason| refuse(jaas.clone(), "(hidden)", reason))?;
    match (options.get("username"), options.get("password")) {
        (Some(username), Some(password)) if !username.is_empty() => Ok(SaslLogin {
            mechanism,
            username: username.clone(),
            password: password.clone(),
        }),
        _ => Err(refuse(
            jaas,
            "(hidden)",
            "brokers log in to each other with the username=\"…\" password=\"…\" options \
             of this JAAS config"
                .to_string(),
        )),
    }
}

fn refuse(key: String, value: &str, reason: String) -> ConfigError {
    ConfigError::Unenforced {
        key,
        value: value.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{BrokerConfig, ConfigError, ConfigMap};

    const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                         username=\"broker\" password=\"secret\";";

    fn config(extra: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let mut values: ConfigMap = [
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093,CONTROLLER://127.0.0.1:9193",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "INTERNAL"),
            (
                "controller.quorum.voters",
                "1@127.0.0.1:9193,2@127.0.0.1:9194",
            ),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256,PLAIN"),
            (
                "listener.name.internal.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
            ),
        ]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        values.insert("node.id".into(), "1".into());
        BrokerConfig::from_map(values)
    }

    fn refused_key(extra: &[(&str, &str)]) -> String {
        match config(extra) {
            Err(ConfigError::Unenforced { key, .. }) => key,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_sasl_inter_broker_listener_logs_in_with_its_mechanisms_jaas_credentials() {
        let mechanism = ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256");
        let jaas = (
            "listener.name.internal.scram-sha-256.sasl.jaas.config",
            SCRAM,
        );
        let client = config(&[mechanism, jaas])
            .expect("config")
            .inter_broker_client;
        let login = client.sasl.expect("a login");
        assert_eq!(
            (login.mechanism.as_str(), login.username.as_str()),
            ("SCRAM-SHA-256", "broker")
        );
        assert_eq!(login.password, "secret");
        assert!(!format!("{login:?}").contains("secret"), "never logged");
    }

    #[test]
    fn a_mechanism_not_served_not_offered_or_without_credentials_is_refused() {
        let key = "sasl.mechanism.inter.broker.protocol";
        assert_eq!(refused_key(&[]), key, "Kafka's default GSSAPI");
        assert_eq!(refused_key(&[(key, "SCRAM-SHA-512")]), key, "not offered");
        assert_eq!(
            refused_key(&[(key, "SCRAM-SHA-256")]),
            "listener.name.internal.scram-sha-256.sasl.jaas.config"
        );
        let no_password = (
            "listener.name.internal.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"a\" user_a=\"b\";",
        );
        let refused = match config(&[(key, "PLAIN"), no_password]) {
            Err(error) => error.to_string(),
            other => panic!("{other:?}"),
        };
        assert!(refused.contains("username"), "{refused}");
        assert!(!refused.contains("user_a"), "the JAAS text is not repeated");
    }
}
