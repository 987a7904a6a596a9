//! Errors of the replica layer.

use crate::ids::{BrokerId, LeaderEpoch, Offset};
use crate::log::LogError;

/// Why a partition operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("unknown topic or partition {topic}-{partition}")]
    UnknownTopicOrPartition { topic: String, partition: i32 },
    #[error("{topic}-{partition}: leader epoch {requested} is older than {current}")]
    FencedLeaderEpoch {
        topic: String,
        partition: i32,
        requested: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("{topic}-{partition}: leader epoch {requested} is newer than {current}")]
    UnknownLeaderEpoch {
        topic: String,
        partition: i32,
        requested: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("{topic}-{partition}: {isr} in sync, {required} required")]
    NotEnoughReplicas {
        topic: String,
        partition: i32,
        isr: usize,
        required: usize,
    },
    #[error("{topic}-{partition}: the ISR shrank to {isr} below {required} after the append")]
    NotEnoughReplicasAfterAppend {
        topic: String,
        partition: i32,
        isr: usize,
        required: usize,
    },
    #[error("{topic}-{partition}: offset {offset} not replicated within {timeout_ms} ms")]
    ReplicationTimeout {
        topic: String,
        partition: i32,
        offset: Offset,
        timeout_ms: u64,
    },
    #[error("{topic}-{partition}: this broker is not the leader (leader {leader}, epoch {leader_epoch})")]
    NotLeaderOrFollower {
        topic: String,
        partition: i32,
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
    },
    #[error("{topic}-{partition}: its log directory {log_dir} failed")]
    LogDirOffline {
        topic: String,
        partition: i32,
        log_dir: std::path::PathBuf,
    },
    #[error("{topic}-{partition}: no log directory of this broker is online")]
    NoLogDirOnline { topic: String, partition: i32 },
    #[error("log directory {path} is not in this broker's log.dirs")]
    LogDirNotFound { path: String },
    #[error("{topic}-{partition}: no replica here")]
    ReplicaNotAvailable { topic: String, partition: i32 },
    #[error("log directory file {path} does not fit this broker: {reason}")]
    InconsistentLogDir {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("{topic}-{partition}: {source}")]
    Log {
        topic: String,
        partition: i32,
        #[source]
        source: LogError,
    },
}
