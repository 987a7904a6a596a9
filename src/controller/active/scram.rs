//! SCRAM credentials as the active controller changes them (AlterUserScramCredentials,
//! KIP-554; Kafka's ScramControlManager): each user's changes are checked on their own and
//! answered on their own, and every accepted one goes into one record. The controller keeps
//! the salt, the iterations and the keys derived from the salted password the client sent;
//! never a password.

use serde::{Deserialize, Serialize};

use super::{conflict, ActiveController, ControllerReply};
use crate::controller::error::{ControllerError, ErrorKind, RemoteError};
use crate::controller::state::Record;
use crate::sasl::scram::{ITERATIONS_MAX, ITERATIONS_MIN};
use crate::sasl::{ScramCredential, ScramMechanism};

/// One credential to set: the user, the mechanism's wire type, and what the client derived.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub user: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

/// One user's answer: done, or the error in its wire form.
pub type CredentialOutcome = (String, Result<(), RemoteError>);

fn refused(kind: ErrorKind, reason: &str) -> ControllerError {
    ControllerError::Credential {
        kind,
        reason: reason.to_string(),
    }
}

fn mechanism(wire: i8) -> Result<ScramMechanism, ControllerError> {
    ScramMechanism::from_wire_type(wire).ok_or_else(|| {
        refused(
            ErrorKind::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })
}

/// The record change an upsertion makes, or why it is refused (Kafka's checks and words).
fn upsertion(
    u: &ScramUpsertion,
) -> Result<(String, String, Option<ScramCredential>), ControllerError> {
    let mechanism = mechanism(u.mechanism)?;
    if u.iterations < ITERATIONS_MIN as i32 {
        return Err(refused(
            ErrorKind::UnacceptableCredential,
            "Too few iterations",
        ));
    }
    if u.iterations > ITERATIONS_MAX as i32 {
        return Err(refused(
            ErrorKind::UnacceptableCredential,
            "Too many iterations",
        ));
    }
    if u.salt.is_empty() || u.salted_password.is_empty() {
        return Err(refused(
            ErrorKind::UnacceptableCredential,
            "Salt and salted password must not be empty",
        ));
    }
    let credential = ScramCredential::from_salted_password(
        mechanism,
        &u.salt,
        &u.salted_password,
        u.iterations as u32,
    );
    Ok((
        u.user.clone(),
        mechanism.name().to_string(),
        Some(credential),
    ))
}

impl ActiveController {
    /// Sets and deletes SCRAM credentials; each user answered on its own.
    pub(super) async fn alter_scram_credentials(
        &self,
        deletions: Vec<(String, i8)>,
        upsertions: Vec<ScramUpsertion>,
    ) -> Result<ControllerReply, ControllerError> {
        let users: Vec<&str> = deletions
            .iter()
            .map(|(u, _)| u.as_str())
            .chain(upsertions.iter().map(|u| u.user.as_str()))
            .collect();
        let twice = |user: &str| users.iter().filter(|u| **u == user).count() > 1;
        let mut outcomes: Vec<(String, Result<(), ControllerError>)> = Vec::new();
        let mut changes = Vec::new();
        let existing = self.state(|s| s.scram_credentials.clone());
        let mut check = |user: &str,
                         change: Result<
            (String, String, Option<ScramCredential>),
            ControllerError,
        >| {
            let outcome = if user.is_empty() {
                Err(refused(
                    ErrorKind::UnacceptableCredential,
                    "Username must not be empty",
                ))
            } else if twice(user) {
                Err(refused(
                    ErrorKind::DuplicateResource,
                    "A user credential cannot be altered twice in the same request",
                ))
            } else {
                change.map(|c| changes.push(c))
            };
            if !outcomes.iter().any(|(u, _)| u == user) {
                outcomes.push((user.to_string(), outcome));
            }
        };
        for (user, wire) in &deletions {
            let change = mechanism(*wire).and_then(|m| {
                let known = existing.get(user).is_some_and(|c| c.contains_key(m.name()));
                match known {
                    true => Ok((user.clone(), m.name().to_string(), None)),
                    false => Err(refused(
                        ErrorKind::ResourceNotFound,
                        "Attempt to delete a user credential that does not exist",
                    )),
                }
            });
            check(user, change);
        }
        for u in &upsertions {
            check(&u.user, upsertion(u));
        }
        if !changes.is_empty() {
            let changed: Vec<String> = changes
                .iter()
                .map(|(user, m, c)| {
                    format!("{user} {m}{}", if c.is_none() { " deleted" } else { "" })
                })
                .collect();
            tracing::info!(?changed, "altering SCRAM credentials");
            conflict(
                self.propose(Record::AlterScramCredentials { changes })
                    .await?,
            )?;
        }
        let answered = outcomes
            .into_iter()
            .map(|(user, outcome)| (user, outcome.map_err(|e| e.to_remote())))
            .collect();
        Ok(ControllerReply::Credentials(answered))
    }
}
