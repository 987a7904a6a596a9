//! Errors of `highwater dump`: [`DumpError`] when a file cannot be dumped at all, and
//! [`Problem`], one thing found wrong inside a file. A problem is a value in the report,
//! never a failure of the dump itself.

use std::path::PathBuf;

/// Why a file could not be dumped at all (as opposed to a [`Problem`] found in it).
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The name is not a 20-digit base offset with `.log`, `.index` or `.timeindex`.
    #[error("{}: not a segment file (20 digits, then .log, .index or .timeindex)", .path.display())]
    NotASegmentFile { path: PathBuf },
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The output could not be written (e.g. a closed pipe).
    #[error("cannot write the dump: {source}")]
    Write {
        #[source]
        source: std::io::Error,
    },
}

/// Something wrong in a file. Warnings ([`Problem::is_warning`]) are harmless to highwater
/// but reported by Kafka's DumpLogSegments; every other variant fails a verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A batch whose CRC32C does not match its bytes (damaged on disk or torn).
    #[error(
        "batch at position {position} (offset {base_offset}): stored CRC {stored:#010x} != \
        computed {computed:#010x}"
    )]
    BadCrc {
        position: usize,
        base_offset: i64,
        stored: u32,
        computed: u32,
    },
    /// A batch that is not record batch v2; its CRC and counts are not checked.
    #[error(
        "batch at position {position} (offset {base_offset}): magic {magic}, only record \
        batch v2 is stored"
    )]
    BadMagic {
        position: usize,
        base_offset: i64,
        magic: i8,
    },
    /// A batch whose record count and last offset delta disagree.
    #[error(
        "batch at position {position} (offset {base_offset}): {record_count} records but \
        last offset delta {last_offset_delta}"
    )]
    BadRecordCount {
        position: usize,
        base_offset: i64,
        record_count: i32,
        last_offset_delta: i32,
    },
    /// A batch that does not start right after the previous one (or at the file's base offset).
    #[error(
        "batch at position {position} has base offset {base_offset}, expected {expected}: \
        offsets must be contiguous and increasing"
    )]
    OffsetNotContiguous {
        position: usize,
        base_offset: i64,
        expected: i64,
    },
    /// A torn tail that starts with a readable header whose batch runs past the end of the
    /// file.
    #[error(
        "torn tail at position {position}: the batch at offset {base_offset} claims {size} \
        bytes, only {available} remain"
    )]
    CutOffBatch {
        position: usize,
        base_offset: i64,
        size: usize,
        available: usize,
    },
    /// A torn tail too short or too damaged to hold a batch header.
    #[error(
        "torn tail at position {position}: {bytes} bytes after the last whole batch are not \
        a batch header (next offset {next_offset})"
    )]
    TornTail {
        position: usize,
        bytes: usize,
        next_offset: i64,
    },
    /// A CRC-valid batch whose records do not decode (`deep` only).
    #[error(
        "batch at position {position} (offset {base_offset}): records do not decode: {reason}"
    )]
    Undecodable {
        position: usize,
        base_offset: i64,
        reason: String,
    },
    /// A decoded record whose offset is not the batch's base offset plus its index.
    #[error(
        "batch at offset {base_offset}: record {index} has offset {found}, expected {expected}"
    )]
    RecordOffset {
        base_offset: i64,
        index: usize,
        expected: i64,
        found: i64,
    },
    /// A batch whose header counts a different number of records than decode.
    #[error("batch at offset {base_offset}: header says {header} records, {decoded} decode")]
    RecordCount {
        base_offset: i64,
        header: i32,
        decoded: usize,
    },
    /// An index file whose length is not whole entries.
    #[error("file length {bytes} is not a multiple of the {entry_bytes}-byte entry size")]
    PartialEntry { bytes: usize, entry_bytes: usize },
    /// An index entry whose relative offset Kafka would read as negative.
    #[error(
        "entry {entry}: relative offset {relative} is negative (Kafka reads it as a signed \
        32-bit number)"
    )]
    NegativeRelativeOffset { entry: usize, relative: i32 },
    /// An offset index entry whose offset or position does not increase.
    #[error("entry {entry} (offset {offset}, position {position}) does not increase over entry \
        {} (offset {previous_offset}, position {previous_position})", .entry - 1)]
    IndexNotIncreasing {
        entry: usize,
        offset: i64,
        position: u32,
        previous_offset: i64,
        previous_position: u32,
    },
    /// An index without the `.log` of the same base offset (verify only).
    #[error("no sibling {} to check the index against", .path.display())]
    MissingLog { path: PathBuf },
    /// An offset index entry pointing past the last whole batch.
    #[error(
        "entry {entry} (offset {offset}) points to position {position}, past the whole \
        batches, which end at {log_end}"
    )]
    IndexPastLogEnd {
        entry: usize,
        offset: i64,
        position: u32,
        log_end: usize,
    },
    /// An offset index entry pointing into the middle of a batch.
    #[error(
        "entry {entry} (offset {offset}) points to position {position}, which is not where a \
        batch starts"
    )]
    NotBatchBoundary {
        entry: usize,
        offset: i64,
        position: u32,
    },
    /// An offset index entry pointing at a batch that does not hold its offset.
    #[error(
        "entry {entry} (offset {offset}) points to position {position}, the batch of offsets \
        {batch_base_offset}..={batch_last_offset}, which does not hold it"
    )]
    OffsetNotInBatch {
        entry: usize,
        offset: i64,
        position: u32,
        batch_base_offset: i64,
        batch_last_offset: i64,
    },
    /// Warning: an index entry naming an offset inside its batch, not the batch's last.
    #[error(
        "entry {entry} (offset {offset}) is inside the batch of offsets \
        {batch_base_offset}..={batch_last_offset}: Kafka indexes a batch's last offset and its \
        DumpLogSegments reports a mismatch"
    )]
    OffsetNotLastOfBatch {
        entry: usize,
        offset: i64,
        batch_base_offset: i64,
        batch_last_offset: i64,
    },
    /// A time index entry whose timestamp is below the previous one's.
    #[error(
        "entry {entry}: timestamp {timestamp} (offset {offset}) is below the previous \
        entry's {previous}"
    )]
    TimestampDecreasing {
        entry: usize,
        timestamp: i64,
        offset: i64,
        previous: i64,
    },
    /// Warning: a time index entry repeating the previous timestamp.
    #[error(
        "entry {entry}: timestamp {timestamp} repeats the previous entry's: Kafka's time \
        index keeps timestamps strictly increasing"
    )]
    TimestampRepeated { entry: usize, timestamp: i64 },
    /// A time index entry whose offset is below the previous one's.
    #[error("entry {entry}: offset {offset} is below the previous entry's {previous}")]
    TimeIndexOffsetDecreasing {
        entry: usize,
        offset: i64,
        previous: i64,
    },
    /// A time index entry whose offset is in no whole batch of the `.log`.
    #[error(
        "entry {entry} (timestamp {timestamp}): offset {offset} is in no whole batch of the \
        .log (next offset {next_offset})"
    )]
    OffsetNotInLog {
        entry: usize,
        timestamp: i64,
        offset: i64,
        next_offset: i64,
    },
    /// A time index entry whose timestamp is not its batch's max timestamp.
    #[error(
        "entry {entry}: timestamp {timestamp} for offset {offset}, but that batch's max \
        timestamp is {batch_max_timestamp}"
    )]
    TimestampMismatch {
        entry: usize,
        timestamp: i64,
        offset: i64,
        batch_max_timestamp: i64,
    },
}

impl Problem {
    /// Whether this is only a warning: harmless to highwater's lookups, but not what Kafka
    /// writes, so Kafka's own tool would complain.
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            Problem::OffsetNotLastOfBatch { .. } | Problem::TimestampRepeated { .. }
        )
    }
}
