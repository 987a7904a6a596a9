//! Why the transaction coordinator refused or failed a request. Each variant names the
//! transactional id; `api/errors.rs` turns them into Kafka error codes.

use crate::replica::ReplicaError;

/// A refused or failed transaction operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("transactional id {transactional_id:?} is not valid")]
    InvalidTransactionalId { transactional_id: String },
    #[error("transaction {transactional_id}: timeout {timeout_ms} ms is not in 1..={max_ms}")]
    InvalidTransactionTimeout {
        transactional_id: String,
        timeout_ms: i32,
        max_ms: i32,
    },
    #[error(
        "transaction {transactional_id}: this broker does not lead __transaction_state-{partition}"
    )]
    NotCoordinator {
        transactional_id: String,
        partition: i32,
    },
    #[error("transaction {transactional_id}: __transaction_state-{partition} is still loading")]
    CoordinatorLoadInProgress {
        transactional_id: String,
        partition: i32,
    },
    #[error("transaction {transactional_id}: the transaction state topic cannot be used yet")]
    CoordinatorNotAvailable { transactional_id: String },
    #[error("transaction {transactional_id} is {state}: another operation is under way")]
    ConcurrentTransactions {
        transactional_id: String,
        state: &'static str,
    },
    #[error("transaction {transactional_id} is {state}: {operation} is not allowed")]
    InvalidTxnState {
        transactional_id: String,
        state: &'static str,
        operation: &'static str,
    },
    #[error("transaction {transactional_id}: producer id {producer_id} does not own it")]
    InvalidProducerIdMapping {
        transactional_id: String,
        producer_id: i64,
    },
    #[error(
        "transaction {transactional_id}: epoch {producer_epoch} was fenced by epoch {current}"
    )]
    ProducerFenced {
        transactional_id: String,
        producer_epoch: i16,
        current: i16,
    },
    #[error("transaction {transactional_id} is not known")]
    TransactionalIdNotFound { transactional_id: String },
    #[error("transaction {transactional_id}: writing its state failed: {reason}")]
    Storage {
        transactional_id: String,
        reason: String,
        /// This broker lost the leadership of the state partition (NOT_COORDINATOR).
        moved: bool,
    },
    #[error("transaction {transactional_id}: its state was not replicated within {timeout_ms} ms")]
    Timeout {
        transactional_id: String,
        timeout_ms: u64,
    },
}

impl TxnError {
    /// A storage failure writing `transactional_id`'s state.
    pub fn storage(transactional_id: &str, error: &ReplicaError) -> Self {
        let moved = matches!(
            error,
            ReplicaError::NotLeaderOrFollower { .. } | ReplicaError::UnknownTopicOrPartition { .. }
        );
        TxnError::Storage {
            transactional_id: transactional_id.to_string(),
            reason: error.to_string(),
            moved,
        }
    }
}
