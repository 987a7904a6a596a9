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
//!
//! Layout: this file holds the entry points and the report; `log_file` the `.log` walk,
//! `index_file` the two indexes, `error` the [`DumpError`] and [`Problem`] types.

mod error;
mod index_file;
mod log_file;

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

pub use error::{DumpError, Problem};

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
        FileKind::Log => log_file::dump_log(&bytes, options, &mut report, out)?,
        FileKind::OffsetIndex => index_file::dump_offset_index(&bytes, options, &mut report, out)?,
        FileKind::TimeIndex => index_file::dump_time_index(&bytes, options, &mut report, out)?,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{self, tests::encode_batch};

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
