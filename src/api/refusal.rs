//! What a handler itself refuses or fails with, before or beside the layers below: a
//! request refused by its own validation ([`Refusal`]) and a failed topic change
//! ([`AdminError`]). A leaf of `api`: the codes they get are chosen in `errors.rs` alone.

use crate::controller::ControllerError;
use crate::replica::ReplicaError;

/// A request (or one resource of it) refused by a handler's own checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no such topic or partition")]
    UnknownTopic,
    #[error("no topic with this id")]
    UnknownTopicId,
    #[error("not a valid topic name, or a topic clients may not write")]
    InvalidTopic,
    #[error("the partition has no leader")]
    NoLeader,
    #[error("this broker does not lead the partition")]
    NotLeader,
    #[error("acks must be -1, 0 or 1")]
    InvalidRequiredAcks,
    #[error("the request is not valid")]
    InvalidRequest,
    #[error("a configuration value is not valid")]
    InvalidConfig,
    #[error("the API version is not supported")]
    UnsupportedVersion,
    #[error("no coordinator is available")]
    NoCoordinator,
    #[error("no authorizer is configured")]
    SecurityDisabled,
    #[error("no such fetch session")]
    FetchSessionNotFound,
    #[error("the fetch session epoch is out of sequence")]
    FetchSessionEpoch,
    #[error("a fetch session opened with topic ids used by name, or the reverse")]
    FetchSessionTopicIds,
    #[error("the offset of a pending transaction is not committed yet")]
    UnstableOffsetCommit,
    #[error("the feature level update is not valid")]
    InvalidFeatureUpdate,
    #[error("not attempted: another part of the request failed")]
    NotAttempted,
    #[error("the log directory failed")]
    StorageFailed,
    #[error("the broker failed to answer")]
    Internal,
    #[error("not replicated within the timeout")]
    NotReplicatedInTime,
    #[error("the principal may not do this on the cluster")]
    ClusterAuthorizationFailed,
    #[error("the principal may not do this on the topic")]
    TopicAuthorizationFailed,
    #[error("the principal may not do this on the group")]
    GroupAuthorizationFailed,
    #[error("the principal may not do this with the transactional id")]
    TransactionalIdAuthorizationFailed,
    #[error("the listener serves another endpoint type")]
    MismatchedEndpointType,
    #[error("no such endpoint type")]
    UnsupportedEndpointType,
    #[error("The throttling quota has been exceeded.")]
    ThrottlingQuotaExceeded,
}

/// A failed topic change: refused by the controller, or committed but not applied here.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// Refused by the handler itself (the authorizer, most often).
    #[error("{0}")]
    Refused(Refusal),
}
