//! The TLS settings of a listener, with Kafka's `ssl.*` keys: each key may be given for
//! one listener as `listener.name.<name>.ssl.…` (the name in lower case), which wins over
//! the plain key, as Kafka resolves them.
//!
//! Key material is PEM (`ssl.keystore.type=PEM`, `ssl.truststore.type=PEM`): a file
//! (`ssl.keystore.location`, `ssl.truststore.location`) or inline
//! (`ssl.keystore.certificate.chain` with `ssl.keystore.key`, `ssl.truststore.certificates`).
//! A setting highwater cannot honour (a JKS or PKCS12 store, an encrypted key, principal
//! mapping rules) is refused by name rather than dropped.
//!
//! Must not: read files (the server loads the material).

use super::{ConfigError, ConfigMap};

/// The `ssl.*` keys highwater reads, with their defaults (Kafka's, except the store types:
/// Kafka's default is JKS, which highwater does not read; PEM is assumed).
pub const TLS_DEFAULTS: &[(&str, &str)] = &[
    ("ssl.keystore.type", "PEM"),
    ("ssl.keystore.location", ""),
    ("ssl.keystore.certificate.chain", ""),
    ("ssl.keystore.key", ""),
    ("ssl.keystore.password", ""),
    ("ssl.key.password", ""),
    ("ssl.truststore.type", "PEM"),
    ("ssl.truststore.location", ""),
    ("ssl.truststore.certificates", ""),
    ("ssl.truststore.password", ""),
    ("ssl.client.auth", "none"),
    ("ssl.protocol", "TLSv1.3"),
    ("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"),
    ("ssl.cipher.suites", ""),
    ("ssl.endpoint.identification.algorithm", "https"),
    ("ssl.principal.mapping.rules", "DEFAULT"),
    ("ssl.keymanager.algorithm", "SunX509"),
    ("ssl.trustmanager.algorithm", "PKIX"),
];

/// Where PEM material comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    /// A file, read at start (and again when it changes).
    File(String),
    /// The PEM text itself, from the config.
    Inline(String),
}

/// Whether a listener asks clients for a certificate (`ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// Asked for, and verified when given.
    Requested,
    Required,
}

/// TLS protocol versions a listener accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// One listener's TLS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The listener's name.
    pub listener: String,
    /// The certificate chain (a keystore file holds the key too).
    pub certificates: Pem,
    pub key: Pem,
    /// Trusted certificates for client certificates; `None` trusts none.
    pub trust: Option<Pem>,
    pub client_auth: ClientAuth,
    pub versions: Vec<TlsVersion>,
    /// IANA names (`TLS_AES_128_GCM_SHA256`, `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`);
    /// empty for every suite the crypto provider has.
    pub cipher_suites: Vec<String>,
    /// `ssl.principal.mapping.rules`, read by the server (`x500::principal_rules`).
    pub principal_mapping_rules: String,
    /// `ssl.endpoint.identification.algorithm` is `https` (Kafka's default): a broker
    /// connecting to this listener of another one checks that its certificate names the
    /// host it connects to; empty: the certificate need only be trusted.
    pub verify_host: bool,
}

/// A listener's view of the config: `listener.name.<name>.<key>` before `<key>`.
struct ListenerKeys<'a> {
    values: &'a ConfigMap,
    prefix: String,
}

impl ListenerKeys<'_> {
    /// The value of `key` and the key it came from; empty values count as unset.
    fn get(&self, key: &str) -> Option<(String, &str)> {
        let prefixed = format!("{}{key}", self.prefix);
        [prefixed, key.to_string()].into_iter().find_map(|k| {
            let value = self.values.get(&k)?.trim();
            (!value.is_empty()).then(|| (k.clone(), self.values[&k].trim()))
        })
    }

    fn value(&self, key: &str) -> String {
        self.get(key)
            .map(|(_, v)| v.to_string())
            .unwrap_or_default()
    }

    fn refuse(&self, key: &str, reason: &str) -> ConfigError {
        let (name, value) = self
            .get(key)
            .map_or((key.to_string(), String::new()), |(k, v)| {
                (k, v.to_string())
            });
        ConfigError::Unenforced {
            key: name,
            value,
            reason: reason.to_string(),
        }
    }
}

/// The per-listener prefix of `listener` (`listener.name.ssl.`), as Kafka writes it.
pub fn listener_prefix(listener: &str) -> String {
    format!("listener.name.{}.", listener.to_ascii_lowercase())
}

/// The TLS settings of `listener` (an SSL or SASL_SSL listener) from `values`.
pub fn settings(values: &ConfigMap, listener: &str) -> Result<TlsSettings, ConfigError> {
    let keys = ListenerKeys {
        values,
        prefix: listener_prefix(listener),
    };
    for (key, reason) in [
        (
            "ssl.key.password",
            "encrypted private keys are not read; give an unencrypted PKCS#8 key",
        ),
        (
            "ssl.keystore.password",
            "PEM keystores have no password; give an unencrypted PKCS#8 key",
        ),
        (
            "ssl.truststore.password",
            "PEM truststores have no password",
        ),
    ] {
        if keys.get(key).is_some() {
            return Err(keys.refuse(key, reason));
        }
    }
    for key in ["ssl.keystore.type", "ssl.truststore.type"] {
        if !keys.value(key).eq_ignore_ascii_case("PEM") {
            return Err(keys.refuse(key, "only PEM stores are read (ssl.*.type=PEM)"));
        }
    }
    let (certificates, key) = keystore(&keys, listener)?;
    let trust = match (
        keys.get("ssl.truststore.location"),
        keys.get("ssl.truststore.certificates"),
    ) {
        (Some((_, file)), None) => Some(Pem::File(file.to_string())),
        (None, Some((_, text))) => Some(Pem::Inline(text.to_string())),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(keys.refuse(
                "ssl.truststore.certificates",
                "set either ssl.truststore.location or ssl.truststore.certificates",
            ))
        }
    };
    let client_auth = match keys.value("ssl.client.auth").to_ascii_lowercase().as_str() {
        "none" => ClientAuth::None,
        "requested" => ClientAuth::Requested,
        "required" => ClientAuth::Required,
        _ => return Err(keys.refuse("ssl.client.auth", "must be none, requested or required")),
    };
    if client_auth != ClientAuth::None && trust.is_none() {
        return Err(keys.refuse(
            "ssl.client.auth",
            "client certificates need a truststore (ssl.truststore.location)",
        ));
    }
    Ok(TlsSettings {
        listener: listener.to_string(),
        certificates,
        key,
        trust,
        client_auth,
        versions: versions(&keys)?,
        cipher_suites: list(&keys.value("ssl.cipher.suites")),
        principal_mapping_rules: keys
            .get("ssl.principal.mapping.rules")
            .map_or("DEFAULT", |(_, rules)| rules)
            .to_string(),
        verify_host: verify_host(&keys)?,
    })
}

/// `ssl.endpoint.identification.algorithm`: `https` or empty, as Kafka takes it.
fn verify_host(keys: &ListenerKeys<'_>) -> Result<bool, ConfigError> {
    let key = "ssl.endpoint.identification.algorithm";
    // An explicitly empty value turns the check off, so unset and empty differ here.
    let prefixed = format!("{}{key}", keys.prefix);
    let value = keys
        .values
        .get(&prefixed)
        .or_else(|| keys.values.get(key))
        .map_or("https", |v| v.trim());
    match value.to_ascii_lowercase().as_str() {
        "https" => Ok(true),
        "" => Ok(false),
        _ => Err(keys.refuse(key, "must be https or empty")),
    }
}

/// The certificate chain and key: `ssl.keystore.location` (both in one PEM file), or
/// `ssl.keystore.certificate.chain` with `ssl.keystore.key`.
fn keystore(keys: &ListenerKeys<'_>, listener: &str) -> Result<(Pem, Pem), ConfigError> {
    let file = keys.get("ssl.keystore.location");
    let chain = keys.get("ssl.keystore.certificate.chain");
    let key = keys.get("ssl.keystore.key");
    match (file, chain, key) {
        (Some((_, file)), None, None) => Ok((Pem::File(file.into()), Pem::File(file.into()))),
        (None, Some((_, chain)), Some((_, key))) => {
            Ok((Pem::Inline(chain.into()), Pem::Inline(key.into())))
        }
        (None, None, None) => Err(ConfigError::Conflict {
            key: "ssl.keystore.location",
            value: String::new(),
            reason: format!(
                "listener {listener} uses TLS and needs a certificate and key \
                 (ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)"
            ),
        }),
        _ => Err(keys.refuse(
            "ssl.keystore.location",
            "set either ssl.keystore.location, or both ssl.keystore.certificate.chain and \
             ssl.keystore.key",
        )),
    }
}

/// `ssl.enabled.protocols`: TLSv1.2 and TLSv1.3 (older ones are refused by name).
fn versions(keys: &ListenerKeys<'_>) -> Result<Vec<TlsVersion>, ConfigError> {
    let mut versions = Vec::new();
    for name in list(&keys.value("ssl.enabled.protocols")) {
        let version = match name.as_str() {
            "TLSv1.2" => TlsVersion::Tls12,
            "TLSv1.3" => TlsVersion::Tls13,
            _ => {
                return Err(keys.refuse(
                    "ssl.enabled.protocols",
                    "only TLSv1.2 and TLSv1.3 are served",
                ))
            }
        };
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    if versions.is_empty() {
        return Err(keys.refuse("ssl.enabled.protocols", "names no protocol"));
    }
    Ok(versions)
}

fn list(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `key` is a TLS key highwater reads, plain or for one listener.
pub fn is_tls_key(key: &str) -> bool {
    let plain = match key.strip_prefix("listener.name.") {
        Some(rest) => rest.split_once('.').map_or("", |(_, k)| k),
        None => key,
    };
    TLS_DEFAULTS.iter().any(|(k, _)| *k == plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> ConfigMap {
        TLS_DEFAULTS
            .iter()
            .chain(pairs)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_listener_key_wins_over_the_plain_one() {
        let values = values(&[
            ("ssl.keystore.location", "/plain.pem"),
            (
                "listener.name.external.ssl.keystore.location",
                "/external.pem",
            ),
            ("listener.name.external.ssl.client.auth", "required"),
            ("ssl.truststore.location", "/ca.pem"),
        ]);
        let external = settings(&values, "EXTERNAL").expect("external");
        assert_eq!(external.key, Pem::File("/external.pem".into()));
        assert_eq!(external.client_auth, ClientAuth::Required);
        assert_eq!(external.trust, Some(Pem::File("/ca.pem".into())));
        let other = settings(&values, "SSL").expect("ssl");
        assert_eq!(other.certificates, Pem::File("/plain.pem".into()));
        assert_eq!(other.client_auth, ClientAuth::None);
        assert_eq!(other.versions, vec![TlsVersion::Tls12, TlsVersion::Tls13]);
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_its_key() {
        let file = ("ssl.keystore.location", "/k.pem");
        for (pairs, key) in [
            (
                vec![file, ("ssl.keystore.type", "JKS")],
                "ssl.keystore.type",
            ),
            (vec![file, ("ssl.key.password", "x")], "ssl.key.password"),
            (
                vec![file, ("listener.name.ssl.ssl.enabled.protocols", "TLSv1.1")],
                "listener.name.ssl.ssl.enabled.protocols",
            ),
            (
                vec![file, ("ssl.client.auth", "required")],
                "ssl.client.auth",
            ),
        ] {
            match settings(&values(&pairs), "SSL") {
                Err(ConfigError::Unenforced { key: refused, .. }) => assert_eq!(refused, key),
                other => panic!("{pairs:?}: {other:?}"),
            }
        }
        assert!(matches!(
            settings(&values(&[]), "SSL"),
            Err(ConfigError::Conflict { .. })
        ));
    }

    #[test]
    fn tls_keys_are_known_plain_and_per_listener() {
        assert!(is_tls_key("ssl.keystore.location"));
        assert!(is_tls_key("listener.name.external.ssl.client.auth"));
        assert!(!is_tls_key("listener.name.external.sasl.jaas.config"));
        assert!(!is_tls_key("ssl.keystore.locaton"));
    }
}
