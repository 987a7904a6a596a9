//! Delegation tokens as the active controller changes them (Kafka's
//! DelegationTokenControlManager): created, renewed and expired by the rules of
//! `sasl::delegation_token`, with the controller's own secret and clock, each change one
//! record; and expired tokens swept away every `delegation.token.expiry.check.interval.ms`.

use super::{conflict, ActiveController, ControllerReply};
use crate::controller::error::ControllerError;
use crate::controller::state::Record;
use crate::metadata::uuid_text::base64url;
use crate::sasl::delegation_token::{
    DelegationToken, Expiry, TokenChange, TokenError, TokenSettings,
};

/// A token request's answer: the token as it now is (expired by request: its expiry is
/// the time it was removed), or why not.
pub type TokenOutcome = Result<DelegationToken, TokenError>;

/// A token request to the active controller.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum TokenRequest {
    /// A new token for `owner`, asked by `requester` (`User:name` each).
    Create {
        owner: String,
        requester: String,
        renewers: Vec<String>,
        max_lifetime_ms: i64,
    },
    /// Renews or expires the token of `hmac` after `period_ms`, asked by `principal`.
    Change {
        change: TokenChange,
        principal: String,
        hmac: Vec<u8>,
        period_ms: i64,
    },
}

impl ActiveController {
    pub(super) fn token_settings(&self) -> TokenSettings {
        TokenSettings::from_config(&self.config.values)
    }

    /// Creates, renews or expires a token.
    pub(super) async fn change_token(
        &self,
        request: TokenRequest,
    ) -> Result<ControllerReply, ControllerError> {
        let settings = self.token_settings();
        let now = self.clock.now_ms();
        let (outcome, record) = match request {
            TokenRequest::Create {
                owner,
                requester,
                renewers,
                max_lifetime_ms,
            } => {
                let id = base64url(uuid::Uuid::new_v4());
                let who = (owner.as_str(), requester.as_str());
                match settings.create(id, who, renewers, max_lifetime_ms, now) {
                    Ok(token) => (Ok(token.clone()), Some(Record::PutDelegationToken(token))),
                    Err(error) => (Err(error), None),
                }
            }
            TokenRequest::Change {
                change,
                principal,
                hmac,
                period_ms,
            } => {
                let asked = (hmac.as_slice(), principal.as_str());
                let tokens = self.state(|s| s.delegation_tokens.clone());
                match settings.change(change, tokens.values(), asked, period_ms, now) {
                    Ok((token, Expiry::Now(at))) => {
                        let token_ids = vec![token.token_id.clone()];
                        let removed = DelegationToken {
                            expiry_ms: at,
                            ..token
                        };
                        (
                            Ok(removed),
                            Some(Record::RemoveDelegationTokens { token_ids }),
                        )
                    }
                    Ok((token, Expiry::At(_))) => {
                        (Ok(token.clone()), Some(Record::PutDelegationToken(token)))
                    }
                    Err(error) => (Err(error), None),
                }
            }
        };
        if let Some(record) = record {
            match &record {
                Record::PutDelegationToken(t) => tracing::info!(token_id = %t.token_id,
                    owner = %t.owner, expiry_ms = t.expiry_ms, max_ms = t.max_ms,
                    "delegation token created or renewed"),
                _ => tracing::info!(token_ids = ?record, "delegation token expired by request"),
            }
            conflict(self.propose(record).await?)?;
        }
        Ok(ControllerReply::Token(outcome))
    }

    /// Removes the tokens expired at the controller's time (Kafka's
    /// sweepExpiredDelegationTokens).
    pub(super) async fn sweep_expired_tokens(&self) -> Result<(), ControllerError> {
        // Chosen under the write lock: a renewal between the choice and the removal would
        // otherwise be undone.
        let _write = self.write.lock().await;
        let now = self.clock.now_ms();
        let expired: Vec<(String, String)> = self.state(|s| {
            s.delegation_tokens
                .values()
                .filter(|t| t.expired(now))
                .map(|t| (t.token_id.clone(), t.owner.clone()))
                .collect()
        });
        if expired.is_empty() {
            return Ok(());
        }
        for (token_id, owner) in &expired {
            tracing::info!(%token_id, %owner, "delegation token expired");
        }
        let token_ids = expired.into_iter().map(|(id, _)| id).collect();
        conflict(
            self.propose(Record::RemoveDelegationTokens { token_ids })
                .await?,
        )
        .map(|_| ())
    }
}
