//! The only place where Kafka error codes are chosen. Each match is exhaustive with no
//! catch-all arm, so a new error variant forces a decision here.

use kafka_protocol::error::ResponseError;

use super::topics::AdminError;
use crate::controller::ControllerError;
use crate::log::LogError;
use crate::replica::ReplicaError;

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
        LogError::TransactionsUnsupported { .. } => ResponseError::InvalidRecord,
        LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::UndecodableRecords { .. } => ResponseError::CorruptMessage,
        LogError::NullKeyInCompactedTopic { .. } => ResponseError::InvalidRecord,
        LogError::CleaningAborted { .. } => ResponseError::UnknownServerError,
    }
}

/// The Kafka error for a replica-layer error.
pub fn replica_error(error: &ReplicaError) -> ResponseError {
    match error {
        ReplicaError::UnknownTopicOrPartition { .. } => ResponseError::UnknownTopicOrPartition,
        ReplicaError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        ReplicaError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
        ReplicaError::Log { source, .. } => log_error(source),
        ReplicaError::InconsistentLogDir { .. } => ResponseError::KafkaStorageError,
    }
}

/// The Kafka error for a refused metadata change.
pub fn controller_error(error: &ControllerError) -> ResponseError {
    match error {
        ControllerError::TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists,
        ControllerError::InvalidTopic { .. } => ResponseError::InvalidTopicException,
        ControllerError::UnknownTopic { .. } => ResponseError::UnknownTopicOrPartition,
        ControllerError::UnknownTopicId { .. } => ResponseError::UnknownTopicId,
        ControllerError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
        ControllerError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
        ControllerError::InvalidReplicaAssignment { .. } => ResponseError::InvalidReplicaAssignment,
        ControllerError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        ControllerError::Storage { .. } => ResponseError::KafkaStorageError,
    }
}

/// The Kafka error for a topic change that failed in the controller or when applied.
pub fn admin_error(error: &AdminError) -> ResponseError {
    match error {
        AdminError::Controller(error) => controller_error(error),
        AdminError::Replica(error) => replica_error(error),
    }
}

/// Whether an error is the client's doing (logged at debug) rather than the broker's
/// (logged at warn or error).
pub fn is_client_error(error: ResponseError) -> bool {
    !matches!(
        error,
        ResponseError::KafkaStorageError | ResponseError::UnknownServerError
    )
}
