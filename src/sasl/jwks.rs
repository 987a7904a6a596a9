//! Signed OAUTHBEARER tokens, checked as Kafka's OAuthBearerValidatorCallbackHandler
//! checks them (jose4j underneath): a JWS signed with a key of the listener's JSON Web Key
//! Set (RS256/384/512, PS256/384/512, ES256/384, EdDSA; `none` and shared-secret
//! algorithms are refused), with `exp` and `iat` required and `nbf` honoured within the
//! allowed clock skew, the audience and issuer expected when configured (an `aud` claim
//! with no audience configured is refused, as jose4j refuses it), and the principal in the
//! configured subject claim.

use ring::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use serde_json::{Map, Value};

use super::oauthbearer::{json_part, scope_of, Invalid, Token, BASE64URL};
use base64::Engine as _;

/// How signed tokens are checked: the listener's key set and expected claims.
pub use crate::config::sasl::SignedTokens as SignedValidator;

/// One public key of the set.
struct Jwk<'a> {
    kid: Option<&'a str>,
    kty: &'a str,
    fields: &'a Map<String, Value>,
}

impl Jwk<'_> {
    fn bytes(&self, name: &str) -> Option<Vec<u8>> {
        let text = self.fields.get(name)?.as_str()?;
        BASE64URL.decode(text).ok()
    }

    /// Whether this key verifies `signature` over `message` with `alg`.
    fn verifies(&self, alg: &str, message: &[u8], signature: &[u8]) -> bool {
        match (self.kty, alg) {
            ("RSA", _) => {
                let Some(params) = rsa_params(alg) else {
                    return false;
                };
                let (Some(n), Some(e)) = (self.bytes("n"), self.bytes("e")) else {
                    return false;
                };
                let key = signature::RsaPublicKeyComponents { n: &n, e: &e };
                key.verify(params, message, signature).is_ok()
            }
            ("EC", "ES256" | "ES384") => {
                let (curve, algorithm): (&str, &dyn VerificationAlgorithm) = match alg {
                    "ES256" => ("P-256", &signature::ECDSA_P256_SHA256_FIXED),
                    _ => ("P-384", &signature::ECDSA_P384_SHA384_FIXED),
                };
                if self.fields.get("crv").and_then(Value::as_str) != Some(curve) {
                    return false;
                }
                let (Some(x), Some(y)) = (self.bytes("x"), self.bytes("y")) else {
                    return false;
                };
                let point: Vec<u8> = [&[4u8][..], &x, &y].concat();
                UnparsedPublicKey::new(algorithm, point)
                    .verify(message, signature)
                    .is_ok()
            }
            ("OKP", "EdDSA") => self.bytes("x").is_some_and(|x| {
                UnparsedPublicKey::new(&signature::ED25519, x)
                    .verify(message, signature)
                    .is_ok()
            }),
            _ => false,
        }
    }
}

fn rsa_params(alg: &str) -> Option<&'static signature::RsaParameters> {
    Some(match alg {
        "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
        "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
        "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
        "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
        "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
        "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
        _ => return None,
    })
}

fn number(claims: &Map<String, Value>, name: &str, required: bool) -> Result<Option<f64>, Invalid> {
    match claims.get(name) {
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(Invalid::new(format!("The '{name}' claim is not a number"))),
        None if required => Err(Invalid::new(format!("No {name} claim present"))),
        None => Ok(None),
    }
}

impl SignedValidator {
    /// Validates the signed JWT `token` at `now_ms`.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Token, Invalid> {
        let parts: Vec<&str> = token.split('.').collect();
        let [header_part, claims_part, signature_part] = parts[..] else {
            return Err(Invalid::new("not a JWS compact serialization"));
        };
        let header = json_part(header_part)?;
        let claims = json_part(claims_part)?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("none");
        let signature = BASE64URL
            .decode(signature_part)
            .map_err(|_| Invalid::new("malformed signature"))?;
        self.verify(&header, alg, token, &signature)?;
        let now_s = now_ms as f64 / 1000.0;
        let skew = self.clock_skew_s as f64;
        let expires = number(&claims, "exp", true)?.unwrap_or_default();
        number(&claims, "iat", true)?;
        if now_s >= expires + skew {
            return Err(Invalid::new("The JWT is no longer valid (exp)"));
        }
        if number(&claims, "nbf", false)?.is_some_and(|nbf| now_s + skew < nbf) {
            return Err(Invalid::new("The JWT is not yet valid (nbf)"));
        }
        self.check_audience_and_issuer(&claims)?;
        let principal = match claims.get(&self.sub_claim) {
            Some(Value::String(sub)) if !sub.trim().is_empty() => sub.trim().to_string(),
            _ => {
                return Err(Invalid::new(format!(
                    "The {} claim is missing or blank",
                    self.sub_claim
                )))
            }
        };
        let _scope = scope_of(&claims, &self.scope_claim);
        Ok(Token {
            principal,
            expires_ms: (expires * 1000.0).round() as i64,
        })
    }

    fn verify(
        &self,
        header: &Map<String, Value>,
        alg: &str,
        token: &str,
        signature: &[u8],
    ) -> Result<(), Invalid> {
        if alg == "none" || alg.starts_with("HS") {
            return Err(Invalid::new(format!("the algorithm {alg} is not allowed")));
        }
        let message = &token.as_bytes()[..token.rfind('.').unwrap_or(0)];
        let set: Value = serde_json::from_str(&self.jwks)
            .map_err(|_| Invalid::new("the key set cannot be read"))?;
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let kid = header.get("kid").and_then(Value::as_str);
        let verified = keys
            .iter()
            .filter_map(Value::as_object)
            .map(|fields| Jwk {
                kid: fields.get("kid").and_then(Value::as_str),
                kty: fields
                    .get("kty")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                fields,
            })
            .filter(|key| kid.is_none() || key.kid == kid)
            .filter(|key| {
                key.fields
                    .get("alg")
                    .and_then(Value::as_str)
                    .is_none_or(|a| a == alg)
            })
            .any(|key| key.verifies(alg, message, signature));
        match verified {
            true => Ok(()),
            false => Err(Invalid::new(format!(
                "no key of the set (kid {kid:?}) verifies the {alg} signature"
            ))),
        }
    }

    fn check_audience_and_issuer(&self, claims: &Map<String, Value>) -> Result<(), Invalid> {
        let audience: Vec<&str> = match claims.get("aud") {
            Some(Value::String(aud)) => vec![aud.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let present = claims.contains_key("aud");
        match (self.audience.is_empty(), present) {
            (true, true) => {
                return Err(Invalid::new(
                    "an aud claim is present but no expected audience is configured",
                ))
            }
            (false, _)
                if !audience
                    .iter()
                    .any(|a| self.audience.iter().any(|e| e == a)) =>
            {
                return Err(Invalid::new(format!(
                    "the audience {audience:?} is not one expected"
                )))
            }
            _ => {}
        }
        if let Some(expected) = &self.issuer {
            if claims.get("iss").and_then(Value::as_str) != Some(expected.as_str()) {
                return Err(Invalid::new("the issuer is not the one expected"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{Ed25519KeyPair, KeyPair};

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// An Ed25519 key pair, its JWKS, and a signer of claims.
    fn key() -> (Ed25519KeyPair, String) {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("pair");
        let x = b64(pair.public_key().as_ref());
        let jwks = format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"{x}"}}]}}"#);
        (pair, jwks)
    }

    fn signed(pair: &Ed25519KeyPair, header: &str, claims: &str) -> String {
        let message = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
        let signature = pair.sign(message.as_bytes());
        format!("{message}.{}", b64(signature.as_ref()))
    }

    fn validator(jwks: String) -> SignedValidator {
        SignedValidator {
            jwks,
            audience: vec!["kafka".into()],
            issuer: Some("https://issuer".into()),
            sub_claim: "sub".into(),
            scope_claim: "scope".into(),
            clock_skew_s: 30,
        }
    }

    #[test]
    fn signed_tokens_are_checked_against_the_key_set_and_the_claims() {
        let (pair, jwks) = key();
        let validator = validator(jwks);
        let now = 1_700_000_000_000;
        let header = r#"{"alg":"EdDSA","kid":"k1"}"#;
        let good = r#"{"sub":"alice","iat":1700000000,"exp":1700003600,"aud":"kafka","iss":"https://issuer"}"#;
        assert_eq!(
            validator.validate(&signed(&pair, header, good), now),
            Ok(Token {
                principal: "alice".into(),
                expires_ms: 1_700_003_600_000
            })
        );
        let (stranger, _) = key();
        assert!(validator
            .validate(&signed(&stranger, header, good), now)
            .is_err());
        let unsigned = format!(
            "{}.",
            &signed(&pair, r#"{"alg":"none"}"#, good)
                .rsplit_once('.')
                .expect("dot")
                .0
        );
        assert!(validator.validate(&unsigned, now).is_err());
        for (claims, reason) in [
            (
                r#"{"sub":"a","iat":1,"exp":1699999000,"aud":"kafka","iss":"https://issuer"}"#,
                "exp",
            ),
            (
                r#"{"sub":"a","exp":1700003600,"aud":"kafka","iss":"https://issuer"}"#,
                "iat",
            ),
            (
                r#"{"sub":"a","iat":1,"exp":1700003600,"aud":"other","iss":"https://issuer"}"#,
                "audience",
            ),
            (
                r#"{"sub":"a","iat":1,"exp":1700003600,"aud":"kafka","iss":"elsewhere"}"#,
                "issuer",
            ),
            (
                r#"{"iat":1,"exp":1700003600,"aud":"kafka","iss":"https://issuer"}"#,
                "sub",
            ),
        ] {
            let refused = validator
                .validate(&signed(&pair, header, claims), now)
                .expect_err(claims);
            assert!(refused.reason.contains(reason), "{claims}: {refused:?}");
        }
        let open = SignedValidator {
            audience: Vec::new(),
            issuer: None,
            ..validator
        };
        let with_aud = signed(&pair, header, good);
        assert!(
            open.validate(&with_aud, now).is_err(),
            "aud without an expected audience"
        );
    }
}
