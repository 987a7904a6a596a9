//! Why the group coordinator refused or failed a request. Each variant names the group and
//! the member or partition involved; `api/errors.rs` turns them into Kafka error codes.

use crate::replica::ReplicaError;

/// A refused or failed group operation.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("group id {group:?} is not valid")]
    InvalidGroupId { group: String },
    #[error("group {group}: session timeout {timeout_ms} ms is outside the broker's bounds")]
    InvalidSessionTimeout { group: String, timeout_ms: i32 },
    #[error("group {group}: member {member} has no protocol in common with the group")]
    InconsistentGroupProtocol { group: String, member: String },
    #[error("group {group}: a new member must rejoin with its assigned id {member}")]
    MemberIdRequired { group: String, member: String },
    #[error("group {group}: member {member:?} is not known")]
    UnknownMemberId { group: String, member: String },
    #[error("group {group}: member {member} sent generation {generation}, current is {current}")]
    IllegalGeneration {
        group: String,
        member: String,
        generation: i32,
        current: i32,
    },
    #[error("group {group} is rebalancing")]
    RebalanceInProgress { group: String },
    #[error("group {group}: instance {instance} now belongs to another member than {member}")]
    FencedInstanceId {
        group: String,
        instance: String,
        member: String,
    },
    #[error("group {group} has reached its maximum of {max} members")]
    GroupMaxSizeReached { group: String, max: usize },
    #[error("group {group} is being removed")]
    CoordinatorNotAvailable { group: String },
    #[error("group {group}: this broker does not lead __consumer_offsets-{partition}")]
    NotCoordinator { group: String, partition: i32 },
    #[error("group {group}: __consumer_offsets-{partition} is still loading")]
    CoordinatorLoadInProgress { group: String, partition: i32 },
    #[error("group {group} does not exist")]
    GroupIdNotFound { group: String },
    #[error("group {group} still has members")]
    NonEmptyGroup { group: String },
    #[error("group {group} is subscribed to topic {topic}")]
    GroupSubscribedToTopic { group: String, topic: String },
    #[error("group {group}: metadata for {topic}-{partition} is {size} bytes, over {max}")]
    OffsetMetadataTooLarge {
        group: String,
        topic: String,
        partition: i32,
        size: usize,
        max: usize,
    },
    #[error("group {group}: member {member} sent epoch {epoch}, current is {current}")]
    FencedMemberEpoch {
        group: String,
        member: String,
        epoch: i32,
        current: i32,
    },
    #[error("group {group}: member {member} sent stale epoch {epoch}, current is {current}")]
    StaleMemberEpoch {
        group: String,
        member: String,
        epoch: i32,
        current: i32,
    },
    #[error("group {group}: instance {instance} is still held by member {member}")]
    UnreleasedInstanceId {
        group: String,
        instance: String,
        member: String,
    },
    #[error(
        "group {group}: member {member} must commit offsets with OffsetCommit v9+, not v{version}"
    )]
    UnsupportedCommitVersion {
        group: String,
        member: String,
        version: i16,
    },
    #[error("group {group}: regular expression {pattern:?} is not valid: {reason}")]
    InvalidRegularExpression {
        group: String,
        pattern: String,
        reason: String,
    },
    #[error("group {group}: assignor {assignor:?} is not supported")]
    UnsupportedAssignor { group: String, assignor: String },
    #[error("group {group}: {reason}")]
    InvalidRequest { group: String, reason: &'static str },
    #[error("group {group}: offsets were not replicated within {timeout_ms} ms")]
    Timeout { group: String, timeout_ms: u64 },
    #[error("group {group}: cannot write __consumer_offsets-{partition}: {source}")]
    Storage {
        group: String,
        partition: i32,
        #[source]
        source: Box<ReplicaError>,
    },
}

/// A `__consumer_offsets` record that cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("record is shorter than its fields")]
    Truncated,
    #[error("string is not UTF-8")]
    InvalidString,
    #[error("a non-nullable string is null")]
    UnexpectedNull,
    #[error("value version {version} is unknown")]
    UnknownVersion { version: i16 },
}
