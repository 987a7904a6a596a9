//! The only place where Kafka error codes are chosen. Each match is exhaustive with no
//! catch-all arm, so a new error variant forces a decision here.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;

use super::refusal::{AdminError, Refusal};
use crate::controller::{ControllerError, ElectionOutcome, ErrorKind};
use crate::group::GroupError;
use crate::log::LogError;
use crate::replica::ReplicaError;
use crate::txn::TxnError;

/// The Kafka error for a storage-engine error.
pub fn log_error(error: &LogError) -> ResponseError {
    match error {
        LogError::Io { .. } => ResponseError::KafkaStorageError,
        LogError::CorruptFile { .. } => ResponseError::KafkaStorageError,
        LogError::CorruptBatch { .. } => ResponseError::CorruptMessage,
        LogError::InvalidBatch { .. } => ResponseError::CorruptMessage,
        LogError::BatchCount { .. } => ResponseError::InvalidRecord,
        LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        LogError::BatchLargerThanSegment { .. } => ResponseError::RecordListTooLarge,
        LogError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        LogError::ControlBatchFromClient { .. } => ResponseError::InvalidRecord,
        LogError::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
        LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::UndecodableRecords { .. } => ResponseError::CorruptMessage,
        LogError::NullKeyInCompactedTopic { .. } => ResponseError::InvalidRecord,
        LogError::CleaningAborted { .. } => ResponseError::UnknownServerError,
        LogError::NonContiguousOffset { .. } => ResponseError::CorruptMessage,
        LogError::StaleLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
    }
}

/// The Kafka error for a replica-layer error.
pub fn replica_error(error: &ReplicaError) -> ResponseError {
    match error {
        ReplicaError::UnknownTopicOrPartition { .. } => ResponseError::UnknownTopicOrPartition,
        ReplicaError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        ReplicaError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
        ReplicaError::NotLeaderOrFollower { .. } => ResponseError::NotLeaderOrFollower,
        ReplicaError::Log { source, .. } => log_error(source),
        ReplicaError::InconsistentLogDir { .. } => ResponseError::KafkaStorageError,
        ReplicaError::LogDirNotFound { .. } => ResponseError::LogDirNotFound,
        ReplicaError::ReplicaNotAvailable { .. } => ResponseError::ReplicaNotAvailable,
        ReplicaError::LogDirOffline { .. } | ReplicaError::NoLogDirOnline { .. } => {
            ResponseError::KafkaStorageError
        }
        ReplicaError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
        ReplicaError::NotEnoughReplicasAfterAppend { .. } => {
            ResponseError::NotEnoughReplicasAfterAppend
        }
        ReplicaError::ReplicationTimeout { .. } => ResponseError::RequestTimedOut,
    }
}

/// The Kafka error for a refused metadata change (by its kind, which is all that crosses
/// the network from the active controller).
pub fn controller_error(error: &ControllerError) -> ResponseError {
    match error.kind() {
        ErrorKind::TopicAlreadyExists => ResponseError::TopicAlreadyExists,
        ErrorKind::InvalidTopic => ResponseError::InvalidTopicException,
        ErrorKind::UnknownTopic => ResponseError::UnknownTopicOrPartition,
        ErrorKind::UnknownTopicId => ResponseError::UnknownTopicId,
        ErrorKind::InvalidPartitions => ResponseError::InvalidPartitions,
        ErrorKind::InvalidReplicationFactor => ResponseError::InvalidReplicationFactor,
        ErrorKind::InvalidReplicaAssignment => ResponseError::InvalidReplicaAssignment,
        ErrorKind::InvalidConfig => ResponseError::InvalidConfig,
        ErrorKind::InvalidRequest => ResponseError::InvalidRequest,
        ErrorKind::Storage => ResponseError::KafkaStorageError,
        ErrorKind::NotController => ResponseError::NotController,
        ErrorKind::ControllerUnavailable => ResponseError::RequestTimedOut,
        ErrorKind::Quorum => ResponseError::UnknownServerError,
        ErrorKind::DuplicateBrokerRegistration => ResponseError::DuplicateBrokerRegistration,
        ErrorKind::StaleBroker => ResponseError::StaleBrokerEpoch,
        ErrorKind::StalePartitionEpoch => ResponseError::InvalidUpdateVersion,
        ErrorKind::NotPartitionLeader => ResponseError::NotLeaderOrFollower,
        ErrorKind::InvalidIsr => ResponseError::IneligibleReplica,
        ErrorKind::Conflict | ErrorKind::UnexpectedReply => ResponseError::UnknownServerError,
        ErrorKind::InvalidFeatureUpdate => ResponseError::InvalidUpdateVersion,
        ErrorKind::NoReassignmentInProgress => ResponseError::NoReassignmentInProgress,
        ErrorKind::UnacceptableCredential => ResponseError::UnacceptableCredential,
        ErrorKind::DuplicateResource => ResponseError::DuplicateResource,
        ErrorKind::UnsupportedSaslMechanism => ResponseError::UnsupportedSaslMechanism,
        ErrorKind::ResourceNotFound => ResponseError::ResourceNotFound,
    }
}

/// The Kafka error of one partition's requested election (`None`: elected).
pub fn election_error(outcome: ElectionOutcome) -> Option<ResponseError> {
    match outcome {
        ElectionOutcome::Elected => None,
        ElectionOutcome::NotNeeded => Some(ResponseError::ElectionNotNeeded),
        ElectionOutcome::PreferredLeaderNotAvailable => {
            Some(ResponseError::PreferredLeaderNotAvailable)
        }
        ElectionOutcome::EligibleLeadersNotAvailable => {
            Some(ResponseError::EligibleLeadersNotAvailable)
        }
        ElectionOutcome::UnknownPartition => Some(ResponseError::UnknownTopicOrPartition),
    }
}

/// The Kafka error for a topic change that failed in the controller or when applied.
pub fn admin_error(error: &AdminError) -> ResponseError {
    match error {
        AdminError::Controller(error) => controller_error(error),
        AdminError::Replica(error) => replica_error(error),
        AdminError::Refused(refusal) => refusal_error(*refusal),
    }
}

/// The Kafka error for a request a handler refused itself.
pub fn refusal_error(refusal: Refusal) -> ResponseError {
    match refusal {
        Refusal::UnknownTopic => ResponseError::UnknownTopicOrPartition,
        Refusal::UnknownTopicId => ResponseError::UnknownTopicId,
        Refusal::InvalidTopic => ResponseError::InvalidTopicException,
        Refusal::NoLeader => ResponseError::LeaderNotAvailable,
        Refusal::NotLeader => ResponseError::NotLeaderOrFollower,
        Refusal::InvalidRequiredAcks => ResponseError::InvalidRequiredAcks,
        Refusal::InvalidRequest => ResponseError::InvalidRequest,
        Refusal::InvalidConfig => ResponseError::InvalidConfig,
        Refusal::UnsupportedVersion => ResponseError::UnsupportedVersion,
        Refusal::NoCoordinator => ResponseError::CoordinatorNotAvailable,
        Refusal::SecurityDisabled => ResponseError::SecurityDisabled,
        Refusal::FetchSessionNotFound => ResponseError::FetchSessionIdNotFound,
        Refusal::FetchSessionEpoch => ResponseError::InvalidFetchSessionEpoch,
        Refusal::FetchSessionTopicIds => ResponseError::FetchSessionTopicIdError,
        Refusal::UnstableOffsetCommit => ResponseError::UnstableOffsetCommit,
        Refusal::InvalidFeatureUpdate => ResponseError::InvalidUpdateVersion,
        Refusal::NotAttempted => ResponseError::OperationNotAttempted,
        Refusal::StorageFailed => ResponseError::KafkaStorageError,
        Refusal::Internal => ResponseError::UnknownServerError,
        Refusal::NotReplicatedInTime => ResponseError::RequestTimedOut,
        Refusal::MismatchedEndpointType => ResponseError::MismatchedEndpointType,
        Refusal::ClusterAuthorizationFailed => ResponseError::ClusterAuthorizationFailed,
        Refusal::TopicAuthorizationFailed => ResponseError::TopicAuthorizationFailed,
        Refusal::GroupAuthorizationFailed => ResponseError::GroupAuthorizationFailed,
        Refusal::TransactionalIdAuthorizationFailed => {
            ResponseError::TransactionalIdAuthorizationFailed
        }
        Refusal::UnsupportedEndpointType => ResponseError::UnsupportedEndpointType,
        Refusal::ThrottlingQuotaExceeded => ResponseError::ThrottlingQuotaExceeded,
    }
}

/// The Kafka error for a refused or failed group operation.
pub fn group_error(error: &GroupError) -> ResponseError {
    match error {
        GroupError::InvalidGroupId { .. } => ResponseError::InvalidGroupId,
        GroupError::InvalidSessionTimeout { .. } => ResponseError::InvalidSessionTimeout,
        GroupError::InconsistentGroupProtocol { .. } => ResponseError::InconsistentGroupProtocol,
        GroupError::MemberIdRequired { .. } => ResponseError::MemberIdRequired,
        GroupError::UnknownMemberId { .. } => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration { .. } => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress { .. } => ResponseError::RebalanceInProgress,
        GroupError::FencedInstanceId { .. } => ResponseError::FencedInstanceId,
        GroupError::GroupMaxSizeReached { .. } => ResponseError::GroupMaxSizeReached,
        GroupError::CoordinatorNotAvailable { .. } => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator { .. } => ResponseError::NotCoordinator,
        GroupError::CoordinatorLoadInProgress { .. } => ResponseError::CoordinatorLoadInProgress,
        GroupError::GroupIdNotFound { .. } => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup { .. } => ResponseError::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic { .. } => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge { .. } => ResponseError::OffsetMetadataTooLarge,
        GroupError::FencedMemberEpoch { .. } => ResponseError::FencedMemberEpoch,
        GroupError::StaleMemberEpoch { .. } => ResponseError::StaleMemberEpoch,
        GroupError::UnreleasedInstanceId { .. } => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor { .. } => ResponseError::UnsupportedAssignor,
        GroupError::InvalidRegularExpression { .. } => ResponseError::InvalidRegularExpression,
        GroupError::UnsupportedCommitVersion { .. } => ResponseError::UnsupportedVersion,
        GroupError::InvalidRequest { .. } => ResponseError::InvalidRequest,
        GroupError::Timeout { .. } => ResponseError::RequestTimedOut,
        GroupError::Storage { source, .. } => match replica_error(source) {
            ResponseError::UnknownTopicOrPartition | ResponseError::NotLeaderOrFollower => {
                ResponseError::NotCoordinator
            }
            _ => ResponseError::CoordinatorNotAvailable,
        },
    }
}

/// The Kafka error for a refused or failed transaction operation.
pub fn txn_error(error: &TxnError) -> ResponseError {
    match error {
        TxnError::InvalidTransactionalId { .. } => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout { .. } => ResponseError::InvalidTransactionTimeout,
        TxnError::NotCoordinator { .. } => ResponseError::NotCoordinator,
        TxnError::CoordinatorLoadInProgress { .. } => ResponseError::CoordinatorLoadInProgress,
        TxnError::CoordinatorNotAvailable { .. } => ResponseError::CoordinatorNotAvailable,
        TxnError::ConcurrentTransactions { .. } => ResponseError::ConcurrentTransactions,
        TxnError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        TxnError::InvalidProducerIdMapping { .. } => ResponseError::InvalidProducerIdMapping,
        TxnError::ProducerFenced { .. } => ResponseError::ProducerFenced,
        TxnError::TransactionalIdNotFound { .. } => ResponseError::TransactionalIdNotFound,
        TxnError::Timeout { .. } => ResponseError::RequestTimedOut,
        TxnError::Storage { moved: true, .. } => ResponseError::NotCoordinator,
        TxnError::Storage { moved: false, .. } => ResponseError::CoordinatorNotAvailable,
    }
}

/// The Kafka error for a transaction refusal at `version` of `api`: PRODUCER_FENCED
/// exists from InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2 and
/// TxnOffsetCommit v3 (KIP-588); older versions get INVALID_PRODUCER_EPOCH, as from Kafka.
pub fn txn_error_at(error: &TxnError, api: ApiKey, version: i16) -> ResponseError {
    let first_fenced_version = match api {
        ApiKey::InitProducerId => 4,
        ApiKey::TxnOffsetCommit => 3,
        _ => 2,
    };
    match txn_error(error) {
        ResponseError::ProducerFenced if version < first_fenced_version => {
            ResponseError::InvalidProducerEpoch
        }
        code => code,
    }
}

/// The records a refused batch is refused for (KIP-467, Produce v8+): each one's index in
/// the batch with its message, and the partition's error message, worded as Kafka's
/// LogValidator words them.
pub fn record_errors(error: &ReplicaError) -> Option<(Vec<(i32, String)>, String)> {
    let ReplicaError::Log { source, .. } = error else {
        return None;
    };
    if let LogError::InvalidTimestamp { records, min, max } = source {
        let errors = records
            .iter()
            .map(|(index, offset, timestamp)| {
                let message = format!(
                    "Timestamp {timestamp} of message with offset {offset} is out of range. \
                     The timestamp should be within [{min}, {max}]"
                );
                (*index, message)
            })
            .collect();
        let summary = "One or more records have been rejected due to invalid timestamp";
        return Some((errors, summary.to_string()));
    }
    let LogError::NullKeyInCompactedTopic { partition, indexes } = source else {
        return None;
    };
    let message =
        format!("Compacted topic cannot accept message without key in topic partition {partition}");
    let errors: Vec<(i32, String)> = indexes.iter().map(|i| (*i, message.clone())).collect();
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|(index, message)| format!("RecordError(batchIndex={index}, message='{message}')"))
        .collect();
    let summary = format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    );
    Some((errors, summary))
}

/// The error a producer gets when the transaction coordinator did not verify its batch
/// (KIP-890; `None`: the coordinator could not be asked): a fenced producer
/// INVALID_PRODUCER_EPOCH (what Kafka answers Produce), a partition outside the
/// transaction INVALID_TXN_STATE, anything passing (a coordinator moving or busy)
/// NOT_ENOUGH_REPLICAS, which producers retry.
pub fn unverified_produce_error(coordinator: Option<ResponseError>) -> ResponseError {
    match coordinator {
        Some(
            ResponseError::ProducerFenced
            | ResponseError::InvalidProducerEpoch
            | ResponseError::InvalidProducerIdMapping,
        ) => ResponseError::InvalidProducerEpoch,
        Some(ResponseError::InvalidTxnState) => ResponseError::InvalidTxnState,
        _ => ResponseError::NotEnoughReplicas,
    }
}

/// The error a TxnOffsetCommit gets when its offsets partition could not join the
/// transaction: as [`unverified_produce_error`], but anything passing is
/// COORDINATOR_NOT_AVAILABLE (as Kafka's group coordinator answers; clients find the
/// coordinator again and retry).
pub fn unverified_offsets_error(coordinator: Option<ResponseError>) -> ResponseError {
    match unverified_produce_error(coordinator) {
        ResponseError::NotEnoughReplicas => ResponseError::CoordinatorNotAvailable,
        error => error,
    }
}

/// Whether a partition's answer to a transaction marker (`error`, `None` when written)
/// means the marker needs no retry: written, or its partition is gone, or the partition
/// refuses it for good (a newer producer epoch or coordinator: someone else finished).
pub fn marker_settled(error: Option<ResponseError>) -> bool {
    matches!(
        error,
        None | Some(
            ResponseError::UnknownTopicOrPartition
                | ResponseError::InvalidProducerEpoch
                | ResponseError::TransactionCoordinatorFenced
        )
    )
}

/// Whether an error is the client's doing (logged at debug) rather than the broker's
/// (logged at warn or error).
pub fn is_client_error(error: ResponseError) -> bool {
    !matches!(
        error,
        ResponseError::KafkaStorageError
            | ResponseError::UnknownServerError
            | ResponseError::RequestTimedOut
            | ResponseError::NotController
    )
}
