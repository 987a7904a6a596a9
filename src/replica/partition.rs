//! One partition hosted by this broker: its log, leader epoch and high watermark, and a
//! channel that wakes parked fetches when the high watermark moves.
//!
//! With one replica per partition (until replication, issue #5) the high watermark equals
//! the log end offset after every append.
//! Invariant: log_start_offset <= high_watermark <= log_end_offset; the high watermark and
//! the leader epoch never decrease.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::watch;
use uuid::Uuid;

use super::error::ReplicaError;
use crate::log::cleaner::CleanedSegment;
use crate::log::{AppendInfo, Log, LogError};

/// A topic name and partition index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Offsets a reader needs besides the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// Equal to the high watermark until transactions exist.
    pub last_stable_offset: i64,
    pub log_end_offset: i64,
}

/// A partition led by this broker.
#[derive(Debug)]
pub struct Partition {
    pub topic_partition: TopicPartition,
    pub topic_id: Uuid,
    leader_epoch: i32,
    log: RwLock<Log>,
    /// Publishes the high watermark; fetches parked on this partition watch it.
    high_watermark: watch::Sender<i64>,
}

impl Partition {
    /// Wraps an opened log as the leader at `leader_epoch`.
    pub fn new(
        topic_partition: TopicPartition,
        topic_id: Uuid,
        leader_epoch: i32,
        log: Log,
    ) -> Self {
        let (high_watermark, _) = watch::channel(log.log_end_offset());
        Partition {
            topic_partition,
            topic_id,
            leader_epoch,
            log: RwLock::new(log),
            high_watermark,
        }
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// Read access to the log (never held across an await).
    pub fn log(&self) -> RwLockReadGuard<'_, Log> {
        self.log.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn log_mut(&self) -> RwLockWriteGuard<'_, Log> {
        self.log.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
    }

    /// A receiver that sees every later change of the high watermark.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.high_watermark.subscribe()
    }

    /// The partition's offsets, read consistently.
    pub fn offsets(&self) -> PartitionOffsets {
        let log = self.log();
        let high_watermark = self.high_watermark();
        PartitionOffsets {
            log_start_offset: log.log_start_offset(),
            high_watermark,
            last_stable_offset: high_watermark,
            log_end_offset: log.log_end_offset(),
        }
    }

    /// Checks a client's `current_leader_epoch` (KIP-320); -1 means "not given".
    pub fn check_leader_epoch(&self, requested: i32) -> Result<(), ReplicaError> {
        let current = self.leader_epoch;
        let tp = &self.topic_partition;
        if requested == -1 || requested == current {
            return Ok(());
        }
        let (topic, partition) = (tp.topic.clone(), tp.partition);
        if requested < current {
            Err(ReplicaError::FencedLeaderEpoch {
                topic,
                partition,
                requested,
                current,
            })
        } else {
            Err(ReplicaError::UnknownLeaderEpoch {
                topic,
                partition,
                requested,
                current,
            })
        }
    }

    /// Wraps a log error with this partition's name.
    pub fn log_error(&self, source: LogError) -> ReplicaError {
        ReplicaError::Log {
            topic: self.topic_partition.topic.clone(),
            partition: self.topic_partition.partition,
            source,
        }
    }

    /// Appends a producer's batch as leader and advances the high watermark (one replica:
    /// the high watermark is the log end offset).
    pub fn append_as_leader(&self, records: &[u8]) -> Result<AppendInfo, ReplicaError> {
        let mut log = self.log_mut();
        let info = log
            .append_as_leader(records, self.leader_epoch)
            .map_err(|e| self.log_error(e))?;
        let log_end_offset = log.log_end_offset();
        drop(log);
        self.maybe_advance_high_watermark(log_end_offset);
        self.check_invariants();
        Ok(info)
    }

    /// Moves the high watermark forward to `offset`; returns whether it moved.
    pub fn maybe_advance_high_watermark(&self, offset: i64) -> bool {
        self.high_watermark.send_if_modified(|hw| {
            if offset > *hw {
                *hw = offset;
                true
            } else {
                false
            }
        })
    }

    /// Applies retention and the flush policy (called by the maintenance task).
    pub fn maintain(&self, now_ms: i64) -> Result<(), ReplicaError> {
        let high_watermark = self.high_watermark();
        let mut log = self.log_mut();
        log.delete_old_segments(now_ms, high_watermark)
            .map_err(|e| self.log_error(e))?;
        log.maybe_flush_by_time(now_ms)
            .map_err(|e| self.log_error(e))?;
        Ok(())
    }

    /// Swaps a cleaned segment in (the log cleaner's last phase, under the write lock);
    /// returns whether the segments it replaces were still there.
    pub fn replace_with_cleaned(&self, cleaned: CleanedSegment) -> Result<bool, ReplicaError> {
        self.log_mut()
            .replace_with_cleaned(cleaned)
            .map_err(|e| self.log_error(e))
    }

    /// DeleteRecords: moves the log start offset to `offset` (-1: the high watermark) and
    /// returns the new log start offset.
    pub fn delete_records(&self, offset: i64) -> Result<i64, ReplicaError> {
        let high_watermark = self.high_watermark();
        let target = if offset == -1 { high_watermark } else { offset };
        let mut log = self.log_mut();
        if target < 0 || target > high_watermark {
            let source = LogError::OffsetOutOfRange {
                offset,
                log_start_offset: log.log_start_offset(),
                log_end_offset: high_watermark,
            };
            return Err(self.log_error(source));
        }
        log.delete_records(target, high_watermark)
            .map_err(|e| self.log_error(e))
    }

    /// Flushes and trims the log for a clean shutdown.
    pub fn close(&self) -> Result<(), ReplicaError> {
        self.log_mut().close().map_err(|e| self.log_error(e))
    }

    /// Checks the partition's invariants (debug builds).
    pub fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let offsets = self.offsets();
        debug_assert!(
            offsets.log_start_offset <= offsets.high_watermark,
            "start <= HW"
        );
        debug_assert!(
            offsets.high_watermark <= offsets.log_end_offset,
            "HW <= LEO"
        );
    }
}
