//! Fails closed on security settings highwater does not enforce yet (issue #15): a SASL
//! controller listener, a SASL, delegation-token or authorization key it does not
//! read, or a TLS key it does not read stops start-up with the key named, instead of being
//! served with less protection than it asks for. TLS (SSL listeners, `ssl.*` keys) is
//! enforced by `config::tls` and the server, SASL (PLAIN and SCRAM, `config::sasl`) by the
//! server, ACLs (Kafka's StandardAuthorizer, `super.users`,
//! `allow.everyone.if.no.acl.found`) by `api::authorization`.
//!
//! Must not: accept a security setting it cannot honour. Each key is let through here
//! only once the broker enforces it.

use super::listeners::{protocol_map, protocol_of, SecurityProtocol};
use super::{sasl, tls, ConfigError, ConfigMap};

/// Key prefixes that configure SASL or delegation tokens.
const SECURITY_PREFIXES: &[&str] = &["sasl.", "delegation.token."];

/// The class name of Kafka's KRaft authorizer, the one `authorizer.class.name` may name.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The StandardAuthorizer's own keys (read by it, not broker configs DescribeConfigs lists,
/// as in Kafka).
pub const AUTHORIZER_KEYS: &[&str] = &["super.users", "allow.everyone.if.no.acl.found"];

/// Security keys enforced at these values only (no authorizer or Kafka's
/// StandardAuthorizer, the inter-broker protocols); any other value is refused.
const SECURITY_KEYS: &[(&str, &[&str])] = &[
    ("authorizer.class.name", &["", STANDARD_AUTHORIZER]),
    ("allow.everyone.if.no.acl.found", &["true", "false"]),
    (
        "security.inter.broker.protocol",
        &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
    ),
    ("principal.builder.class", &[]),
    ("security.providers", &[]),
];

/// The delegation-token keys and their defaults (Kafka's): tokens are enabled by a
/// secret (`delegation.token.master.key` is its old name), the others take a number of
/// ms, at least 1.
pub const TOKEN_KEYS: &[(&str, &str)] = &[
    ("delegation.token.secret.key", ""),
    ("delegation.token.master.key", ""),
    ("delegation.token.max.lifetime.ms", "604800000"),
    ("delegation.token.expiry.time.ms", "86400000"),
    ("delegation.token.expiry.check.interval.ms", "3600000"),
];

/// Security keys that take a number of ms, at least 0.
const MS_KEYS: &[&str] = &["connections.max.reauth.ms"];

/// Key endings of Kafka's PASSWORD-type configs (and highwater's SCRAM bootstrap users):
/// a listener- or mechanism-prefixed key ends the same way.
const SENSITIVE_ENDINGS: &[&str] = &[
    ".password",
    "sasl.jaas.config",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
    "delegation.token.secret.key",
    "delegation.token.master.key",
    "password.encoder.secret",
    "password.encoder.old.secret",
    "client.secret",
    super::sasl::BOOTSTRAP_KEY,
];

/// Whether `key` holds a secret (a password, a private key, a JAAS config with users'
/// passwords): DescribeConfigs shows no value for it, as Kafka shows none for its
/// PASSWORD-type configs.
pub fn is_sensitive(key: &str) -> bool {
    SENSITIVE_ENDINGS.iter().any(|end| key.ends_with(end))
}

/// Refuses the first security setting of `values` that highwater does not enforce.
/// `controller_names` are the listeners of `controller.listener.names`.
pub fn check_enforced(values: &ConfigMap, controller_names: &[String]) -> Result<(), ConfigError> {
    for (key, value) in values {
        check_key(key, value)?;
    }
    let map = protocol_map(values)?;
    for key in ["listeners", "advertised.listeners"] {
        let raw = values.get(key).map(String::as_str).unwrap_or_default();
        for name in listener_names(raw) {
            let protocol = protocol_of(&name, &map, controller_names, key, raw)?;
            let controller = controller_names.contains(&name);
            let refused = match protocol {
                SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl if controller => {
                    "the controller quorum is served over PLAINTEXT or SSL only"
                }
                _ => continue,
            };
            return Err(unenforced(
                key,
                raw,
                format!("listener {name} uses {}: {refused}", protocol.name()),
            ));
        }
    }
    Ok(())
}

fn check_key(key: &str, value: &str) -> Result<(), ConfigError> {
    let ms_key = MS_KEYS.iter().any(|k| key.ends_with(k));
    if ms_key && value.trim().parse::<u64>().is_err() {
        return Err(unenforced(key, value, "a number of ms, at least 0".into()));
    }
    if sasl::is_sasl_key(key) {
        return Ok(());
    }
    if let Some((_, default)) = TOKEN_KEYS.iter().find(|(k, _)| *k == key) {
        let positive = value.trim().parse::<i64>().is_ok_and(|ms| ms >= 1);
        return match default.is_empty() || positive {
            true => Ok(()),
            false => Err(unenforced(key, value, "a number of ms, at least 1".into())),
        };
    }
    if SECURITY_PREFIXES.iter().any(|p| key.starts_with(p)) {
        let reason = "a SASL or delegation-token setting highwater does not enforce \
                      (it serves PLAIN, SCRAM, OAUTHBEARER and delegation tokens)";
        return Err(unenforced(key, value, reason.into()));
    }
    let tls_like = key.starts_with("ssl.") || key.starts_with("listener.name.");
    if tls_like && !tls::is_tls_key(key) {
        let reason = match key.starts_with("ssl.") {
            true => "a TLS setting highwater does not read",
            false => "only ssl.* and SASL mechanism keys may be set per listener",
        };
        return Err(unenforced(key, value, reason.into()));
    }
    let Some((_, harmless)) = SECURITY_KEYS.iter().find(|(k, _)| *k == key) else {
        return Ok(());
    };
    if harmless.contains(&value.trim()) {
        return Ok(());
    }
    let served: Vec<&str> = harmless.iter().filter(|v| !v.is_empty()).copied().collect();
    let reason = match served.is_empty() {
        true => "highwater does not enforce this setting".to_string(),
        false => format!("highwater enforces only {}", served.join(", ")),
    };
    Err(unenforced(key, value, reason))
}

/// The listener names of a `listeners`-style value (a bare `host:port` is PLAINTEXT).
fn listener_names(raw: &str) -> impl Iterator<Item = String> + '_ {
    raw.split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.split_once("://").map_or("PLAINTEXT", |(name, _)| name))
        .map(|name| name.trim().to_ascii_uppercase())
}

fn unenforced(key: &str, value: &str, reason: String) -> ConfigError {
    ConfigError::Unenforced {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pairs: &[(&str, &str)]) -> Result<(), ConfigError> {
        let values: ConfigMap = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        check_enforced(&values, &["CONTROLLER".to_string()])
    }

    fn refused_key(pairs: &[(&str, &str)]) -> String {
        match check(pairs) {
            Err(ConfigError::Unenforced { key, .. }) => key,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn plaintext_listeners_and_default_security_values_pass() {
        let ok = check(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
            ),
            ("authorizer.class.name", ""),
            ("security.inter.broker.protocol", "PLAINTEXT"),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
        ]);
        assert!(ok.is_ok(), "{ok:?}");
        assert!(check(&[("listeners", "127.0.0.1:9092")]).is_ok());
    }

    #[test]
    fn a_sasl_client_listener_passes_and_a_sasl_controller_listener_is_refused() {
        // The client listener's mechanisms and users are checked by `config::sasl`.
        assert!(check(&[("listeners", "SASL_SSL://127.0.0.1:9093")]).is_ok());
        let map = (
            "listener.security.protocol.map",
            "CONTROLLER:SASL_PLAINTEXT",
        );
        let key = refused_key(&[("listeners", "CONTROLLER://127.0.0.1:9193"), map]);
        assert_eq!(key, "listeners");
    }

    #[test]
    fn ssl_client_and_controller_listeners_pass() {
        let map = (
            "listener.security.protocol.map",
            "EXTERNAL:SSL,CONTROLLER:SSL",
        );
        assert!(check(&[("listeners", "EXTERNAL://127.0.0.1:9093"), map]).is_ok());
        assert!(check(&[("listeners", "CONTROLLER://127.0.0.1:9193"), map]).is_ok());
        let unmapped = check(&[("listeners", "EXTERNAL://127.0.0.1:9093")]);
        assert!(
            matches!(
                unmapped,
                Err(ConfigError::Conflict {
                    key: "listeners",
                    ..
                })
            ),
            "a listener missing from the map is refused: {unmapped:?}"
        );
    }

    #[test]
    fn unread_sasl_authorizer_and_tls_keys_are_refused_by_name() {
        let plain = ("listeners", "PLAINTEXT://127.0.0.1:9092");
        for key in [
            "ssl.engine.factory.class",
            "sasl.kerberos.service.name",
            "sasl.server.callback.handler.class",
            "listener.name.external.gssapi.sasl.jaas.config",
            "listener.name.external.oauthbearer.sasl.login.callback.handler.class",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            "allow.everyone.if.no.acl.found",
            "authorizer.class.name",
            "connections.max.reauth.ms",
        ] {
            assert_eq!(refused_key(&[plain, (key, "x")]), key);
        }
        for key in [
            "ssl.keystore.location",
            "listener.name.external.ssl.client.auth",
            "sasl.enabled.mechanisms",
            "listener.name.external.plain.sasl.jaas.config",
            "listener.name.external.scram-sha-512.sasl.jaas.config",
            "listener.name.external.oauthbearer.sasl.jaas.config",
        ] {
            assert!(check(&[plain, (key, "x")]).is_ok(), "{key} is read");
        }
        assert!(check(&[plain, ("connections.max.reauth.ms", "60000")]).is_ok());
        assert!(check(&[plain, ("delegation.token.secret.key", "x")]).is_ok());
        assert!(check(&[plain, ("delegation.token.expiry.time.ms", "1000")]).is_ok());
        for (key, value) in [
            ("delegation.token.expiry.time.ms", "0"),
            ("delegation.token.max.lifetime.ms", "a week"),
            ("delegation.token.unknown", "x"),
        ] {
            assert_eq!(refused_key(&[plain, (key, value)]), key);
        }
        let own = "listener.name.external.oauthbearer.connections.max.reauth.ms";
        assert!(check(&[plain, (own, "60000")]).is_ok());
        assert_eq!(refused_key(&[plain, (own, "soon")]), own);
        let authorizer = (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        );
        let acl_keys = [
            authorizer,
            ("super.users", "User:admin;User:CN=broker,O=example"),
            ("allow.everyone.if.no.acl.found", "false"),
        ];
        assert!(check(&[&[plain][..], &acl_keys].concat()).is_ok());
        let zk = (
            "authorizer.class.name",
            "kafka.security.authorizer.AclAuthorizer",
        );
        assert_eq!(refused_key(&[plain, zk]), "authorizer.class.name");
        let inter = ("security.inter.broker.protocol", "KERBEROS");
        assert_eq!(
            refused_key(&[plain, inter]),
            "security.inter.broker.protocol"
        );
    }
}
