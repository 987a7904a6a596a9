//! `highwater dump`: prints a segment's `.log`, `.index` or `.timeindex` as Apache Kafka's
//! DumpLogSegments (kafka-dump-log.sh) does, and checks it. A `.log` is walked batch by
//! batch (header, CRC, contiguous offsets, torn tail; records with `deep`); an index's
//! entries must increase and, with `verify`, point at the right batches of the sibling
//! `.log` of the same base offset.
//!
//! Files are read whole with `std::fs::read`, never through the broker's maps, so the dump
//! judges what the broker wrote instead of trusting it. Must not: create, grow, lock or
//! write any file; panic on any bytes (damaged files are its input).
//!
//! Preallocated space: the active segment's files are preallocated and trimmed only on
//! roll and clean close (AbstractIndex in Kafka), so an untrimmed file (the active
//! segment, or any after a crash) ends in zeros. Trailing zero bytes of a `.log` and
//! trailing all-zero index entries are reported as preallocated space, not as data. A
//! time index entry (timestamp 0, base offset) at the very end is indistinguishable from
//! preallocation and is counted as such.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use crate::log::batch::{self, BatchHeader, BatchIter};
use crate::log::LogError;

/// Size of one `.index` entry: i32 offset relative to the base offset, i32 file position.
pub const OFFSET_INDEX_ENTRY_BYTES: usize = 8;
/// Size of one `.timeindex` entry: i64 timestamp, i32 offset relative to the base offset.
pub const TIME_INDEX_ENTRY_BYTES: usize = 12;
/// Problems (and, separately, warnings) kept per file; the rest are only counted.
pub const PROBLEMS_PER_FILE_MAX: usize = 100;

/// What to do besides printing headers and entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpOptions {
    /// Check index entries against the sibling `.log` (the file's own consistency is
    /// always checked).
    pub verify: bool,
    /// Decode and print every record of a `.log`, checking its offsets.
    pub deep: bool,
}

/// The three segment files the dump reads, named after their suffixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    /// `.log`: record batches.
    Log,
    /// `.index`: (relative offset, position) entries.
    OffsetIndex,
    /// `.timeindex`: (timestamp, relative offset) entries.
    TimeIndex,
}

impl FileKind {
    /// The kind and base offset of a segment file named `<20 digits>.<suffix>`.
    pub fn of(path: &Path) -> Option<(FileKind, i64)> {
        let name = path.file_name()?.to_str()?;
        let (stem, suffix) = name.split_once('.')?;
        let kind = match suffix {
            "log" => FileKind::Log,
            "index" => FileKind::OffsetIndex,
            "timeindex" => FileKind::TimeIndex,
            _ => return None,
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((kind, stem.parse().ok()?))
    }
}

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

/// What the dump of one file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    /// The file dumped.
    pub path: PathBuf,
    /// What it holds, from its suffix.
    pub kind: FileKind,
    /// From the file name.
    pub base_offset: i64,
    /// Whole batches of a `.log`, or entries of an index (not counting preallocated ones).
    pub items: usize,
    /// Records decoded (with `deep`).
    pub records: usize,
    /// Trailing zero bytes of a `.log`, or trailing all-zero entries of an index.
    pub preallocated: usize,
    /// Problems that fail a verify, at most [`PROBLEMS_PER_FILE_MAX`].
    pub problems: Vec<Problem>,
    /// Warnings, at most [`PROBLEMS_PER_FILE_MAX`].
    pub warnings: Vec<Problem>,
    /// Problems and warnings found beyond the limit.
    pub omitted: usize,
}

impl FileReport {
    fn new(path: &Path, kind: FileKind, base_offset: i64) -> Self {
        FileReport {
            path: path.to_path_buf(),
            kind,
            base_offset,
            items: 0,
            records: 0,
            preallocated: 0,
            problems: Vec::new(),
            warnings: Vec::new(),
            omitted: 0,
        }
    }

    /// Whether the file has no problem (warnings allowed).
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }

    fn push(&mut self, problem: Problem) {
        let list = if problem.is_warning() {
            &mut self.warnings
        } else {
            &mut self.problems
        };
        if list.len() < PROBLEMS_PER_FILE_MAX {
            list.push(problem);
        } else {
            self.omitted += 1;
        }
    }
}

fn emit(out: &mut dyn Write, args: fmt::Arguments<'_>) -> Result<(), DumpError> {
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(|source| DumpError::Write { source })
}

fn read(path: &Path) -> Result<Vec<u8>, DumpError> {
    std::fs::read(path).map_err(|source| DumpError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Dumps one segment file to `out` and returns what it found. Fails only when the file
/// cannot be read or is not a segment file; damage is reported in the [`FileReport`].
pub fn dump_file(
    path: &Path,
    options: DumpOptions,
    out: &mut dyn Write,
) -> Result<FileReport, DumpError> {
    let (kind, base_offset) = FileKind::of(path).ok_or_else(|| DumpError::NotASegmentFile {
        path: path.to_path_buf(),
    })?;
    let bytes = read(path)?;
    let mut report = FileReport::new(path, kind, base_offset);
    emit(out, format_args!("Dumping {}", path.display()))?;
    match kind {
        FileKind::Log => dump_log(&bytes, options, &mut report, out)?,
        FileKind::OffsetIndex => dump_offset_index(&bytes, options, &mut report, out)?,
        FileKind::TimeIndex => dump_time_index(&bytes, options, &mut report, out)?,
    }
    write_summary(&report, out)?;
    Ok(report)
}

/// The segment files (`.log`, `.index`, `.timeindex`) of a partition directory, by base
/// offset, then kind.
pub fn partition_files(dir: &Path) -> Result<Vec<PathBuf>, DumpError> {
    let io = |source| DumpError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if let Some((kind, base_offset)) = FileKind::of(&path) {
            files.push((base_offset, kind, path));
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, _, path)| path).collect())
}

/// Verifies every segment file of a partition directory, printing nothing.
pub fn verify_partition_dir(dir: &Path) -> Result<Vec<FileReport>, DumpError> {
    let options = DumpOptions {
        verify: true,
        deep: false,
    };
    partition_files(dir)?
        .iter()
        .map(|path| dump_file(path, options, &mut std::io::sink()))
        .collect()
}

fn write_summary(report: &FileReport, out: &mut dyn Write) -> Result<(), DumpError> {
    let what = match report.kind {
        FileKind::Log => "batches",
        FileKind::OffsetIndex | FileKind::TimeIndex => "entries",
    };
    let mut line = format!("{} {what}", report.items);
    if report.records > 0 {
        line += &format!(", {} records", report.records);
    }
    if report.preallocated > 0 {
        let unit = match report.kind {
            FileKind::Log => "zero bytes",
            FileKind::OffsetIndex | FileKind::TimeIndex => "all-zero entries",
        };
        line += &format!(
            ", then {} {unit}: preallocated space (not trimmed: the active segment, or a crash)",
            report.preallocated
        );
    }
    emit(out, format_args!("{line}"))?;
    for warning in &report.warnings {
        emit(out, format_args!("warning: {warning}"))?;
    }
    for problem in &report.problems {
        emit(out, format_args!("problem: {problem}"))?;
    }
    if report.omitted > 0 {
        emit(out, format_args!("... and {} more", report.omitted))?;
    }
    Ok(())
}

// ---- .log ----------------------------------------------------------------------------

/// The last offset of a batch whose header may be garbage (no overflow).
fn last_offset(header: &BatchHeader) -> i64 {
    header
        .base_offset
        .saturating_add(i64::from(header.last_offset_delta))
}

fn codec_name(attributes: i16) -> &'static str {
    match attributes & 0x07 {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

fn timestamp_type(attributes: i16) -> &'static str {
    if attributes & 0x08 != 0 {
        "LogAppendTime"
    } else {
        "CreateTime"
    }
}

/// The CRC problem of the batch at `position`, if any (`None` when the CRC holds).
fn crc_problem(bytes: &[u8], position: usize, header: &BatchHeader) -> Option<Problem> {
    match batch::check_crc(&bytes[position..], header) {
        Ok(()) => None,
        Err(LogError::CorruptBatch {
            stored, computed, ..
        }) => Some(Problem::BadCrc {
            position,
            base_offset: header.base_offset,
            stored,
            computed,
        }),
        Err(_) => Some(Problem::BadCrc {
            position,
            base_offset: header.base_offset,
            stored: header.crc,
            computed: 0,
        }),
    }
}

/// The header-level problems of one whole batch; `expected` is the offset it must start at.
fn batch_problems(
    bytes: &[u8],
    position: usize,
    header: &BatchHeader,
    expected: i64,
) -> Vec<Problem> {
    let base_offset = header.base_offset;
    let mut problems = Vec::new();
    if header.magic != batch::MAGIC_V2 {
        let magic = header.magic;
        problems.push(Problem::BadMagic {
            position,
            base_offset,
            magic,
        });
        return problems;
    }
    problems.extend(crc_problem(bytes, position, header));
    if header.record_count <= 0
        || i64::from(header.last_offset_delta) != i64::from(header.record_count) - 1
    {
        problems.push(Problem::BadRecordCount {
            position,
            base_offset,
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    if base_offset != expected {
        problems.push(Problem::OffsetNotContiguous {
            position,
            base_offset,
            expected,
        });
    }
    problems
}

fn write_batch_line(
    out: &mut dyn Write,
    position: usize,
    header: &BatchHeader,
    crc_valid: bool,
) -> Result<(), DumpError> {
    let a = header.attributes;
    emit(
        out,
        format_args!(
            "baseOffset: {} lastOffset: {} count: {} position: {} size: {} magic: {} \
             crc: {:#010x} crcValid: {crc_valid} attributes: {a:#06x} compresscodec: {} \
             timestampType: {} isTransactional: {} isControl: {} producerId: {} \
             producerEpoch: {} baseSequence: {} partitionLeaderEpoch: {} baseTimestamp: {} \
             maxTimestamp: {}",
            header.base_offset,
            last_offset(header),
            header.record_count,
            position,
            header.size,
            header.magic,
            header.crc,
            codec_name(a),
            timestamp_type(a),
            header.is_transactional(),
            header.is_control(),
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.partition_leader_epoch,
            header.base_timestamp,
            header.max_timestamp,
        ),
    )
}

/// Decodes the records of one CRC-valid batch, prints them and checks their offsets.
fn dump_records(
    batch_bytes: &[u8],
    position: usize,
    header: &BatchHeader,
    report: &mut FileReport,
    out: &mut dyn Write,
) -> Result<(), DumpError> {
    let base_offset = header.base_offset;
    let mut buf = Bytes::copy_from_slice(batch_bytes);
    let set = match RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set,
        Err(error) => {
            let reason = error.to_string();
            report.push(Problem::Undecodable {
                position,
                base_offset,
                reason,
            });
            return Ok(());
        }
    };
    let size = |b: &Option<Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
    let ts_type = timestamp_type(header.attributes);
    for (index, record) in set.records.iter().enumerate() {
        emit(
            out,
            format_args!(
                "| offset: {} {ts_type}: {} keySize: {} valueSize: {} sequence: {} headers: {}",
                record.offset,
                record.timestamp,
                size(&record.key),
                size(&record.value),
                record.sequence,
                record.headers.len(),
            ),
        )?;
        let expected = base_offset.saturating_add(index as i64);
        if record.offset != expected {
            let found = record.offset;
            report.push(Problem::RecordOffset {
                base_offset,
                index,
                expected,
                found,
            });
        }
    }
    let decoded = set.records.len();
    if i64::try_from(decoded).ok() != Some(i64::from(header.record_count)) {
        let header = header.record_count;
        report.push(Problem::RecordCount {
            base_offset,
            header,
            decoded,
        });
    }
    report.records += decoded;
    Ok(())
}

/// Reports what follows the last whole batch: nothing, preallocated zeros, or a torn tail.
fn check_tail(bytes: &[u8], end: usize, next_offset: i64, report: &mut FileReport) {
    let tail = &bytes[end..];
    if tail.iter().all(|b| *b == 0) {
        report.preallocated = tail.len();
        return;
    }
    let problem = match BatchHeader::parse(tail) {
        Some(header) => Problem::CutOffBatch {
            position: end,
            base_offset: header.base_offset,
            size: header.size,
            available: tail.len(),
        },
        None => Problem::TornTail {
            position: end,
            bytes: tail.len(),
            next_offset,
        },
    };
    report.push(problem);
}

fn dump_log(
    bytes: &[u8],
    options: DumpOptions,
    report: &mut FileReport,
    out: &mut dyn Write,
) -> Result<(), DumpError> {
    emit(
        out,
        format_args!("Log starting offset: {}", report.base_offset),
    )?;
    let mut batches = BatchIter::new(bytes);
    let mut next_offset = report.base_offset;
    for (position, header) in batches.by_ref() {
        let problems = batch_problems(bytes, position, &header, next_offset);
        let crc_valid = !problems
            .iter()
            .any(|p| matches!(p, Problem::BadCrc { .. } | Problem::BadMagic { .. }));
        write_batch_line(out, position, &header, crc_valid)?;
        if options.deep && crc_valid {
            let batch_bytes = &bytes[position..position + header.size];
            dump_records(batch_bytes, position, &header, report, out)?;
        }
        for problem in problems {
            report.push(problem);
        }
        report.items += 1;
        next_offset = last_offset(&header).saturating_add(1);
    }
    check_tail(bytes, batches.position(), next_offset, report);
    Ok(())
}

// ---- indexes -------------------------------------------------------------------------

/// A whole batch of the sibling `.log`, as an index entry is checked against it.
#[derive(Debug, Clone, Copy)]
struct BatchSpan {
    position: usize,
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
}

/// The whole batches of the `.log` next to an index, and where they end.
struct SiblingLog {
    base_offset: i64,
    batches: Vec<BatchSpan>,
    end: usize,
}

impl SiblingLog {
    fn path(index_path: &Path, base_offset: i64) -> PathBuf {
        index_path.with_file_name(format!("{base_offset:020}.log"))
    }

    /// Reads the `.log` of the same base offset; `None` when there is none.
    fn read(index_path: &Path, base_offset: i64) -> Result<Option<SiblingLog>, DumpError> {
        let path = Self::path(index_path, base_offset);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(DumpError::Read { path, source }),
        };
        let mut iter = BatchIter::new(&bytes);
        let batches = iter
            .by_ref()
            .map(|(position, header)| BatchSpan {
                position,
                base_offset: header.base_offset,
                last_offset: last_offset(&header),
                max_timestamp: header.max_timestamp,
            })
            .collect();
        Ok(Some(SiblingLog {
            base_offset,
            batches,
            end: iter.position(),
        }))
    }

    fn at_position(&self, position: usize) -> Option<&BatchSpan> {
        let n = self
            .batches
            .binary_search_by_key(&position, |b| b.position)
            .ok()?;
        self.batches.get(n)
    }

    fn holding(&self, offset: i64) -> Option<&BatchSpan> {
        let n = self.batches.partition_point(|b| b.last_offset < offset);
        self.batches.get(n).filter(|b| b.base_offset <= offset)
    }

    fn next_offset(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.base_offset, |b| b.last_offset.saturating_add(1))
    }
}

/// The used entries of an index file: whole entries up to the last one that is not all
/// zeros. Counts the preallocated ones and reports a partial entry.
fn used_entries<'a>(
    bytes: &'a [u8],
    entry_bytes: usize,
    report: &mut FileReport,
) -> impl Iterator<Item = &'a [u8]> {
    if !bytes.len().is_multiple_of(entry_bytes) {
        report.push(Problem::PartialEntry {
            bytes: bytes.len(),
            entry_bytes,
        });
    }
    let whole = bytes.len() / entry_bytes;
    let used = bytes[..whole * entry_bytes]
        .chunks_exact(entry_bytes)
        .rposition(|entry| entry.iter().any(|b| *b != 0))
        .map_or(0, |n| n + 1);
    report.preallocated = whole - used;
    report.items = used;
    bytes.chunks_exact(entry_bytes).take(used)
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_i64(b: &[u8]) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&b[..8]);
    i64::from_be_bytes(raw)
}

/// The absolute offset of an entry, reporting a negative relative offset.
fn entry_offset(report: &mut FileReport, entry: usize, relative: i32) -> i64 {
    if relative < 0 {
        report.push(Problem::NegativeRelativeOffset { entry, relative });
    }
    report.base_offset.saturating_add(i64::from(relative))
}

fn sibling_for(
    report: &mut FileReport,
    options: DumpOptions,
) -> Result<Option<SiblingLog>, DumpError> {
    if !options.verify {
        return Ok(None);
    }
    let log = SiblingLog::read(&report.path, report.base_offset)?;
    if log.is_none() {
        let path = SiblingLog::path(&report.path, report.base_offset);
        report.push(Problem::MissingLog { path });
    }
    Ok(log)
}

fn dump_offset_index(
    bytes: &[u8],
    options: DumpOptions,
    report: &mut FileReport,
    out: &mut dyn Write,
) -> Result<(), DumpError> {
    let entries: Vec<(i32, u32)> = used_entries(bytes, OFFSET_INDEX_ENTRY_BYTES, report)
        .map(|e| (be_i32(e), be_i32(&e[4..]) as u32))
        .collect();
    let log = sibling_for(report, options)?;
    let mut previous: Option<(i64, u32)> = None;
    for (entry, (relative, position)) in entries.into_iter().enumerate() {
        let offset = entry_offset(report, entry, relative);
        emit(out, format_args!("offset: {offset} position: {position}"))?;
        if let Some((previous_offset, previous_position)) = previous {
            if offset <= previous_offset || position <= previous_position {
                report.push(Problem::IndexNotIncreasing {
                    entry,
                    offset,
                    position,
                    previous_offset,
                    previous_position,
                });
            }
        }
        previous = Some((offset, position));
        if let Some(log) = &log {
            if let Some(problem) = check_offset_entry(log, entry, offset, position) {
                report.push(problem);
            }
        }
    }
    Ok(())
}

/// Checks that an offset index entry points at the start of the batch that holds (and
/// ends at) its offset, as Kafka's lookups and DumpLogSegments expect.
fn check_offset_entry(
    log: &SiblingLog,
    entry: usize,
    offset: i64,
    position: u32,
) -> Option<Problem> {
    let Some(batch) = log.at_position(position as usize) else {
        if position as usize >= log.end {
            let log_end = log.end;
            return Some(Problem::IndexPastLogEnd {
                entry,
                offset,
                position,
                log_end,
            });
        }
        return Some(Problem::NotBatchBoundary {
            entry,
            offset,
            position,
        });
    };
    let (batch_base_offset, batch_last_offset) = (batch.base_offset, batch.last_offset);
    if offset < batch_base_offset || offset > batch_last_offset {
        return Some(Problem::OffsetNotInBatch {
            entry,
            offset,
            position,
            batch_base_offset,
            batch_last_offset,
        });
    }
    if offset != batch_last_offset {
        return Some(Problem::OffsetNotLastOfBatch {
            entry,
            offset,
            batch_base_offset,
            batch_last_offset,
        });
    }
    None
}

fn dump_time_index(
    bytes: &[u8],
    options: DumpOptions,
    report: &mut FileReport,
    out: &mut dyn Write,
) -> Result<(), DumpError> {
    let entries: Vec<(i64, i32)> = used_entries(bytes, TIME_INDEX_ENTRY_BYTES, report)
        .map(|e| (be_i64(e), be_i32(&e[8..])))
        .collect();
    let log = sibling_for(report, options)?;
    let mut previous: Option<(i64, i64)> = None;
    for (entry, (timestamp, relative)) in entries.into_iter().enumerate() {
        let offset = entry_offset(report, entry, relative);
        emit(out, format_args!("timestamp: {timestamp} offset: {offset}"))?;
        if let Some((previous_timestamp, previous_offset)) = previous {
            if timestamp < previous_timestamp {
                let previous = previous_timestamp;
                report.push(Problem::TimestampDecreasing {
                    entry,
                    timestamp,
                    offset,
                    previous,
                });
            } else if timestamp == previous_timestamp {
                report.push(Problem::TimestampRepeated { entry, timestamp });
            }
            if offset < previous_offset {
                let previous = previous_offset;
                report.push(Problem::TimeIndexOffsetDecreasing {
                    entry,
                    offset,
                    previous,
                });
            }
        }
        previous = Some((timestamp, offset));
        if let Some(log) = &log {
            if let Some(problem) = check_time_entry(log, entry, timestamp, offset) {
                report.push(problem);
            }
        }
    }
    Ok(())
}

/// Checks that a time index entry names the last offset of a batch whose max timestamp is
/// the entry's timestamp (Kafka's DumpLogSegments checks the same).
fn check_time_entry(
    log: &SiblingLog,
    entry: usize,
    timestamp: i64,
    offset: i64,
) -> Option<Problem> {
    let Some(batch) = log.holding(offset) else {
        let next_offset = log.next_offset();
        return Some(Problem::OffsetNotInLog {
            entry,
            timestamp,
            offset,
            next_offset,
        });
    };
    if batch.max_timestamp != timestamp {
        let batch_max_timestamp = batch.max_timestamp;
        return Some(Problem::TimestampMismatch {
            entry,
            timestamp,
            offset,
            batch_max_timestamp,
        });
    }
    if batch.last_offset != offset {
        return Some(Problem::OffsetNotLastOfBatch {
            entry,
            offset,
            batch_base_offset: batch.base_offset,
            batch_last_offset: batch.last_offset,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;

    /// A `.log` of batches of `counts` records, offsets from `base`, timestamps 1000 + 10n.
    /// Returns the bytes and each batch's (position, base offset, last offset).
    fn log_bytes(base: i64, counts: &[i32]) -> (Vec<u8>, Vec<(usize, i64, i64)>) {
        let (mut bytes, mut spans, mut offset) = (Vec::new(), Vec::new(), base);
        for (n, count) in counts.iter().enumerate() {
            let mut one = encode_batch(*count, -1, -1, 1000 + 10 * n as i64);
            batch::patch(&mut one, offset, 0);
            spans.push((bytes.len(), offset, offset + i64::from(*count) - 1));
            bytes.extend_from_slice(&one);
            offset += i64::from(*count);
        }
        (bytes, spans)
    }

    fn write(dir: &Path, base: i64, suffix: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(format!("{base:020}.{suffix}"));
        std::fs::write(&path, bytes).expect("write");
        path
    }

    fn index_bytes(base: i64, entries: &[(i64, usize)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (offset, position) in entries {
            bytes.extend_from_slice(&((offset - base) as i32).to_be_bytes());
            bytes.extend_from_slice(&(*position as u32).to_be_bytes());
        }
        bytes
    }

    fn time_index_bytes(base: i64, entries: &[(i64, i64)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (timestamp, offset) in entries {
            bytes.extend_from_slice(&timestamp.to_be_bytes());
            bytes.extend_from_slice(&((offset - base) as i32).to_be_bytes());
        }
        bytes
    }

    fn run(path: &Path, verify: bool, deep: bool) -> (FileReport, String) {
        let mut out = Vec::new();
        let report = dump_file(path, DumpOptions { verify, deep }, &mut out).expect("dump");
        (report, String::from_utf8(out).expect("utf-8"))
    }

    #[test]
    fn a_valid_log_lists_every_batch_and_passes() {
        // Goal: each batch header is printed with its fields, and nothing is reported.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, spans) = log_bytes(100, &[3, 1, 4]);
        let path = write(dir.path(), 100, "log", &bytes);
        let (report, text) = run(&path, true, false);
        assert!(report.passed(), "{:?}", report.problems);
        assert_eq!((report.items, report.preallocated), (3, 0));
        assert!(text.contains("baseOffset: 100 lastOffset: 102 count: 3 position: 0"));
        let second = format!(
            "baseOffset: 103 lastOffset: 103 count: 1 position: {}",
            spans[1].0
        );
        assert!(text.contains(&second), "{text}");
        assert!(text.contains("crcValid: true attributes: 0x0000 compresscodec: none"));
    }

    #[test]
    fn deep_iteration_prints_every_record() {
        // Goal: --deep decodes records with their offsets, timestamps and sizes.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, _) = log_bytes(0, &[2, 2]);
        let path = write(dir.path(), 0, "log", &bytes);
        let (report, text) = run(&path, true, true);
        assert!(report.passed(), "{:?}", report.problems);
        assert_eq!(report.records, 4);
        assert!(text.contains("| offset: 3 CreateTime: 1011 keySize: 2 valueSize: 7"));
    }

    #[test]
    fn a_flipped_byte_is_a_crc_problem_naming_the_offset() {
        // Goal: damage inside a batch's records fails its CRC and names its offset.
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut bytes, spans) = log_bytes(0, &[2, 3, 2]);
        bytes[spans[1].0 + 70] ^= 0x10;
        let path = write(dir.path(), 0, "log", &bytes);
        let (report, text) = run(&path, true, true);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(matches!(
            report.problems[0],
            Problem::BadCrc { base_offset: 2, .. }
        ));
        assert!(report.problems[0].to_string().contains("(offset 2)"));
        assert!(text.contains("crcValid: false"));
        assert_eq!(report.records, 4, "the damaged batch is not decoded");
    }

    #[test]
    fn a_gap_between_batches_is_reported() {
        // Goal: offsets must be contiguous, starting at the file's base offset.
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut bytes, spans) = log_bytes(0, &[2, 2]);
        batch::patch(&mut bytes[spans[1].0..], 7, 0);
        let path = write(dir.path(), 0, "log", &bytes);
        let (report, _) = run(&path, true, false);
        assert_eq!(
            report.problems,
            vec![Problem::OffsetNotContiguous {
                position: spans[1].0,
                base_offset: 7,
                expected: 2
            }]
        );
    }

    #[test]
    fn preallocated_zeros_are_not_a_torn_tail() {
        // Goal: an untrimmed active segment (zeros after the batches) passes verify.
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut bytes, _) = log_bytes(0, &[2]);
        bytes.resize(bytes.len() + 4096, 0);
        let path = write(dir.path(), 0, "log", &bytes);
        let (report, text) = run(&path, true, false);
        assert!(report.passed(), "{:?}", report.problems);
        assert_eq!(report.preallocated, 4096);
        assert!(text.contains("4096 zero bytes: preallocated space"));
    }

    #[test]
    fn a_batch_cut_off_mid_way_is_a_torn_tail_naming_its_offset() {
        // Goal: a crash image whose last batch is incomplete fails verify.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, spans) = log_bytes(0, &[2, 3]);
        let cut = spans[1].0 + 80;
        let path = write(dir.path(), 0, "log", &bytes[..cut]);
        let (report, _) = run(&path, true, false);
        assert_eq!(report.items, 1);
        assert!(matches!(
            report.problems[..],
            [Problem::CutOffBatch {
                base_offset: 2,
                available: 80,
                ..
            }]
        ));
    }

    #[test]
    fn junk_after_the_batches_is_a_torn_tail() {
        // Goal: non-zero bytes too short for a header are reported with the next offset.
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut bytes, _) = log_bytes(0, &[2]);
        bytes.extend_from_slice(&[0, 0, 7, 0, 0, 0]);
        let path = write(dir.path(), 0, "log", &bytes);
        let (report, _) = run(&path, true, false);
        assert!(matches!(
            report.problems[..],
            [Problem::TornTail {
                bytes: 6,
                next_offset: 2,
                ..
            }]
        ));
    }

    #[test]
    fn a_consistent_offset_index_passes_and_zero_entries_are_preallocated() {
        // Goal: entries at batch starts, naming the batch's last offset, pass; trailing
        // zero entries are counted as preallocated space, not entries.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, spans) = log_bytes(50, &[2, 3, 2]);
        write(dir.path(), 50, "log", &bytes);
        let mut index = index_bytes(50, &[(spans[1].2, spans[1].0), (spans[2].2, spans[2].0)]);
        index.resize(index.len() + 80, 0);
        let path = write(dir.path(), 50, "index", &index);
        let (report, text) = run(&path, true, false);
        assert!(report.passed(), "{:?}", report.problems);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        assert_eq!((report.items, report.preallocated), (2, 10));
        assert!(
            text.contains(&format!("offset: 54 position: {}", spans[1].0)),
            "{text}"
        );
    }

    #[test]
    fn index_entries_must_point_at_the_batch_holding_their_offset() {
        // Goal: an entry inside a batch, one past the log and one at the wrong batch fail.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, spans) = log_bytes(0, &[2, 3, 2]);
        write(dir.path(), 0, "log", &bytes);
        let entries = [(1, spans[0].0 + 5), (3, spans[2].0), (40, bytes.len() + 10)];
        let path = write(dir.path(), 0, "index", &index_bytes(0, &entries));
        let (report, _) = run(&path, true, false);
        assert!(
            matches!(
                report.problems[..],
                [
                    Problem::NotBatchBoundary {
                        entry: 0,
                        offset: 1,
                        ..
                    },
                    Problem::OffsetNotInBatch {
                        entry: 1,
                        offset: 3,
                        batch_base_offset: 5,
                        ..
                    },
                    Problem::IndexPastLogEnd {
                        entry: 2,
                        offset: 40,
                        ..
                    },
                ]
            ),
            "{:?}",
            report.problems
        );
    }

    #[test]
    fn an_entry_inside_its_batch_is_only_a_warning() {
        // Goal: highwater's lookups work with it, but Kafka indexes the last offset.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, spans) = log_bytes(0, &[2, 3]);
        write(dir.path(), 0, "log", &bytes);
        let path = write(dir.path(), 0, "index", &index_bytes(0, &[(3, spans[1].0)]));
        let (report, text) = run(&path, true, false);
        assert!(report.passed(), "{:?}", report.problems);
        assert_eq!(report.warnings.len(), 1);
        assert!(text.contains("warning: entry 0 (offset 3) is inside the batch of offsets 2..=4"));
    }

    #[test]
    fn decreasing_and_partial_index_entries_fail_without_the_log() {
        // Goal: the file's own consistency is checked even without --verify.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut index = index_bytes(0, &[(5, 200), (4, 300)]);
        index.extend_from_slice(&[1, 2, 3]);
        let path = write(dir.path(), 0, "index", &index);
        let (report, _) = run(&path, false, false);
        assert!(
            matches!(
                report.problems[..],
                [
                    Problem::PartialEntry {
                        bytes: 19,
                        entry_bytes: 8
                    },
                    Problem::IndexNotIncreasing {
                        entry: 1,
                        offset: 4,
                        previous_offset: 5,
                        ..
                    },
                ]
            ),
            "{:?}",
            report.problems
        );
        let (report, _) = run(&path, true, false);
        assert!(report
            .problems
            .iter()
            .any(|p| matches!(p, Problem::MissingLog { .. })));
    }

    #[test]
    fn a_consistent_time_index_passes() {
        // Goal: (max timestamp of a batch, its last offset) entries pass verify.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, spans) = log_bytes(10, &[2, 3, 2]);
        write(dir.path(), 10, "log", &bytes);
        let mut time_index = time_index_bytes(10, &[(1012, spans[1].2), (1021, spans[2].2)]);
        time_index.resize(time_index.len() + 36, 0);
        let path = write(dir.path(), 10, "timeindex", &time_index);
        let (report, text) = run(&path, true, false);
        assert!(report.passed(), "{:?}", report.problems);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        assert_eq!((report.items, report.preallocated), (2, 3));
        assert!(text.contains("timestamp: 1012 offset: 14"), "{text}");
    }

    #[test]
    fn time_index_entries_must_increase_and_match_the_log() {
        // Goal: a decreasing (and so wrong) timestamp and an offset past the log fail.
        let dir = tempfile::tempdir().expect("tempdir");
        let (bytes, _) = log_bytes(0, &[2, 3]);
        write(dir.path(), 0, "log", &bytes);
        let entries = [(1012, 4), (1005, 4), (1013, 9)];
        let path = write(dir.path(), 0, "timeindex", &time_index_bytes(0, &entries));
        let (report, _) = run(&path, true, false);
        assert!(
            matches!(
                report.problems[..],
                [
                    Problem::TimestampDecreasing {
                        entry: 1,
                        timestamp: 1005,
                        previous: 1012,
                        ..
                    },
                    Problem::TimestampMismatch {
                        entry: 1,
                        batch_max_timestamp: 1012,
                        ..
                    },
                    Problem::OffsetNotInLog {
                        entry: 2,
                        offset: 9,
                        next_offset: 5,
                        ..
                    },
                ]
            ),
            "{:?}",
            report.problems
        );
    }

    #[test]
    fn only_segment_file_names_are_accepted() {
        // Goal: the base offset comes from a 20-digit name; anything else is refused.
        assert_eq!(
            FileKind::of(Path::new("/d/00000000000000000042.timeindex")),
            Some((FileKind::TimeIndex, 42))
        );
        for name in [
            "42.log",
            "00000000000000000042.snapshot",
            "leader-epoch-checkpoint",
        ] {
            assert_eq!(FileKind::of(Path::new(name)), None, "{name}");
        }
        let error = dump_file(Path::new("x.log"), DumpOptions::default(), &mut Vec::new());
        assert!(matches!(error, Err(DumpError::NotASegmentFile { .. })));
    }

    #[test]
    fn partition_files_lists_segment_files_in_order() {
        // Goal: the files of a partition dir by base offset then kind, nothing else.
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["00000000000000000009.log", "00000000000000000000.timeindex"] {
            std::fs::write(dir.path().join(name), b"").expect("write");
        }
        for name in ["00000000000000000000.log", "partition.metadata"] {
            std::fs::write(dir.path().join(name), b"").expect("write");
        }
        let names: Vec<String> = partition_files(dir.path())
            .expect("list")
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "00000000000000000000.log",
                "00000000000000000000.timeindex",
                "00000000000000000009.log"
            ]
        );
    }
}
