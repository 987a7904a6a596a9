//! Errors of metadata changes requested through the controller, and their wire form between
//! a broker and the active controller.

use serde::{Deserialize, Serialize};

/// Why the controller refused or failed a change.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("topic {topic} already exists")]
    TopicAlreadyExists { topic: String },
    #[error("invalid topic {topic:?}: {reason}")]
    InvalidTopic { topic: String, reason: &'static str },
    #[error("unknown topic {topic}")]
    UnknownTopic { topic: String },
    #[error("unknown topic id {topic_id}")]
    UnknownTopicId { topic_id: uuid::Uuid },
    #[error("invalid partition count {count} for topic {topic}: {reason}")]
    InvalidPartitions {
        topic: String,
        count: i32,
        reason: &'static str,
    },
    #[error(
        "invalid replication factor {factor} for topic {topic}: {brokers} broker(s) available"
    )]
    InvalidReplicationFactor {
        topic: String,
        factor: i32,
        brokers: usize,
    },
    #[error("invalid replica assignment for topic {topic}: {reason}")]
    InvalidReplicaAssignment { topic: String, reason: &'static str },
    // Kafka's message (ConfigException) names the key and value, not the topic.
    #[error("{source}")]
    InvalidConfig {
        topic: String,
        #[source]
        source: Box<crate::config::ConfigError>,
    },
    /// A broker or group config refused (Kafka's words in `reason`).
    #[error("{reason}")]
    InvalidResourceConfig { reason: String },
    /// A broker config Kafka reads only at start, a resource name that cannot be, or a
    /// client quota change refused (Kafka's words).
    #[error("{reason}")]
    InvalidConfigRequest { reason: String },
    /// A reassignment target or cancel refused (Kafka's words).
    #[error("{reason}")]
    InvalidReassignment { reason: String },
    #[error("No partition reassignment is in progress.")]
    NoReassignmentInProgress,
    /// A reassignment that would change the replication factor where it may not (KIP-860).
    #[error("{reason}")]
    ReplicationFactorChange { reason: String },
    /// A SCRAM credential change refused, with the kind of refusal (Kafka's words).
    #[error("{reason}")]
    Credential { kind: ErrorKind, reason: String },
    /// A partition the metadata does not have (Kafka's words).
    #[error("{reason}")]
    UnknownPartition { reason: String },
    #[error("cannot persist cluster metadata: {source}")]
    Storage {
        #[source]
        source: crate::log::LogError,
    },
    #[error("this node is not the active controller (leader: {leader:?})")]
    NotController { leader: Option<i32> },
    #[error("no active controller answered within {timeout_ms} ms")]
    ControllerUnavailable { timeout_ms: u64 },
    #[error("metadata quorum failure: {reason}")]
    Quorum { reason: String },
    #[error("broker {node_id} is already registered by another live process (incarnation {incarnation_id})")]
    DuplicateBrokerRegistration {
        node_id: i32,
        incarnation_id: uuid::Uuid,
    },
    #[error("broker {node_id}: {reason}")]
    StaleBroker { node_id: i32, reason: String },
    #[error("{topic}-{partition}: partition epoch {requested} is not the current {current}")]
    StalePartitionEpoch {
        topic: String,
        partition: i32,
        requested: i32,
        current: i32,
    },
    #[error("{topic}-{partition}: broker {node_id} is not the leader at epoch {leader_epoch}")]
    NotPartitionLeader {
        topic: String,
        partition: i32,
        node_id: i32,
        leader_epoch: i32,
    },
    #[error("invalid ISR for {topic}-{partition}: {reason}")]
    InvalidIsr {
        topic: String,
        partition: i32,
        reason: &'static str,
    },
    #[error("the change raced with another and was not applied: {reason}")]
    Conflict { reason: String },
    /// An UpdateFeatures refused as a whole, with the first feature's reason.
    #[error(
        "The update failed for all features since the following feature had an error: {reason}"
    )]
    InvalidFeatureUpdate { reason: String },
    /// A reply of another kind than the request expects (a controller of another version).
    #[error("unexpected controller reply to {request}: {reply}")]
    UnexpectedReply {
        request: &'static str,
        reply: String,
    },
    /// An error the active controller returned, in its wire form.
    #[error("{message}")]
    Remote { kind: ErrorKind, message: String },
}

/// The kind of a [`ControllerError`], which is what travels between nodes (with the
/// message); `api::errors` maps each kind to a Kafka error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    TopicAlreadyExists,
    InvalidTopic,
    UnknownTopic,
    UnknownTopicId,
    InvalidPartitions,
    InvalidReplicationFactor,
    InvalidReplicaAssignment,
    InvalidConfig,
    InvalidRequest,
    Storage,
    NotController,
    ControllerUnavailable,
    Quorum,
    DuplicateBrokerRegistration,
    StaleBroker,
    StalePartitionEpoch,
    NotPartitionLeader,
    InvalidIsr,
    Conflict,
    UnexpectedReply,
    InvalidFeatureUpdate,
    NoReassignmentInProgress,
    UnacceptableCredential,
    DuplicateResource,
    UnsupportedSaslMechanism,
    ResourceNotFound,
}

/// A [`ControllerError`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteError {
    pub kind: ErrorKind,
    pub message: String,
    /// The active controller, for [`ErrorKind::NotController`].
    pub leader: Option<i32>,
}

impl ControllerError {
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ControllerError::TopicAlreadyExists { .. } => ErrorKind::TopicAlreadyExists,
            ControllerError::InvalidTopic { .. } => ErrorKind::InvalidTopic,
            ControllerError::UnknownTopic { .. } => ErrorKind::UnknownTopic,
            ControllerError::UnknownTopicId { .. } => ErrorKind::UnknownTopicId,
            ControllerError::InvalidPartitions { .. } => ErrorKind::InvalidPartitions,
            ControllerError::InvalidReplicationFactor { .. } => ErrorKind::InvalidReplicationFactor,
            ControllerError::InvalidReplicaAssignment { .. } => ErrorKind::InvalidReplicaAssignment,
            ControllerError::InvalidConfig { .. } => ErrorKind::InvalidConfig,
            ControllerError::InvalidResourceConfig { .. } => ErrorKind::InvalidConfig,
            ControllerError::InvalidConfigRequest { .. } => ErrorKind::InvalidRequest,
            ControllerError::InvalidReassignment { .. } => ErrorKind::InvalidReplicaAssignment,
            ControllerError::NoReassignmentInProgress => ErrorKind::NoReassignmentInProgress,
            ControllerError::ReplicationFactorChange { .. } => ErrorKind::InvalidReplicationFactor,
            ControllerError::UnknownPartition { .. } => ErrorKind::UnknownTopic,
            ControllerError::Credential { kind, .. } => *kind,
            ControllerError::Storage { .. } => ErrorKind::Storage,
            ControllerError::NotController { .. } => ErrorKind::NotController,
            ControllerError::ControllerUnavailable { .. } => ErrorKind::ControllerUnavailable,
            ControllerError::Quorum { .. } => ErrorKind::Quorum,
            ControllerError::DuplicateBrokerRegistration { .. } => {
                ErrorKind::DuplicateBrokerRegistration
            }
            ControllerError::StaleBroker { .. } => ErrorKind::StaleBroker,
            ControllerError::StalePartitionEpoch { .. } => ErrorKind::StalePartitionEpoch,
            ControllerError::NotPartitionLeader { .. } => ErrorKind::NotPartitionLeader,
            ControllerError::InvalidIsr { .. } => ErrorKind::InvalidIsr,
            ControllerError::Conflict { .. } => ErrorKind::Conflict,
            ControllerError::UnexpectedReply { .. } => ErrorKind::UnexpectedReply,
            ControllerError::InvalidFeatureUpdate { .. } => ErrorKind::InvalidFeatureUpdate,
            ControllerError::Remote { kind, .. } => *kind,
        }
    }

    /// The wire form of this error.
    pub fn to_remote(&self) -> RemoteError {
        let leader = match self {
            ControllerError::NotController { leader } => *leader,
            _ => None,
        };
        RemoteError {
            kind: self.kind(),
            message: self.to_string(),
            leader,
        }
    }
}

impl From<RemoteError> for ControllerError {
    fn from(remote: RemoteError) -> Self {
        match remote.kind {
            ErrorKind::NotController => ControllerError::NotController {
                leader: remote.leader,
            },
            kind => ControllerError::Remote {
                kind,
                message: remote.message,
            },
        }
    }
}
