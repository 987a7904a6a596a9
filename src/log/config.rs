//! What a log is opened with: its configuration, resolved from the broker's defaults and
//! the topic's overrides ([`LogConfig`], with compaction's [`CompactionConfig`]), and what
//! the broker's checkpoints say of it ([`OpenOptions`]). A leaf of `log/`: every file may
//! read it, it reads none of them but the segment's own settings.

use super::segment::SegmentConfig;
use crate::ids::Offset;

/// The configuration a log needs (resolved from broker defaults and topic overrides).
#[derive(Debug, Clone, Copy)]
pub struct LogConfig {
    pub segment: SegmentConfig,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a CreateTime timestamp may be.
    pub timestamp_after_max_ms: i64,
    /// `message.timestamp.type` is LogAppendTime: the leader stamps each batch with its
    /// own time (the batch's max timestamp, and the timestamp type bit).
    pub log_append_time: bool,
    /// `segment.ms`: the age at which the active segment is rolled.
    pub segment_ms: i64,
    /// `flush.messages`: appended records after which the log is fsynced.
    pub flush_messages: i64,
    /// `flush.ms`: the longest time appended data stays unflushed.
    pub flush_ms: i64,
    /// `retention.ms`: segments whose newest record is older are deleted (-1: never).
    pub retention_ms: i64,
    /// `retention.bytes`: the oldest segments are deleted beyond this size (-1: never).
    pub retention_bytes: i64,
    /// `cleanup.policy` holds `delete`: `retention.ms` and `retention.bytes` apply.
    pub cleanup_delete: bool,
    /// `cleanup.policy` holds `compact`, and the compaction settings.
    pub compaction: CompactionConfig,
    /// `min.insync.replicas`: below this many in-sync replicas the leader's high
    /// watermark stays where it is (KIP-966's strict min ISR).
    pub min_insync_replicas: usize,
}

/// The topic configs compaction reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionConfig {
    /// `cleanup.policy` holds `compact`.
    pub compact: bool,
    /// `delete.retention.ms`: how long a tombstone stays after the cleaning that kept it.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: dirty bytes / all bytes above which a log is cleaned.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: segments with newer records are not cleaned yet.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: dirty records older than this force a cleaning.
    pub max_compaction_lag_ms: i64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            compact: false,
            delete_retention_ms: 86_400_000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
        }
    }
}

/// What the broker knows about a log before opening it.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// The broker stopped cleanly: trust every file as it is.
    pub clean: bool,
    /// From `recovery-point-offset-checkpoint`: offsets below it are known to be on disk,
    /// so only segments holding it or later offsets are re-scanned after a crash.
    pub recovery_point: Option<Offset>,
    /// From `log-start-offset-checkpoint` (DeleteRecords may have moved it into a segment).
    pub log_start_offset: Option<Offset>,
}

/// A log configuration for tests: given segment size and index interval, no limits.
#[cfg(test)]
pub(crate) fn test_config(segment_bytes: usize, index_interval_bytes: usize) -> LogConfig {
    LogConfig {
        segment: SegmentConfig {
            segment_bytes,
            segment_index_bytes: 4096,
            index_interval_bytes,
        },
        max_message_bytes: 1 << 20,
        timestamp_before_max_ms: i64::MAX,
        log_append_time: false,
        timestamp_after_max_ms: i64::MAX,
        segment_ms: i64::MAX,
        flush_messages: i64::MAX,
        flush_ms: i64::MAX,
        retention_ms: -1,
        retention_bytes: -1,
        cleanup_delete: true,
        compaction: CompactionConfig::default(),
        min_insync_replicas: 1,
    }
}
