//! Delegation tokens (KIP-48, KIP-373; Kafka's DelegationTokenManager and
//! DelegationTokenControlManager): a user logged in with SASL or a client certificate asks
//! for a token; the token's id and HMAC (HMAC-SHA512 of the id under
//! `delegation.token.secret.key`, which every node shares) then log in with SCRAM, the id as
//! the user name, the base64 HMAC as the password and the `tokenauth=true` extension, as the
//! token's owner. A token expires at its expiry time unless renewed, and at its max time in
//! any case; the active controller removes expired tokens every
//! `delegation.token.expiry.check.interval.ms`.
//!
//! This file holds what a token is and the rules of creating, renewing, expiring and
//! finding one; the controller keeps tokens in the metadata log, the API answers requests.
//!
//! Must not: keep a token's HMAC anywhere (it is derived from the secret when needed), or
//! let a token-authenticated connection make, renew or expire tokens.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ring::hmac;
use serde::{Deserialize, Serialize};

use super::scram::ITERATIONS_MIN;
use super::{ScramCredential, ScramMechanism};
use crate::config::security::TOKEN_KEYS;
use crate::config::ConfigMap;

/// One delegation token, as the metadata log keeps it (Kafka's DelegationTokenRecord).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationToken {
    pub token_id: String,
    /// Whom the token logs in as (`User:name`).
    pub owner: String,
    /// Who asked for it.
    pub requester: String,
    /// Who may renew or expire it besides its owner.
    pub renewers: Vec<String>,
    pub issue_ms: i64,
    /// It expires at this time at the latest, renewed or not.
    pub max_ms: i64,
    /// It expires at this time unless renewed.
    pub expiry_ms: i64,
}

impl DelegationToken {
    /// Whether the token is past its expiry or its max time.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.max_ms < now_ms || self.expiry_ms < now_ms
    }

    /// Whether `principal` may renew or expire it: its owner or a renewer.
    pub fn renewable_by(&self, principal: &str) -> bool {
        self.owner == principal || self.renewers.iter().any(|r| r == principal)
    }

    /// Whether `principal` may describe it without an ACL: its owner, requester or a
    /// renewer (Kafka's `ownerOrRenewer`).
    pub fn describable_by(&self, principal: &str) -> bool {
        self.requester == principal || self.renewable_by(principal)
    }
}

/// Why a token request is refused (Kafka's errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum TokenError {
    #[error("Delegation Token feature is not enabled (delegation.token.secret.key is not set)")]
    AuthDisabled,
    #[error("Delegation Token is not found on server")]
    NotFound,
    #[error("Specified Principal is not valid Owner/Renewer")]
    OwnerMismatch,
    #[error(
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on \
         delegation token authenticated channels"
    )]
    RequestNotAllowed,
    #[error("Delegation Token authorization failed")]
    AuthorizationFailed,
    #[error("Delegation Token is expired")]
    Expired,
    #[error("Renewers must be User principals")]
    InvalidPrincipalType,
}

impl TokenError {
    /// The error's wire code.
    pub fn code(self) -> i16 {
        match self {
            TokenError::AuthDisabled => 61,
            TokenError::NotFound => 62,
            TokenError::OwnerMismatch => 63,
            TokenError::RequestNotAllowed => 64,
            TokenError::AuthorizationFailed => 65,
            TokenError::Expired => 66,
            TokenError::InvalidPrincipalType => 67,
        }
    }
}

/// A change of a token's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TokenChange {
    Renew,
    Expire,
}

/// What renewing or expiring a token does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// The token is removed now (a negative period), at this time.
    Now(i64),
    /// The token now expires at this time.
    At(i64),
}

/// The token keys of a broker's config.
#[derive(Clone)]
pub struct TokenSettings {
    /// `delegation.token.secret.key` (or its old name `delegation.token.master.key`);
    /// tokens are disabled without it.
    secret: Option<String>,
    /// `delegation.token.max.lifetime.ms`.
    pub max_lifetime_ms: i64,
    /// `delegation.token.expiry.time.ms`: how long a token lives, and a renewal extends it.
    pub expiry_time_ms: i64,
    /// `delegation.token.expiry.check.interval.ms`.
    pub check_interval_ms: i64,
}

impl std::fmt::Debug for TokenSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSettings")
            .field("enabled", &self.enabled())
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("expiry_time_ms", &self.expiry_time_ms)
            .finish_non_exhaustive()
    }
}

/// A sum of times that stays at `i64::MAX` instead of overflowing, as Kafka's.
fn later(at: i64, by: i64) -> i64 {
    at.saturating_add(by)
}

impl TokenSettings {
    /// The settings of `values`; a bad number stays at its default (the config check
    /// refuses it first).
    pub fn from_config(values: &ConfigMap) -> Self {
        let ms = |key: &str| {
            let default = TOKEN_KEYS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
            values
                .get(key)
                .map(String::as_str)
                .or(default)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(i64::MAX)
        };
        let secret = ["delegation.token.secret.key", "delegation.token.master.key"]
            .iter()
            .filter_map(|key| values.get(*key))
            .find(|v| !v.is_empty())
            .cloned();
        TokenSettings {
            secret,
            max_lifetime_ms: ms("delegation.token.max.lifetime.ms"),
            expiry_time_ms: ms("delegation.token.expiry.time.ms"),
            check_interval_ms: ms("delegation.token.expiry.check.interval.ms"),
        }
    }

    /// Whether tokens are enabled (a secret is set).
    pub fn enabled(&self) -> bool {
        self.secret.is_some()
    }

    /// The HMAC of token `token_id` (its password, base64-encoded), once tokens are enabled.
    pub fn hmac(&self, token_id: &str) -> Option<Vec<u8>> {
        let secret = self.secret.as_ref()?;
        let key = hmac::Key::new(hmac::HMAC_SHA512, secret.as_bytes());
        Some(hmac::sign(&key, token_id.as_bytes()).as_ref().to_vec())
    }

    /// The token of `tokens` whose HMAC is `hmac`.
    pub fn find_by_hmac<'a>(
        &self,
        mut tokens: impl Iterator<Item = &'a DelegationToken>,
        hmac: &[u8],
    ) -> Option<&'a DelegationToken> {
        tokens.find(|t| {
            self.hmac(&t.token_id)
                .is_some_and(|own| super::equal_in_constant_time(&own, hmac))
        })
    }

    /// The SCRAM credential a token logs in with: its base64 HMAC as the password, at
    /// SCRAM's least iteration count, as Kafka derives it.
    pub fn credential(
        &self,
        token: &DelegationToken,
        mechanism: ScramMechanism,
    ) -> Option<ScramCredential> {
        let password = B64.encode(self.hmac(&token.token_id)?);
        ScramCredential::from_password(mechanism, &password, ITERATIONS_MIN).ok()
    }

    /// A new token `token_id` for `owner`, asked by `requester` at `now_ms`: it lives
    /// `delegation.token.expiry.time.ms` and at most `max_lifetime_ms` (the config's when
    /// not positive, and never more).
    pub fn create(
        &self,
        token_id: String,
        (owner, requester): (&str, &str),
        renewers: Vec<String>,
        max_lifetime_ms: i64,
        now_ms: i64,
    ) -> Result<DelegationToken, TokenError> {
        if !self.enabled() {
            return Err(TokenError::AuthDisabled);
        }
        if renewers.iter().any(|r| !r.starts_with("User:")) {
            return Err(TokenError::InvalidPrincipalType);
        }
        let lifetime = match max_lifetime_ms > 0 {
            true => max_lifetime_ms.min(self.max_lifetime_ms),
            false => self.max_lifetime_ms,
        };
        let max_ms = later(now_ms, lifetime);
        Ok(DelegationToken {
            token_id,
            owner: owner.to_string(),
            requester: requester.to_string(),
            renewers,
            issue_ms: now_ms,
            max_ms,
            expiry_ms: max_ms.min(later(now_ms, self.expiry_time_ms)),
        })
    }

    /// The token of `hmac`.
    fn of_hmac<'a>(
        &self,
        tokens: impl Iterator<Item = &'a DelegationToken>,
        hmac: &[u8],
    ) -> Result<&'a DelegationToken, TokenError> {
        if !self.enabled() {
            return Err(TokenError::AuthDisabled);
        }
        self.find_by_hmac(tokens, hmac).ok_or(TokenError::NotFound)
    }

    /// The token of `hmac` renewed or expired by `principal` at `now_ms` after
    /// `period_ms`, and what that does. A renewal lasts the config's expiry time when the
    /// period is not positive, and never more; an expiry with a negative period removes the
    /// token now; neither goes past the token's max time. The checks come in Kafka's order
    /// (renewal: unknown, expired, not a renewer; expiry: unknown, not a renewer, expired).
    pub fn change<'a>(
        &self,
        change: TokenChange,
        tokens: impl Iterator<Item = &'a DelegationToken>,
        (hmac, principal): (&[u8], &str),
        period_ms: i64,
        now_ms: i64,
    ) -> Result<(DelegationToken, Expiry), TokenError> {
        let token = self.of_hmac(tokens, hmac)?;
        let renewer = || match token.renewable_by(principal) {
            true => Ok(()),
            false => Err(TokenError::OwnerMismatch),
        };
        let live = || match token.expired(now_ms) {
            true => Err(TokenError::Expired),
            false => Ok(()),
        };
        let period = match change {
            TokenChange::Renew => {
                live().and_then(|()| renewer())?;
                match period_ms > 0 {
                    true => period_ms.min(self.expiry_time_ms),
                    false => self.expiry_time_ms,
                }
            }
            TokenChange::Expire => {
                renewer()?;
                if period_ms < 0 {
                    return Ok((token.clone(), Expiry::Now(now_ms)));
                }
                live()?;
                period_ms
            }
        };
        let expiry_ms = token.max_ms.min(later(now_ms, period));
        let changed = DelegationToken {
            expiry_ms,
            ..token.clone()
        };
        Ok((changed, Expiry::At(expiry_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenChange::{Expire, Renew};

    fn settings(secret: Option<&str>) -> TokenSettings {
        let mut values = ConfigMap::new();
        if let Some(secret) = secret {
            values.insert("delegation.token.secret.key".into(), secret.into());
        }
        values.insert("delegation.token.expiry.time.ms".into(), "1000".into());
        values.insert("delegation.token.max.lifetime.ms".into(), "5000".into());
        TokenSettings::from_config(&values)
    }

    #[test]
    fn tokens_live_their_expiry_time_within_their_max_lifetime() {
        let s = settings(Some("secret"));
        let renewers = vec!["User:bob".to_string()];
        let token = s
            .create("id".into(), ("User:alice", "User:alice"), renewers, -1, 100)
            .expect("created");
        assert_eq!(
            (token.issue_ms, token.expiry_ms, token.max_ms),
            (100, 1100, 5100)
        );
        let short = s
            .create("id2".into(), ("User:a", "User:a"), vec![], 500, 100)
            .expect("created");
        assert_eq!((short.expiry_ms, short.max_ms), (600, 600));
        let hmac = s.hmac("id").expect("enabled");
        assert_eq!(hmac.len(), 64, "HMAC-SHA512");
        let tokens = [token.clone(), short];
        let renewed = s
            .change(Renew, tokens.iter(), (&hmac, "User:bob"), -1, 1000)
            .expect("a renewer renews")
            .0;
        assert_eq!(renewed.expiry_ms, 2000);
        let short_hmac = s.hmac("id2").expect("enabled");
        let renewed = s
            .change(Renew, tokens.iter(), (&short_hmac, "User:a"), 10_000, 500)
            .expect("the owner renews")
            .0;
        assert_eq!(renewed.expiry_ms, 600, "never past the max time");
        let by = |who| (hmac.as_slice(), who);
        assert_eq!(
            s.change(Renew, tokens.iter(), by("User:carol"), -1, 200),
            Err(TokenError::OwnerMismatch)
        );
        assert_eq!(
            s.change(Renew, tokens.iter(), by("User:alice"), -1, 6000),
            Err(TokenError::Expired)
        );
        assert_eq!(
            s.change(
                Renew,
                tokens.iter(),
                (b"not an hmac", "User:alice"),
                -1,
                200
            ),
            Err(TokenError::NotFound)
        );
        let (_, expiry) = s
            .change(Expire, tokens.iter(), by("User:alice"), -1, 300)
            .expect("expired");
        assert_eq!(expiry, Expiry::Now(300));
        assert_eq!(
            s.change(Expire, tokens.iter(), by("User:carol"), -1, 300),
            Err(TokenError::OwnerMismatch)
        );
        let (later, expiry) = s
            .change(Expire, tokens.iter(), by("User:alice"), 50, 300)
            .expect("expires later");
        assert_eq!((later.expiry_ms, expiry), (350, Expiry::At(350)));
    }

    #[test]
    fn without_a_secret_nothing_is_made_and_renewers_must_be_users() {
        let off = settings(None);
        assert!(!off.enabled());
        assert_eq!(
            off.create("id".into(), ("User:a", "User:a"), vec![], -1, 0),
            Err(TokenError::AuthDisabled)
        );
        let on = settings(Some("secret"));
        assert_eq!(
            on.create(
                "id".into(),
                ("User:a", "User:a"),
                vec!["Group:g".into()],
                -1,
                0
            ),
            Err(TokenError::InvalidPrincipalType)
        );
        assert_ne!(on.hmac("a"), settings(Some("other")).hmac("a"));
        assert!(!format!("{on:?}").contains("\"secret\""), "not printed");
    }
}
