//! A SASL listener's settings, with Kafka's keys: the mechanisms it offers
//! (`listener.name.<l>.sasl.enabled.mechanisms`, else `sasl.enabled.mechanisms`) and, for
//! PLAIN, its users (`listener.name.<l>.plain.sasl.jaas.config`, Kafka's PlainLoginModule
//! with `user_<name>="<password>"` options). SCRAM users live in the metadata log; the
//! first ones can be given here (`scram.bootstrap.credentials`, in the form of
//! `kafka-storage format --add-scram`), written when the cluster is first formed.
//!
//! OAUTHBEARER validates tokens with Kafka's unsecured-JWT validator, configured by the
//! `unsecuredValidator*` options of `listener.name.<l>.oauthbearer.sasl.jaas.config`.
//!
//! Must not: accept a mechanism the broker does not serve (GSSAPI): the start stops with
//! the key named instead.

use std::collections::BTreeMap;

use super::{ConfigError, ConfigMap};

/// The mechanisms served, by name.
pub const MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// The JAAS login module a PLAIN listener's users are read from.
const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// The JAAS login module of a SCRAM listener (its options are the broker's own client
/// credentials, for inter-broker SASL; accepted, not used).
const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
/// The JAAS login module of an OAUTHBEARER listener (its `unsecuredValidator*` options
/// configure the validator; the others are the broker's own client login, accepted).
const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// The keys of SCRAM users to create with a new cluster (not a Kafka key: Kafka takes them
/// from `kafka-storage format --add-scram`, in the same form).
pub const BOOTSTRAP_KEY: &str = "scram.bootstrap.credentials";

/// The class of Kafka's validator of signed OAUTHBEARER tokens (by its two names), as the
/// listener's `oauthbearer.sasl.server.callback.handler.class` names it.
const SIGNED_VALIDATOR_CLASSES: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];

/// The `sasl.oauthbearer.*` keys read for signed tokens (also per listener:
/// `listener.name.<l>.oauthbearer.<key>`).
const OAUTHBEARER_KEYS: &[&str] = &[
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwt.validator.class",
];

/// The JWT validator classes of Kafka 4.1 (`sasl.oauthbearer.jwt.validator.class`) whose
/// checks highwater makes: the broker's, which verifies signatures against the key set,
/// and the default (highwater verifies signatures with it too; Kafka 4.1.1's handler
/// builds it without the key set and does not).
const JWT_VALIDATOR_CLASSES: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
];

/// How a listener checks signed OAUTHBEARER tokens (Kafka's
/// OAuthBearerValidatorCallbackHandler), as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTokens {
    /// The JSON Web Key Set, read at start from its `file:` URL.
    pub jwks: String,
    pub audience: Vec<String>,
    pub issuer: Option<String>,
    pub sub_claim: String,
    pub scope_claim: String,
    pub clock_skew_s: i64,
}

/// SASL keys read (the others are refused at start, `config::security`).
pub const SASL_KEYS: &[&str] = &[
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
];

/// What one SASL listener offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSettings {
    pub listener: String,
    /// The mechanisms offered, as SaslHandshake names them, in the configured order.
    pub mechanisms: Vec<String>,
    /// PLAIN's users and passwords (empty when PLAIN is not offered).
    pub plain_users: BTreeMap<String, String>,
    /// The options of the OAUTHBEARER login module (empty when not offered or not set).
    pub oauthbearer_options: BTreeMap<String, String>,
    /// Signed OAUTHBEARER tokens' checks; `None`: Kafka's default unsecured validator.
    pub oauthbearer_signed: Option<SignedTokens>,
}

/// Whether `key` is a SASL key this module reads, plain or per listener.
pub fn is_sasl_key(key: &str) -> bool {
    if SASL_KEYS.contains(&key) || key == BOOTSTRAP_KEY || OAUTHBEARER_KEYS.contains(&key) {
        return true;
    }
    let Some((_, rest)) = key
        .strip_prefix("listener.name.")
        .and_then(|k| k.split_once('.'))
    else {
        return false;
    };
    let served = |mechanism: &str| MECHANISMS.iter().any(|m| m.eq_ignore_ascii_case(mechanism));
    rest == "sasl.enabled.mechanisms"
        || rest.strip_suffix(".sasl.jaas.config").is_some_and(served)
        || rest
            .strip_suffix(".connections.max.reauth.ms")
            .is_some_and(served)
        || rest.strip_prefix("oauthbearer.").is_some_and(|k| {
            k == "sasl.server.callback.handler.class" || OAUTHBEARER_KEYS.contains(&k)
        })
}

/// How listener `lower` checks signed OAUTHBEARER tokens, when its callback handler is
/// Kafka's OAuthBearerValidatorCallbackHandler (`None`: the unsecured validator).
fn signed_tokens(values: &ConfigMap, lower: &str) -> Result<Option<SignedTokens>, ConfigError> {
    let prefix = format!("listener.name.{lower}.oauthbearer.");
    let get = |key: &str| {
        let own = format!("{prefix}{key}");
        match values.get(&own) {
            Some(value) => Some((own, value.trim().to_string())),
            None => values
                .get(key)
                .map(|v| (key.to_string(), v.trim().to_string())),
        }
    };
    let handler_key = format!("{prefix}sasl.server.callback.handler.class");
    let jwks_url = get("sasl.oauthbearer.jwks.endpoint.url");
    let Some(handler) = values.get(&handler_key) else {
        return unused_key_set(values, &handler_key, jwks_url).map(|()| None);
    };
    if !SIGNED_VALIDATOR_CLASSES.contains(&handler.trim()) {
        let reason = format!("highwater serves {} only", SIGNED_VALIDATOR_CLASSES[0]);
        return Err(invalid(handler_key, handler, reason));
    }
    let Some((url_key, url)) = jwks_url else {
        let reason = "the validator needs sasl.oauthbearer.jwks.endpoint.url".to_string();
        return Err(invalid(handler_key, handler, reason));
    };
    let jwks = read_key_set(&url_key, &url)?;
    if let Some((key, class)) = get("sasl.oauthbearer.jwt.validator.class") {
        if !JWT_VALIDATOR_CLASSES.contains(&class.as_str()) {
            let reason = format!(
                "highwater checks tokens as {} does",
                JWT_VALIDATOR_CLASSES[0]
            );
            return Err(invalid(key, &class, reason));
        }
    }
    let text = |key: &str, default: &str| get(key).map_or(default.to_string(), |(_, v)| v);
    let skew = text("sasl.oauthbearer.clock.skew.seconds", "30");
    let clock_skew_s = skew.parse::<u32>().map_err(|_| {
        let reason = "a number of seconds, at least 0".to_string();
        invalid("sasl.oauthbearer.clock.skew.seconds".into(), &skew, reason)
    })?;
    let audience = text("sasl.oauthbearer.expected.audience", "");
    Ok(Some(SignedTokens {
        jwks,
        audience: audience
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect(),
        issuer: get("sasl.oauthbearer.expected.issuer")
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty()),
        sub_claim: text("sasl.oauthbearer.sub.claim.name", "sub"),
        scope_claim: text("sasl.oauthbearer.scope.claim.name", "scope"),
        clock_skew_s: i64::from(clock_skew_s),
    }))
}

/// Refuses a key set given to a listener without Kafka's validator (`handler_key` unset):
/// a broker-wide one serves the listeners naming the validator, one no listener uses is
/// refused rather than left unused.
fn unused_key_set(
    values: &ConfigMap,
    handler_key: &str,
    jwks_url: Option<(String, String)>,
) -> Result<(), ConfigError> {
    let Some((key, url)) = jwks_url else {
        return Ok(());
    };
    let used_elsewhere = key == "sasl.oauthbearer.jwks.endpoint.url"
        && values.keys().any(|k| {
            k.starts_with("listener.name.")
                && k.ends_with(".oauthbearer.sasl.server.callback.handler.class")
        });
    if used_elsewhere {
        return Ok(());
    }
    let reason = format!(
        "a key set is read only with {handler_key} = {}",
        SIGNED_VALIDATOR_CLASSES[0]
    );
    Err(invalid(key, &url, reason))
}

/// The JSON Web Key Set at the `file:` URL `url` (the value of `key`), checked to hold keys.
fn read_key_set(key: &str, url: &str) -> Result<String, ConfigError> {
    let Some(path) = url
        .strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
    else {
        let reason = "highwater reads a key set from a file: URL only".to_string();
        return Err(invalid(key.to_string(), url, reason));
    };
    let jwks = std::fs::read_to_string(path)
        .map_err(|e| invalid(key.to_string(), url, format!("cannot read {path}: {e}")))?;
    let has_keys = serde_json::from_str::<serde_json::Value>(&jwks)
        .ok()
        .and_then(|set| set.get("keys")?.as_array().map(|keys| !keys.is_empty()));
    match has_keys {
        Some(true) => Ok(jwks),
        _ => Err(invalid(
            key.to_string(),
            url,
            format!("{path} is not a JSON Web Key Set with keys"),
        )),
    }
}

/// `connections.max.reauth.ms` for `mechanism` on listener `listener`: the listener's own
/// (`listener.name.<l>.<mechanism>.connections.max.reauth.ms`) before the broker's; `None`
/// when 0 or unset (sessions last as long as their credential).
pub fn max_reauth_ms(values: &ConfigMap, listener: &str, mechanism: &str) -> Option<i64> {
    let own = format!(
        "listener.name.{}.{}.connections.max.reauth.ms",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    );
    let value = values
        .get(&own)
        .or_else(|| values.get("connections.max.reauth.ms"))?;
    value.trim().parse::<i64>().ok().filter(|ms| *ms > 0)
}

fn invalid(key: String, value: &str, reason: String) -> ConfigError {
    ConfigError::Unenforced {
        key,
        value: value.to_string(),
        reason,
    }
}

/// The settings of SASL listener `name` (upper case).
pub fn settings(values: &ConfigMap, name: &str) -> Result<SaslSettings, ConfigError> {
    let lower = name.to_ascii_lowercase();
    let own = format!("listener.name.{lower}.sasl.enabled.mechanisms");
    let (key, raw) = match values.get(&own) {
        Some(raw) => (own, raw.clone()),
        None => (
            "sasl.enabled.mechanisms".to_string(),
            values
                .get("sasl.enabled.mechanisms")
                .cloned()
                .unwrap_or_else(|| "GSSAPI".into()),
        ),
    };
    let mechanisms: Vec<String> = raw
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
        .collect();
    if mechanisms.is_empty() {
        return Err(invalid(
            key,
            &raw,
            format!("listener {name} offers no SASL mechanism"),
        ));
    }
    if let Some(other) = mechanisms
        .iter()
        .find(|m| !MECHANISMS.contains(&m.as_str()))
    {
        return Err(invalid(
            key,
            &raw,
            format!("{other} is not served (only {})", MECHANISMS.join(", ")),
        ));
    }
    let plain_users = match mechanisms.iter().any(|m| m == "PLAIN") {
        true => plain_users(values, &lower)?,
        false => BTreeMap::new(),
    };
    let oauthbearer_options = login_options(values, &lower, &mechanisms)?;
    let oauthbearer_signed = match mechanisms.iter().any(|m| m == "OAUTHBEARER") {
        true => signed_tokens(values, &lower)?,
        false => None,
    };
    Ok(SaslSettings {
        listener: name.to_string(),
        mechanisms,
        plain_users,
        oauthbearer_options,
        oauthbearer_signed,
    })
}

/// Checks the JAAS configs of listener `lower`'s SCRAM and OAUTHBEARER mechanisms (each
/// optional, naming its mechanism's login module); the OAUTHBEARER module's options.
fn login_options(
    values: &ConfigMap,
    lower: &str,
    mechanisms: &[String],
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut oauthbearer_options = BTreeMap::new();
    for mechanism in mechanisms.iter().filter(|m| *m != "PLAIN") {
        let jaas = format!(
            "listener.name.{lower}.{}.sasl.jaas.config",
            mechanism.to_ascii_lowercase()
        );
        let Some(text) = values.get(&jaas) else {
            continue;
        };
        let (module, options) = parse_jaas(text).map_err(|r| invalid(jaas.clone(), text, r))?;
        let wanted = match mechanism.as_str() {
            "OAUTHBEARER" => OAUTHBEARER_LOGIN_MODULE,
            _ => SCRAM_LOGIN_MODULE,
        };
        if module != wanted {
            return Err(invalid(
                jaas,
                text,
                format!("the login module of {mechanism} is {wanted}"),
            ));
        }
        if mechanism == "OAUTHBEARER" {
            let skew = options.get(CLOCK_SKEW_OPTION).map(|v| v.trim());
            if skew.is_some_and(|v| !v.is_empty() && v.parse::<u32>().is_err()) {
                let reason = format!("{CLOCK_SKEW_OPTION} is a number of ms, at least 0");
                return Err(invalid(jaas, text, reason));
            }
            oauthbearer_options = options;
        }
    }
    Ok(oauthbearer_options)
}

/// The unsecured validator's clock skew option, checked here (the others are free text).
pub const CLOCK_SKEW_OPTION: &str = "unsecuredValidatorAllowableClockSkewMs";

/// PLAIN's users of listener `lower`, from its JAAS config.
fn plain_users(values: &ConfigMap, lower: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let key = format!("listener.name.{lower}.plain.sasl.jaas.config");
    let Some(text) = values.get(&key) else {
        return Err(invalid(
            key.clone(),
            "",
            format!("PLAIN is offered but {key} names no users"),
        ));
    };
    let (module, options) = parse_jaas(text).map_err(|r| invalid(key.clone(), text, r))?;
    if module != PLAIN_LOGIN_MODULE {
        return Err(invalid(
            key,
            text,
            format!("the login module of PLAIN is {PLAIN_LOGIN_MODULE}"),
        ));
    }
    let users: BTreeMap<String, String> = options
        .into_iter()
        .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_string(), v)))
        .collect();
    if users.is_empty() {
        return Err(invalid(
            key,
            text,
            "no user_<name>=\"<password>\" option".into(),
        ));
    }
    Ok(users)
}

/// Parses a JAAS config value as Kafka's `sasl.jaas.config` takes it: `Class flag
/// key="value" key=value …;` (one module); its class and options. Quoted values may hold
/// `\"` and `\\`.
pub fn parse_jaas(text: &str) -> Result<(String, BTreeMap<String, String>), String> {
    let body = text
        .trim()
        .strip_suffix(';')
        .ok_or("a JAAS config ends with ';'")?;
    let mut rest = body.trim_start();
    let next_word = |rest: &mut &str| -> String {
        let s = rest.trim_start();
        let end = s.find(char::is_whitespace).unwrap_or(s.len());
        *rest = &s[end..];
        s[..end].to_string()
    };
    let module = next_word(&mut rest);
    let flag = next_word(&mut rest);
    let flags = ["required", "requisite", "sufficient", "optional"];
    if module.is_empty() || !flags.contains(&flag.as_str()) {
        return Err("a JAAS config is `LoginModuleClass required key=\"value\" …;`".into());
    }
    let mut options = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Ok((module, options));
        }
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| format!("JAAS option {rest:?} has no value"))?;
        let key = key.trim().to_string();
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => quoted_value(quoted)
                .ok_or_else(|| format!("JAAS option {key} has an unclosed quote"))?,
            None => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (after[..end].to_string(), &after[end..])
            }
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("JAAS option {key:?} is not a key"));
        }
        options.insert(key, value);
        rest = after;
    }
}

/// A quoted value up to its closing quote (`\"` and `\\` escaped), and what follows it.
fn quoted_value(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?.1),
            '"' => return Some((value, &text[i + 1..])),
            c => value.push(c),
        }
    }
    None
}

/// One SCRAM user to create with a new cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapCredential {
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub user: String,
    pub password: String,
    pub iterations: u32,
}

/// Parses `scram.bootstrap.credentials`: `SCRAM-SHA-256=[name=alice,password=alice-secret]`
/// entries (Kafka's `--add-scram` form, `iterations=` optional, 4096 by default), separated
/// by commas or semicolons.
pub fn bootstrap_credentials(values: &ConfigMap) -> Result<Vec<BootstrapCredential>, ConfigError> {
    let Some(raw) = values.get(BOOTSTRAP_KEY) else {
        return Ok(Vec::new());
    };
    let bad = |reason: &str| invalid(BOOTSTRAP_KEY.into(), "<hidden>", reason.into());
    let mut found = Vec::new();
    let mut rest = raw.trim();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ';', ' ']);
        if rest.is_empty() {
            break;
        }
        let (mechanism, after) = rest
            .split_once("=[")
            .ok_or_else(|| bad("expected MECHANISM=[name=…,password=…]"))?;
        let (inner, after) = after
            .split_once(']')
            .ok_or_else(|| bad("an entry has no closing ']'"))?;
        let mechanism = mechanism.trim().to_ascii_uppercase();
        if !mechanism.starts_with("SCRAM-") || !MECHANISMS.contains(&mechanism.as_str()) {
            return Err(bad("the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"));
        }
        let fields: BTreeMap<&str, &str> = inner
            .split(',')
            .filter_map(|f| f.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
            .collect();
        let field = |k: &str| fields.get(k).map(|v| (*v).to_string());
        let iterations = match fields.get("iterations") {
            Some(n) => n.parse().map_err(|_| bad("iterations is not a number"))?,
            None => 4096,
        };
        if !(4096..=16384).contains(&iterations) {
            return Err(bad("iterations must be within 4096 and 16384"));
        }
        found.push(BootstrapCredential {
            mechanism,
            user: field("name").ok_or_else(|| bad("an entry has no name"))?,
            password: field("password").ok_or_else(|| bad("an entry has no password"))?,
            iterations,
        });
        rest = after;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                        username=\"admin\" password=\"admin-secret\" \
                        user_admin=\"admin-secret\" user_alice=\"a \\\"quoted\\\" pass\";";

    #[test]
    fn a_plain_listener_reads_its_users_from_its_jaas_config() {
        let values = map(&[
            (
                "listener.name.sasl_ssl.sasl.enabled.mechanisms",
                "PLAIN,SCRAM-SHA-512",
            ),
            ("listener.name.sasl_ssl.plain.sasl.jaas.config", JAAS),
        ]);
        let settings = settings(&values, "SASL_SSL").expect("settings");
        assert_eq!(settings.mechanisms, ["PLAIN", "SCRAM-SHA-512"]);
        assert_eq!(settings.plain_users["alice"], "a \"quoted\" pass");
        assert_eq!(settings.plain_users.len(), 2);
    }

    #[test]
    fn unserved_mechanisms_and_missing_users_are_refused_by_key() {
        let refused = |pairs: &[(&str, &str)]| match settings(&map(pairs), "SASL_PLAINTEXT") {
            Err(ConfigError::Unenforced { key, .. }) => key,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(
            refused(&[]),
            "sasl.enabled.mechanisms",
            "Kafka's default is GSSAPI"
        );
        assert_eq!(
            refused(&[("sasl.enabled.mechanisms", "GSSAPI")]),
            "sasl.enabled.mechanisms"
        );
        let skew = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
                    required unsecuredValidatorAllowableClockSkewMs=\"-5\";";
        assert_eq!(
            refused(&[
                ("sasl.enabled.mechanisms", "OAUTHBEARER"),
                (
                    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
                    skew
                ),
            ]),
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
        );
        assert_eq!(
            refused(&[("sasl.enabled.mechanisms", "PLAIN")]),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config"
        );
        let wrong_module = "com.example.Login required user_a=\"b\";";
        assert_eq!(
            refused(&[
                ("sasl.enabled.mechanisms", "PLAIN"),
                (
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                    wrong_module
                ),
            ]),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config"
        );
        assert!(parse_jaas("Module required user_a=\"x").is_err(), "no ';'");
        assert!(parse_jaas("Module maybe;").is_err(), "flag");
        assert!(
            parse_jaas("Module required user_a=\"x;").is_err(),
            "unclosed"
        );
    }

    #[test]
    fn bootstrap_credentials_take_kafkas_add_scram_form() {
        let values = map(&[(
            BOOTSTRAP_KEY,
            "SCRAM-SHA-256=[name=alice,password=alice-secret],SCRAM-SHA-512=[name=bob,password=b,iterations=8192]",
        )]);
        let found = bootstrap_credentials(&values).expect("parsed");
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].user.as_str(), found[0].iterations),
            ("alice", 4096)
        );
        assert_eq!(
            (found[1].mechanism.as_str(), found[1].iterations),
            ("SCRAM-SHA-512", 8192)
        );
        let bad = map(&[(BOOTSTRAP_KEY, "PLAIN=[name=a,password=b]")]);
        assert!(bootstrap_credentials(&bad).is_err());
        assert!(is_sasl_key(
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"
        ));
        assert!(!is_sasl_key(
            "listener.name.sasl_ssl.gssapi.sasl.jaas.config"
        ));
        assert!(!is_sasl_key("sasl.kerberos.service.name"));
    }
}
