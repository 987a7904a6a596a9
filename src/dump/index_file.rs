//! The index half of the dump: prints `.index` and `.timeindex` entries (trailing all-zero
//! entries are preallocated space), checks that they increase and, with `verify`, that
//! each points at the right batch of the sibling `.log` (read with the same parser).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::log_file::last_offset;
use super::{emit, DumpError, DumpOptions, FileReport, Problem};
use super::{OFFSET_INDEX_ENTRY_BYTES, TIME_INDEX_ENTRY_BYTES};
use crate::log::batch::BatchIter;

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

/// Prints the entries of a `.index` and reports what is wrong (against the `.log` with
/// `verify`).
pub(super) fn dump_offset_index(
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

/// Prints the entries of a `.timeindex` and reports what is wrong (against the `.log`
/// with `verify`).
pub(super) fn dump_time_index(
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
