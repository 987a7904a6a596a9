//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554;
//! `kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=…]'`):
//! which users have which SCRAM mechanisms (with their iterations, never a secret), and
//! changes committed by the active controller, each user answered on its own.

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::errors::controller_error;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::controller::error::{ControllerError, ErrorKind};
use crate::controller::{ControllerRequest, CredentialOutcome, ScramUpsertion};
use crate::sasl::ScramMechanism;

/// One user's described credentials, or why not.
fn described(broker: &Broker, user: &str, asked: &[String]) -> DescribeUserScramCredentialsResult {
    let base = DescribeUserScramCredentialsResult::default().with_user(str_bytes(user));
    let refuse = |kind: ErrorKind, reason: &str| {
        let error = ControllerError::Credential {
            kind,
            reason: reason.to_string(),
        };
        base.clone()
            .with_error_code(controller_error(&error).code())
            .with_error_message(Some(str_bytes(reason)))
    };
    if asked.iter().filter(|u| *u == user).count() > 1 {
        let reason =
            "Cannot describe SCRAM credentials for the same user twice in a single request";
        return refuse(ErrorKind::DuplicateResource, reason);
    }
    let image = broker.image();
    let Some(credentials) = image.scram_credentials.get(user) else {
        let reason = "Attempt to describe a user credential that does not exist";
        return refuse(ErrorKind::ResourceNotFound, reason);
    };
    let infos = credentials
        .iter()
        .filter_map(|(name, c)| {
            let mechanism = ScramMechanism::from_name(name)?;
            Some(
                CredentialInfo::default()
                    .with_mechanism(mechanism.wire_type())
                    .with_iterations(c.iterations as i32),
            )
        })
        .collect();
    base.with_credential_infos(infos)
}

/// Answers DescribeUserScramCredentials: the users asked (all with credentials when none).
pub fn describe(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeUserScramCredentialsRequest = request.decode()?;
    let asked: Vec<String> = match &body.users {
        Some(users) if !users.is_empty() => users.iter().map(|u| u.name.to_string()).collect(),
        _ => broker.image().scram_credentials.keys().cloned().collect(),
    };
    let mut seen: Vec<&String> = Vec::new();
    let mut results = Vec::new();
    for user in &asked {
        if seen.contains(&user) {
            continue;
        }
        seen.push(user);
        results.push(described(broker, user, &asked));
    }
    request.respond(&DescribeUserScramCredentialsResponse::default().with_results(results))
}

/// Answers AlterUserScramCredentials.
pub async fn alter(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: AlterUserScramCredentialsRequest = request.decode()?;
    let deletions: Vec<(String, i8)> = body
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism))
        .collect();
    let upsertions: Vec<ScramUpsertion> = body
        .upsertions
        .iter()
        .map(|u| ScramUpsertion {
            user: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    let asked: Vec<String> = deletions
        .iter()
        .map(|(u, _)| u.clone())
        .chain(upsertions.iter().map(|u| u.user.clone()))
        .collect();
    let request_to_controller = ControllerRequest::AlterScramCredentials {
        deletions,
        upsertions,
    };
    let results = match broker
        .controller
        .ask::<Vec<CredentialOutcome>>(request_to_controller)
        .await
    {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|(user, outcome)| {
                let result = AlterUserScramCredentialsResult::default().with_user(str_bytes(&user));
                match outcome {
                    Ok(()) => result,
                    Err(remote) => {
                        let error = ControllerError::from(remote);
                        result
                            .with_error_code(controller_error(&error).code())
                            .with_error_message(Some(str_bytes(&error.to_string())))
                    }
                }
            })
            .collect(),
        Err(error) => {
            tracing::warn!(client = %request.client, api = "AlterUserScramCredentials", %error, "refused");
            let mut users = asked;
            users.dedup();
            users
                .iter()
                .map(|user| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(str_bytes(user))
                        .with_error_code(controller_error(&error).code())
                        .with_error_message(Some(str_bytes(&error.to_string())))
                })
                .collect()
        }
    };
    request.respond(&AlterUserScramCredentialsResponse::default().with_results(results))
}
