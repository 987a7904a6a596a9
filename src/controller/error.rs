//! Errors of metadata changes requested through the controller.

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
    #[error("invalid config for topic {topic}: {source}")]
    InvalidConfig {
        topic: String,
        #[source]
        source: Box<crate::config::ConfigError>,
    },
    #[error("cannot persist cluster metadata: {source}")]
    Storage {
        #[source]
        source: crate::log::LogError,
    },
}
