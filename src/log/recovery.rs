//! Opening a log's files (Kafka's LogLoader, in our own words): a half-done swap of a
//! cleaned segment is finished or undone (see `cleaner_swap.rs` for the order of a swap on
//! disk), the segments are listed and re-scanned from the one holding the recovery point
//! (a segment whose tail is cut makes every later one go), and the producer state is
//! loaded from the latest snapshot and the `.txnindex` files, then replayed from there.
//!
//! Nothing here knows `Log`: `Log::open` assembles what these return, and truncation
//! reloads the producer state with `load_producers`. Every file of `log/` that handles a
//! `Log` sits above this one.

use std::path::Path;

use super::batch::{self, BatchHeader, BatchIter};
use super::checkpoint::{remove_if_exists, sync_dir};
use super::config::OpenOptions;
use super::control::Marker;
use super::error::LogError;
use super::mmap::MappedFile;
use super::producer_snapshot;
use super::producer_state::ProducerStateTable;
use super::segment::{file_name, OpenMode, Segment, SegmentConfig, FILE_KINDS};
use super::segments::Segments;
use super::txn_index::IndexEntry;

/// The segment's files (indexes of [`FILE_KINDS`]), the log last: renaming the log is the
/// commit point of a swap.
pub(super) const LOG_LAST: [usize; 4] = [1, 2, 3, 0];

/// The segments of the log in `dir`, created if needed, after an unclean shutdown every
/// one from the segment holding the recovery point on re-scanned.
pub(super) fn open_segments(
    dir: &Path,
    config: SegmentConfig,
    options: OpenOptions,
) -> Result<Segments, LogError> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
    }
    recover_swaps(dir)?;
    let bases = segment_base_offsets(dir)?;
    let mut segments: Vec<Segment> = Vec::with_capacity(bases.len().max(1));
    for (n, base) in bases.iter().enumerate() {
        let next_base = bases.get(n + 1).copied();
        let active = next_base.is_none();
        let holds_unflushed = match (options.recovery_point, next_base) {
            (Some(point), Some(next)) => next > point.0,
            _ => true,
        };
        let mode = OpenMode {
            active,
            recover: !options.clean && holds_unflushed,
        };
        let (segment, truncated) = Segment::open(dir, *base, config, mode)?;
        segments.push(segment);
        if truncated && !active {
            delete_segments_after(dir, &bases[n + 1..])?;
            break;
        }
    }
    Segments::new(segments, || Segment::create(dir, 0, config))
}

/// Removes the files of the segments starting at `bases` (after a truncated segment).
fn delete_segments_after(dir: &Path, bases: &[i64]) -> Result<(), LogError> {
    for base in bases {
        for suffix in FILE_KINDS {
            remove_if_exists(&dir.join(file_name(*base, suffix)))?;
        }
        tracing::warn!(dir = %dir.display(), base_offset = base, "deleted segment after a truncated one");
    }
    Ok(())
}

fn segment_base_offsets(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let path = entry.map_err(|e| LogError::io(dir, e))?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        match stem.parse::<i64>() {
            Ok(base) if stem.len() == 20 => bases.push(base),
            _ => {
                return Err(LogError::CorruptFile {
                    path,
                    reason: "segment file name is not a 20-digit offset".into(),
                })
            }
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// The last offset of the whole, CRC-valid batches of a swap log.
fn last_offset_of(path: &Path) -> Result<Option<i64>, LogError> {
    let file = MappedFile::open(path, 0)?;
    let bytes = file.slice(0, file.capacity());
    let last = BatchIter::new(bytes)
        .take_while(|(position, header)| batch::check_crc(&bytes[*position..], header).is_ok())
        .last()
        .map(|(_, header)| header.last_offset());
    Ok(last)
}

fn base_of(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    (stem.len() == 20).then(|| stem.parse().ok()).flatten()
}

/// Finishes the swaps that passed their commit point and removes the leftovers of those
/// that did not (called before a log's segments are listed).
pub(super) fn recover_swaps(dir: &Path) -> Result<(), LogError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    let mut changed = false;
    for name in names
        .iter()
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".deleted"))
    {
        remove_if_exists(&dir.join(name))?;
        changed = true;
        tracing::warn!(dir = %dir.display(), file = %name, "removed an unfinished cleaning's file");
    }
    let segment_bases: Vec<i64> = names.iter().filter_map(|n| base_of(n, ".log")).collect();
    for base in names.iter().filter_map(|n| base_of(n, ".log.swap")) {
        complete_swap(dir, base, &segment_bases)?;
        changed = true;
    }
    let index_swaps = [".index.swap", ".timeindex.swap", ".txnindex.swap"];
    for name in names
        .iter()
        .filter(|n| index_swaps.iter().any(|suffix| n.ends_with(suffix)))
    {
        let base = index_swaps.iter().find_map(|suffix| base_of(name, suffix));
        if base.is_some_and(|b| !names.contains(&file_name(b, "log.swap"))) {
            remove_if_exists(&dir.join(name))?;
            changed = true;
        }
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(())
}

fn complete_swap(dir: &Path, base: i64, segment_bases: &[i64]) -> Result<(), LogError> {
    let swap_log = dir.join(file_name(base, "log.swap"));
    let last = last_offset_of(&swap_log)?.unwrap_or(base);
    for other in segment_bases.iter().filter(|b| **b > base && **b <= last) {
        for n in LOG_LAST {
            remove_if_exists(&dir.join(file_name(*other, FILE_KINDS[n])))?;
        }
    }
    for kind in ["index", "timeindex", "index.swap", "timeindex.swap"] {
        remove_if_exists(&dir.join(file_name(base, kind)))?;
    }
    // The indexes are rebuilt from the log, the aborted transactions cannot be: the swap
    // index, if not renamed yet, is the cleaned segment's.
    let txn_swap = dir.join(file_name(base, "txnindex.swap"));
    if txn_swap.exists() {
        let target = dir.join(file_name(base, "txnindex"));
        std::fs::rename(&txn_swap, &target).map_err(|e| LogError::io(&txn_swap, e))?;
    }
    let target = dir.join(file_name(base, "log"));
    std::fs::rename(&swap_log, &target).map_err(|e| LogError::io(&swap_log, e))?;
    tracing::warn!(dir = %dir.display(), base_offset = base, last_offset = last,
        "completed an interrupted swap of a cleaned segment");
    Ok(())
}

/// The producer state of the log of `segments` in `dir`, and the offset of the snapshot it
/// was loaded from (the first segment's base offset when none was used).
pub(super) fn load_producers(
    dir: &Path,
    segments: &Segments,
    log_start_offset: i64,
) -> Result<(ProducerStateTable, i64), LogError> {
    let first_base = segments.first().base_offset();
    let log_end = segments.active().next_offset();
    // One listing of the directory: the snapshots past the log end go, the others are
    // candidates.
    let (stale, candidates): (Vec<i64>, Vec<i64>) = producer_snapshot::offsets(dir)?
        .into_iter()
        .partition(|offset| *offset > log_end);
    producer_snapshot::delete(dir, stale)?;
    let mut table = ProducerStateTable::default();
    let mut from = first_base;
    for offset in candidates.into_iter().rev().filter(|o| *o >= first_base) {
        match producer_snapshot::read(dir, offset) {
            Ok(entries) => {
                table.load_snapshot(&entries);
                from = offset;
                break;
            }
            Err(error) => {
                tracing::warn!(dir = %dir.display(), offset, %error,
                    "producer snapshot unreadable: deleted, an older one is used");
                producer_snapshot::delete(dir, [offset])?;
            }
        }
    }
    let mut indexed = Vec::new();
    for segment in segments {
        // Entries past the segment's end were left by a truncation.
        let limit = from.min(segment.next_offset());
        let mut entries = segment.txn_index().entries()?;
        if entries.iter().any(|e| e.transaction.last_offset >= limit) {
            segment.txn_index().truncate_from(limit)?;
            entries.retain(|e| e.transaction.last_offset < limit);
        }
        indexed.extend(entries.into_iter().map(|e| e.transaction));
    }
    table.load_aborted(indexed);
    let mut replayed = 0usize;
    for segment in segments.iter().filter(|s| s.next_offset() > from) {
        for (position, header) in segment.batches_from(from.max(segment.base_offset())) {
            if header.base_offset < from {
                continue;
            }
            let marker = marker_of(segment, position, &header);
            record(&mut table, segment, &header, marker)?;
            replayed += 1;
        }
        segment.txn_index().flush()?;
    }
    table.forget_aborted_before(log_start_offset);
    tracing::debug!(dir = %dir.display(), snapshot = from, replayed, producers = table.len(),
        "loaded producer state");
    Ok((table, from))
}

pub(super) fn marker_of(
    segment: &Segment,
    position: usize,
    header: &BatchHeader,
) -> Option<Marker> {
    header
        .is_control()
        .then(|| super::control::parse(&segment.batch_bytes(position, header), header))
        .flatten()
}

/// Follows one batch written to `segment` in `table`; an ABORT marker's transaction goes
/// to the segment's `.txnindex`, with the last stable offset after it.
pub(super) fn record(
    table: &mut ProducerStateTable,
    segment: &Segment,
    header: &BatchHeader,
    marker: Option<Marker>,
) -> Result<(), LogError> {
    if let Some(transaction) = table.update(header, marker) {
        let last_stable_offset = table
            .first_open_offset()
            .unwrap_or(transaction.last_offset + 1);
        segment.txn_index().append(&IndexEntry {
            transaction,
            last_stable_offset,
        })?;
    }
    Ok(())
}
