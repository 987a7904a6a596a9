//! SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255) with the validator Kafka ships for
//! development, OAuthBearerUnsecuredValidatorCallbackHandler: the client's first message
//! `n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01]*\x01` carries an unsecured JWT
//! (`alg` none, no signature) whose claims name the principal (`sub`, or the claim
//! `unsecuredValidatorPrincipalClaimName` names), its expiry (`exp`, required) and issue
//! time (`iat`), and its scope. A token that fails validation is answered with RFC 7628's
//! JSON error as a challenge; the client acknowledges it with `\x01` and is then refused
//! with that JSON, as Kafka's OAuthBearerSaslServer does. The token's expiry bounds the
//! session (KIP-368).

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use serde_json::Value;

/// The `\x01` that separates the parts of a message (and acknowledges an error).
const SEPARATOR: char = '\u{1}';

/// Why an OAUTHBEARER exchange failed; the text is what the client is told (Kafka's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    #[error("Invalid OAUTHBEARER client first message{0}")]
    Malformed(&'static str),
    #[error("Invalid scheme in OAUTHBEARER client first message: {0}")]
    Scheme(String),
    #[error("Extension name {0} is invalid")]
    ExtensionName(String),
    #[error(
        "Authentication failed: Client requested an authorization id ({authzid}) that is \
         different from the token's principal name ({principal})"
    )]
    AuthorizationId { authzid: String, principal: String },
    /// The token was refused: the JSON error sent as a challenge, repeated once the client
    /// acknowledged it.
    #[error("{0}")]
    Refused(String),
}

/// The unsecured validator's options, from the listener's JAAS config
/// (`unsecuredValidator*` options of OAuthBearerLoginModule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredValidator {
    pub principal_claim: String,
    pub scope_claim: String,
    pub required_scope: Vec<String>,
    pub clock_skew_ms: i64,
}

impl Default for UnsecuredValidator {
    fn default() -> Self {
        UnsecuredValidator {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: Vec::new(),
            clock_skew_ms: 0,
        }
    }
}

impl UnsecuredValidator {
    /// The validator the `unsecuredValidator*` options of the listener's JAAS config
    /// describe (blank options take Kafka's defaults).
    pub fn from_options(options: &std::collections::BTreeMap<String, String>) -> Self {
        let option = |name: &str| {
            options
                .get(&format!("unsecuredValidator{name}"))
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let defaults = UnsecuredValidator::default();
        UnsecuredValidator {
            principal_claim: option("PrincipalClaimName").unwrap_or(defaults.principal_claim),
            scope_claim: option("ScopeClaimName").unwrap_or(defaults.scope_claim),
            required_scope: option("RequiredScope")
                .map(|s| {
                    s.split(' ')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            clock_skew_ms: option("AllowableClockSkewMs")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    }
}

/// A validated token: who it names and when it expires (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub principal: String,
    pub expires_ms: i64,
}

/// Why a token is refused: RFC 7628's status, the scope that was missing, and the reason
/// (logged, not sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub scope: Option<String>,
    pub reason: String,
}

impl Invalid {
    pub(super) fn new(reason: impl Into<String>) -> Invalid {
        Invalid {
            scope: None,
            reason: reason.into(),
        }
    }

    /// The JSON error the server sends (OAuthBearerSaslServer.jsonErrorResponse).
    pub fn json(&self) -> String {
        match &self.scope {
            Some(scope) => format!(r#"{{"status":"insufficient_scope", "scope":"{scope}"}}"#),
            None => r#"{"status":"invalid_token"}"#.to_string(),
        }
    }
}

/// The token and authorization id of a client's first message.
#[derive(Debug, PartialEq, Eq)]
pub struct FirstMessage {
    pub authzid: String,
    pub token: String,
}

/// Reads a client's first message (OAuthBearerClientInitialResponse).
pub fn first_message(message: &[u8]) -> Result<FirstMessage, OAuthError> {
    let text = std::str::from_utf8(message).map_err(|_| OAuthError::Malformed(""))?;
    let rest = text.strip_prefix("n,").ok_or(OAuthError::Malformed(""))?;
    let (gs2, rest) = rest.split_once(',').ok_or(OAuthError::Malformed(""))?;
    let authzid = match gs2 {
        "" => String::new(),
        other => sasl_name(other.strip_prefix("a=").ok_or(OAuthError::Malformed(""))?)?,
    };
    let pairs = rest
        .strip_prefix(SEPARATOR)
        .and_then(|r| r.strip_suffix(SEPARATOR))
        .ok_or(OAuthError::Malformed(""))?;
    let mut auth = None;
    for pair in pairs.split_terminator(SEPARATOR) {
        let (key, value) = pair.split_once('=').ok_or(OAuthError::Malformed(""))?;
        let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
        let value_ok = !value.is_empty()
            && value
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b));
        if !key_ok || !value_ok {
            return Err(OAuthError::ExtensionName(key.to_string()));
        }
        if key == "auth" {
            auth = Some(value);
        }
    }
    let auth = auth.ok_or(OAuthError::Malformed(": 'auth' not specified"))?;
    let (scheme, token) = auth
        .split_once(' ')
        .ok_or(OAuthError::Malformed(": invalid 'auth' format"))?;
    let token = token.trim_start_matches(' ');
    let token_ok = !token.is_empty()
        && token
            .trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_~+/.".contains(&b));
    let scheme_ok = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !token_ok || !scheme_ok {
        return Err(OAuthError::Malformed(": invalid 'auth' format"));
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(OAuthError::Scheme(scheme.to_string()));
    }
    Ok(FirstMessage {
        authzid,
        token: token.to_string(),
    })
}

/// A GS2 `saslname`: `=2C` is `,` and `=3D` is `=`; other `=` or `,` are not allowed.
fn sasl_name(text: &str) -> Result<String, OAuthError> {
    let decoded = text.replace("=2C", ",").replace("=3D", "=");
    let bare = text.replace("=2C", "").replace("=3D", "");
    match !text.is_empty() && !bare.contains(['=', ',']) && text.is_ascii() {
        true => Ok(decoded),
        false => Err(OAuthError::Malformed("")),
    }
}

/// Base64url with or without padding, as JWTs are written.
pub(super) const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A part of a JWT as a JSON object.
pub(super) fn json_part(part: &str) -> Result<serde_json::Map<String, Value>, Invalid> {
    let bytes = BASE64URL
        .decode(part)
        .map_err(|_| Invalid::new("malformed Base64 URL encoded value"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Invalid::new("malformed JSON")),
    }
}

impl UnsecuredValidator {
    /// Validates an unsecured JWT at `now_ms` as Kafka's unsecured validator does.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Token, Invalid> {
        if token.contains("..") {
            return Err(Invalid::new(
                "Malformed compact serialization contains '..'",
            ));
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [header, claims, signature] = parts[..] else {
            return Err(Invalid::new(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
            ));
        };
        let header = json_part(header)?;
        let claims = json_part(claims)?;
        if header.get("alg").and_then(Value::as_str) != Some("none") {
            return Err(Invalid::new(
                "Unsecured JWS must have 'none' for an algorithm",
            ));
        }
        if !signature.is_empty() {
            return Err(Invalid::new(
                "Unsecured JWS must not contain a digital signature",
            ));
        }
        let number = |name: &str| match claims.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(Invalid::new(format!(
                "The '{name}' claim was not of type Number"
            ))),
        };
        let expires = number("exp")?.ok_or_else(|| Invalid::new("No expiration time in JWT"))?;
        let issued = number("iat")?;
        let principal = self.principal(&claims)?;
        let skew = self.clock_skew_ms as f64;
        if issued.is_some_and(|iat| 1000.0 * iat > now_ms as f64 + skew) {
            return Err(Invalid::new(
                "The Issued At value was after the indicated time",
            ));
        }
        if now_ms as f64 - skew >= 1000.0 * expires {
            return Err(Invalid::new("The token has expired"));
        }
        if issued.is_some_and(|iat| expires <= iat) {
            return Err(Invalid::new(
                "The Expiration Time was not after the Issued At time",
            ));
        }
        let scope = scope_of(&claims, &self.scope_claim);
        if let Some(missing) = self.required_scope.iter().find(|s| !scope.contains(s)) {
            return Err(Invalid {
                scope: Some(format!("[{}]", self.required_scope.join(", "))),
                reason: format!("The provided scope was missing a required scope ({missing})"),
            });
        }
        Ok(Token {
            principal,
            expires_ms: (expires * 1000.0).round() as i64,
        })
    }
}

impl UnsecuredValidator {
    /// The principal claim: a non-blank string.
    fn principal(&self, claims: &serde_json::Map<String, Value>) -> Result<String, Invalid> {
        let claim = &self.principal_claim;
        match claims.get(claim) {
            Some(Value::String(name)) if !name.trim().is_empty() => Ok(name.clone()),
            Some(Value::String(_)) | None => Err(Invalid::new(format!(
                "No principal name in JWT claim: {claim}"
            ))),
            Some(_) => Err(Invalid::new(format!(
                "The {claim} claim had the incorrect type"
            ))),
        }
    }
}

/// The scope claim `name`: one string, or a list of them (blanks left out).
pub(super) fn scope_of(claims: &serde_json::Map<String, Value>, name: &str) -> Vec<String> {
    match claims.get(name) {
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

/// How a listener validates OAUTHBEARER tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenValidator {
    /// Kafka's default: unsecured JWTs (development).
    Unsecured(UnsecuredValidator),
    /// Kafka's OAuthBearerValidatorCallbackHandler: JWTs signed by a key of a JWKS.
    Signed(super::jwks::SignedValidator),
}

impl TokenValidator {
    /// Validates `token` at `now_ms`.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Token, Invalid> {
        match self {
            TokenValidator::Unsecured(v) => v.validate(token, now_ms),
            TokenValidator::Signed(v) => v.validate(token, now_ms),
        }
    }
}

/// Whether `token` is the client's acknowledgement of an error challenge.
pub fn is_error_acknowledgement(token: &[u8]) -> bool {
    token == [SEPARATOR as u8]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        let encode =
            |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s.as_bytes());
        format!("{}.{}.", encode(r#"{"alg":"none"}"#), encode(claims))
    }

    fn message(token: &str) -> Vec<u8> {
        format!("n,,\u{1}auth=Bearer {token}\u{1}traceId=42\u{1}\u{1}").into_bytes()
    }

    #[test]
    fn a_clients_first_message_gives_its_token_and_authorization_id() {
        let token = jwt(r#"{"sub":"alice","exp":2000000000}"#);
        assert_eq!(
            first_message(&message(&token)),
            Ok(FirstMessage {
                authzid: String::new(),
                token: token.clone()
            })
        );
        let with_authzid = format!("n,a=al=2Cice,\u{1}auth=bearer {token}\u{1}\u{1}");
        assert_eq!(
            first_message(with_authzid.as_bytes())
                .expect("valid")
                .authzid,
            "al,ice"
        );
        for bad in [
            "y,,\u{1}auth=Bearer x\u{1}\u{1}".to_string(),
            "n,,\u{1}key=v\u{1}\u{1}".to_string(),
            format!("n,,\u{1}auth=Basic {token}\u{1}\u{1}"),
            "n,,\u{1}auth=Bearer a b\u{1}\u{1}".to_string(),
        ] {
            assert!(first_message(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unsecured_tokens_are_validated_as_kafka_validates_them() {
        let validator = UnsecuredValidator::default();
        let now = 1_700_000_000_000;
        let good = jwt(r#"{"sub":"alice","iat":1700000000,"exp":1700003600,"scope":"a b"}"#);
        assert_eq!(
            validator.validate(&good, now),
            Ok(Token {
                principal: "alice".into(),
                expires_ms: 1_700_003_600_000
            })
        );
        for (claims, reason) in [
            (r#"{"sub":"alice"}"#, "No expiration time"),
            (r#"{"exp":1700003600}"#, "No principal name"),
            (r#"{"sub":"alice","exp":1699999999}"#, "expired"),
            (
                r#"{"sub":"alice","exp":1700003600,"iat":1700000100}"#,
                "Issued At",
            ),
        ] {
            let refused = validator.validate(&jwt(claims), now).expect_err(claims);
            assert!(refused.reason.contains(reason), "{claims}: {refused:?}");
            assert_eq!(refused.json(), r#"{"status":"invalid_token"}"#);
        }
        let signed = format!("{}signature", jwt(r#"{"sub":"a","exp":1700003600}"#));
        assert!(validator.validate(&signed, now).is_err());
        let scoped = UnsecuredValidator {
            required_scope: vec!["write".into()],
            ..UnsecuredValidator::default()
        };
        let refused = scoped
            .validate(
                &jwt(r#"{"sub":"a","exp":1700003600,"scope":["read"]}"#),
                now,
            )
            .expect_err("scope");
        assert_eq!(
            refused.json(),
            r#"{"status":"insufficient_scope", "scope":"[write]"}"#
        );
    }
}
