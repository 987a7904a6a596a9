//! SASL authentication as Kafka's brokers serve it (KIP-43, KIP-84, KIP-152, KIP-255): the
//! mechanisms highwater enforces — PLAIN against the listener's JAAS users, SCRAM-SHA-256
//! and SCRAM-SHA-512 against credentials kept in the metadata log (or a delegation token's,
//! `delegation_token`), OAUTHBEARER with
//! Kafka's unsecured-JWT validator — and one exchange's steps, from the client's first
//! token to an authenticated user (with the expiry of its credential, if it has one) or a
//! refusal.
//!
//! Must not: know about sockets or Kafka requests; the server feeds the tokens of
//! SaslAuthenticate to an [`Exchange`] and acts on its answer.

pub mod delegation_token;
pub mod jwks;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

use std::collections::BTreeMap;

pub use scram::{ScramCredential, ScramMechanism};

/// Whether `a` and `b` are equal, in a time that depends on their length only (a password
/// or a key is compared without telling how much of it matched).
fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A SASL mechanism highwater serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism called `name` (as SaslHandshake and `sasl.enabled.mechanisms` name it).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }

    /// The mechanism's name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// Why an exchange failed; the text is what the client is told (Kafka's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    #[error(transparent)]
    Plain(#[from] plain::PlainError),
    #[error(transparent)]
    Scram(#[from] scram::ScramError),
    #[error(transparent)]
    OAuth(#[from] oauthbearer::OAuthError),
    #[error("Authentication failed: SASL exchange already complete")]
    Complete,
}

/// Where a user's credentials are looked up.
pub trait Credentials {
    /// PLAIN users and passwords of the listener.
    fn plain_users(&self) -> &BTreeMap<String, String>;
    /// The SCRAM credential of `user` for `mechanism`, if it has one.
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
    /// The SCRAM credential of delegation token `token_id` for `mechanism`, its owner's
    /// name and its expiry (ms since the epoch), if it is a token that has not expired.
    fn delegation_token(
        &self,
        token_id: &str,
        mechanism: ScramMechanism,
    ) -> Option<(ScramCredential, String, i64)>;
    /// How the listener validates OAUTHBEARER tokens.
    fn oauth_validator(&self) -> &oauthbearer::TokenValidator;
    /// The time tokens are validated at, in ms since the epoch.
    fn now_ms(&self) -> i64;
}

/// One exchange, between the client's tokens.
#[derive(Debug)]
pub enum Exchange {
    /// Waiting for the client's first token.
    Start(Mechanism),
    /// SCRAM: waiting for the client-final message; with a delegation token, its owner's
    /// name and expiry.
    ScramFinal(Box<scram::ScramServer>, Option<(String, i64)>),
    /// OAUTHBEARER: the token was refused with this JSON error; waiting for the client's
    /// acknowledgement.
    OAuthRefused(String),
    /// Authenticated (or failed): nothing more is taken.
    Done,
}

/// What a token led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge; the exchange goes on.
    Challenge(Vec<u8>),
    /// `user` authenticated; send `response` (the server's last message, maybe empty).
    /// `expires_ms`: when its credential expires (ms since the epoch), if it does;
    /// `token`: whether it logged in with a delegation token (as its owner).
    Authenticated {
        user: String,
        response: Vec<u8>,
        expires_ms: Option<i64>,
        token: bool,
    },
}

impl Exchange {
    /// Takes the client's next token.
    pub fn step(&mut self, token: &[u8], credentials: &dyn Credentials) -> Result<Step, SaslError> {
        match std::mem::replace(self, Exchange::Done) {
            Exchange::Start(Mechanism::Plain) => {
                let user = plain::authenticate(token, credentials.plain_users())?;
                Ok(Step::Authenticated {
                    user,
                    response: Vec::new(),
                    expires_ms: None,
                    token: false,
                })
            }
            Exchange::Start(Mechanism::Scram(mechanism)) => {
                let (credential, delegated) = scram_credential(mechanism, token, credentials)?;
                let (server, first) = scram::ScramServer::start(mechanism, token, credential)?;
                *self = Exchange::ScramFinal(Box::new(server), delegated);
                Ok(Step::Challenge(first))
            }
            Exchange::ScramFinal(server, delegated) => {
                let (user, response) = server.finish(token)?;
                Ok(match delegated {
                    Some((owner, expires_ms)) => Step::Authenticated {
                        user: owner,
                        response,
                        expires_ms: Some(expires_ms),
                        token: true,
                    },
                    None => Step::Authenticated {
                        user,
                        response,
                        expires_ms: None,
                        token: false,
                    },
                })
            }
            Exchange::Start(Mechanism::OAuthBearer) => {
                let first = oauthbearer::first_message(token)?;
                let validator = credentials.oauth_validator();
                let valid = match validator.validate(&first.token, credentials.now_ms()) {
                    Ok(valid) => valid,
                    Err(invalid) => {
                        tracing::debug!(reason = %invalid.reason, "OAUTHBEARER token refused");
                        let json = invalid.json();
                        *self = Exchange::OAuthRefused(json.clone());
                        return Ok(Step::Challenge(json.into_bytes()));
                    }
                };
                if !first.authzid.is_empty() && first.authzid != valid.principal {
                    return Err(oauthbearer::OAuthError::AuthorizationId {
                        authzid: first.authzid,
                        principal: valid.principal,
                    }
                    .into());
                }
                Ok(Step::Authenticated {
                    user: valid.principal,
                    response: Vec::new(),
                    expires_ms: Some(valid.expires_ms),
                    token: false,
                })
            }
            Exchange::OAuthRefused(json) => match oauthbearer::is_error_acknowledgement(token) {
                true => Err(oauthbearer::OAuthError::Refused(json).into()),
                false => Err(oauthbearer::OAuthError::Malformed("").into()),
            },
            Exchange::Done => Err(SaslError::Complete),
        }
    }
}

/// The credential a SCRAM client-first message logs in with: a user's, or a delegation
/// token's (`tokenauth=true`) with its owner's name and expiry.
fn scram_credential(
    mechanism: ScramMechanism,
    client_first: &[u8],
    credentials: &dyn Credentials,
) -> Result<(ScramCredential, Option<(String, i64)>), scram::ScramError> {
    let first = scram::ScramServer::first_of(client_first)?;
    if first.token {
        let (credential, owner, expires_ms) = credentials
            .delegation_token(&first.user, mechanism)
            .ok_or(scram::ScramError::InvalidToken(first.user))?;
        return Ok((credential, Some((owner, expires_ms))));
    }
    let credential = credentials
        .scram(&first.user, mechanism)
        .ok_or(scram::ScramError::InvalidCredentials)?;
    Ok((credential, None))
}
