//! Errors of the storage engine. Each variant carries the context needed to log it once
//! where it is handled; `api/errors.rs` decides which Kafka error code a client sees.

use std::path::PathBuf;

use crate::ids::{LeaderEpoch, Offset};

/// Everything that can go wrong inside the storage engine.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An I/O failure on a segment, index or checkpoint file.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A batch whose stored CRC does not match its bytes.
    #[error("corrupt batch at offset {offset}: CRC {stored:#010x} != computed {computed:#010x}")]
    CorruptBatch {
        offset: i64,
        stored: u32,
        computed: u32,
    },
    /// A batch whose header is inconsistent (bad length, bad magic, bad counts).
    #[error("invalid batch: {reason}")]
    InvalidBatch { reason: &'static str },
    /// The request carried no batch, or more than one (Produce v3+ allows exactly one).
    #[error("expected exactly one record batch, found {count}")]
    BatchCount { count: usize },
    /// A batch larger than the topic's `max.message.bytes`.
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    /// A batch larger than a whole segment (`segment.bytes`).
    #[error("batch of {size} bytes exceeds segment.bytes {max}")]
    BatchLargerThanSegment { size: usize, max: usize },
    /// A record timestamp outside [now - message.timestamp.before.max.ms,
    /// now + message.timestamp.after.max.ms].
    /// Each offending record: its index in the batch, offset in it and timestamp.
    #[error("{} records with timestamps outside the accepted range [{min}, {max}]", records.len())]
    InvalidTimestamp {
        records: Vec<(i32, i64, i64)>,
        min: i64,
        max: i64,
    },
    /// A control batch (transaction marker) sent by a client: only coordinators write them.
    #[error("producer {producer_id}: clients may not write control batches")]
    ControlBatchFromClient { producer_id: i64 },
    /// A transaction marker from a coordinator older than the last one seen (a deposed
    /// coordinator).
    #[error(
        "producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {current}"
    )]
    CoordinatorFenced {
        producer_id: i64,
        coordinator_epoch: i32,
        current: i32,
    },
    /// The producer's epoch is older than the one on record.
    #[error("producer {producer_id}: epoch {epoch} is older than {current_epoch}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    /// The batch's first sequence does not follow the producer's last one.
    #[error("producer {producer_id}: sequence {first_sequence} does not follow {last_sequence}")]
    OutOfOrderSequence {
        producer_id: i64,
        first_sequence: i32,
        last_sequence: i32,
    },
    /// A read or lookup outside [log start offset, log end offset].
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: Offset,
        log_start_offset: Offset,
        log_end_offset: Offset,
    },
    /// The records inside a stored batch cannot be read (bad compression or record bytes).
    #[error("cannot read the records of the batch at offset {offset}: {reason}")]
    UndecodableRecords { offset: i64, reason: String },
    /// Records without a key sent to a compacted topic (Kafka's LogValidator refuses the
    /// batch and names them by their index in it).
    #[error("compacted topic partition {partition} cannot accept records without a key (batch indexes {indexes:?})")]
    NullKeyInCompactedTopic {
        partition: String,
        indexes: Vec<i32>,
    },
    /// A cleaning round stopped because the broker is shutting down.
    #[error("cleaning of {dir} aborted")]
    CleaningAborted { dir: PathBuf },
    /// A replicated batch that does not start at the follower's log end offset.
    #[error("replicated batch starts at offset {found}, the log ends at {expected}")]
    NonContiguousOffset { expected: Offset, found: Offset },
    /// A file on disk that cannot be interpreted (bad name, bad checkpoint text).
    #[error("corrupt file {path}: {reason}")]
    CorruptFile { path: PathBuf, reason: String },
    /// A leader epoch older than the latest one the epoch cache holds: recording it would
    /// rewrite the history of epochs the log already has.
    #[error("leader epoch {epoch} at offset {start_offset} is older than the latest {latest}")]
    StaleLeaderEpoch {
        epoch: LeaderEpoch,
        start_offset: Offset,
        latest: LeaderEpoch,
    },
}

impl LogError {
    /// Wraps an `io::Error` with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
