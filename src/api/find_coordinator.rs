//! FindCoordinator, answered with COORDINATOR_NOT_AVAILABLE until the group and transaction
//! coordinators exist (issues #6 and later). Advertising it matters beyond groups:
//! librdkafka enables LZ4 only when the broker lists FindCoordinator, and its consumers ask
//! for a coordinator in the background even when they only `assign()` partitions. The
//! error is retriable, so those clients keep working and group members wait, rather than
//! failing on a closed connection.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{str_bytes, HandlerError, Outcome, Request};

/// Batched requests (v4+) carry their keys in `coordinator_keys`.
const BATCHED_VERSION_MIN: i16 = 4;

/// Answers FindCoordinator.
pub fn handle(request: &Request) -> Result<Outcome, HandlerError> {
    let body: FindCoordinatorRequest = request.decode()?;
    let error = ResponseError::CoordinatorNotAvailable;
    let message = "group and transaction coordinators are not implemented yet";
    tracing::debug!(client = %request.client, api = "FindCoordinator", key_type = body.key_type,
        "no coordinator available");
    let response = if request.version() >= BATCHED_VERSION_MIN {
        let coordinators = body
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(-1))
                    .with_port(-1)
                    .with_error_code(error.code())
                    .with_error_message(Some(str_bytes(message)))
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let response = FindCoordinatorResponse::default()
            .with_error_code(error.code())
            .with_node_id(BrokerId(-1))
            .with_port(-1);
        match request.version() >= 1 {
            true => response.with_error_message(Some(str_bytes(message))),
            false => response,
        }
    };
    request.respond(&response)
}
