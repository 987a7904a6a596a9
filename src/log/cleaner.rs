//! Log compaction for `cleanup.policy=compact` (Cleaner and LogCleanerManager in Apache
//! Kafka, in our own words): keep the latest record of every key, drop tombstones once
//! `delete.retention.ms` has passed since the cleaning that first kept them.
//!
//! A round has three phases so that appends and fetches go on meanwhile:
//! 1. under the partition's read lock, [`Log::log_to_clean`] measures the dirty ratio and
//!    [`Log::cleaning_plan`] takes handles on the sealed segments below the bound (the
//!    active segment, the last stable offset and `min.compaction.lag.ms`) and a copy of
//!    the producer state's aborted transactions;
//! 2. without any lock, [`CleaningPlan::build_offset_map`] reads the dirty part into an
//!    [`OffsetMap`] and [`CleaningPlan::clean_group`] writes each group of segments into one
//!    `.cleaned` segment (sealed segments never change, so reading them unlocked is safe);
//! 3. under the write lock, `Log::replace_with_cleaned` (`cleaner_swap.rs`) swaps it in.
//!
//! Offsets never change: a record keeps its offset, a rewritten batch keeps its base and
//! last offset, and the last batch of each group is kept (empty if need be) so that a
//! cleaned segment ends where its group ended. The last data batch of each producer in the
//! cleaned range is kept too (empty if need be), so its sequence state survives a restart,
//! and so is its last transaction marker, whole, for its producer and coordinator epochs.
//!
//! Transactions (Cleaner.cleanInto and CleanedTransactionMetadata in Kafka):
//! - nothing at or past the last stable offset is cleaned: an open transaction, or one
//!   whose marker is not below the high watermark, holds the cleanable range at its first
//!   offset, so every transaction the cleaner reads is decided;
//! - the records of aborted transactions are removed and never enter the offset map
//!   (`cleaned_transactions.rs` tells which batches are aborted);
//! - the records of committed transactions are deduplicated by key like any other; their
//!   batches keep the transactional bit and producer fields;
//! - a marker stays as long as a round still reads a batch of its transaction before it.
//!   The first round that reads none stamps the marker's batch with a delete horizon,
//!   `delete.retention.ms` from then (the mechanism tombstones use, KIP-534), and the
//!   first round after the horizon removes it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::batch::{BatchHeader, BatchIter};
use super::batch_rewrite::{self, delete_horizon};
use super::cleaned_transactions::CleanedTransactions;
use super::config::LogConfig;
use super::control;
use super::error::LogError;
use super::mmap::MappedFile;
use super::offset_map::OffsetMap;
use super::partition_log::Log;
use super::producer_state::AbortedTransaction;
use super::records::{self, RecordView};
use super::segment::Segment;
use crate::ids::Offset;

/// The dirty part of a log and how dirty it is (LogToClean in Kafka).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogToClean {
    /// Offsets below it were cleaned by the last round.
    pub first_dirty_offset: i64,
    /// Offsets from it on may not be cleaned now.
    pub first_uncleanable_offset: i64,
    /// Bytes of the sealed segments in [first dirty, first uncleanable).
    pub cleanable_bytes: usize,
    /// Bytes of the segments below the first uncleanable offset.
    pub total_bytes: usize,
    /// Dirty records are older than `max.compaction.lag.ms`.
    pub forced: bool,
}

impl LogToClean {
    /// Dirty bytes over all cleanable bytes.
    pub fn ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            return 0.0;
        }
        self.cleanable_bytes as f64 / self.total_bytes as f64
    }

    /// Whether the log should be cleaned now (LogCleanerManager.grabFilthiestCompactedLog).
    pub fn is_due(&self, min_cleanable_dirty_ratio: f64) -> bool {
        self.cleanable_bytes > 0 && (self.forced || self.ratio() > min_cleanable_dirty_ratio)
    }
}

/// A sealed segment as the cleaner sees it: its bytes and bounds, without the log's lock.
#[derive(Debug, Clone)]
pub struct SegmentSnapshot {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: usize,
    file: Arc<MappedFile>,
    index_bytes: (usize, usize),
}

impl SegmentSnapshot {
    fn of(segment: &Segment) -> Self {
        SegmentSnapshot {
            base_offset: segment.base_offset(),
            next_offset: segment.next_offset(),
            size: segment.size(),
            file: segment.log_file(),
            index_bytes: segment.index_sizes(),
        }
    }

    fn bytes(&self) -> &[u8] {
        self.file.slice(0, self.size)
    }

    fn batches(&self) -> BatchIter<'_> {
        BatchIter::new(self.bytes())
    }
}

/// Everything one cleaning round needs, taken under the read lock.
#[derive(Debug)]
pub struct CleaningPlan {
    pub dir: PathBuf,
    pub config: LogConfig,
    pub first_dirty_offset: i64,
    /// Sealed, non-empty segments that end at or below the first uncleanable offset.
    pub segments: Vec<SegmentSnapshot>,
    /// The last offset of each producer's last data batch in `segments`.
    last_data_offsets: HashMap<i64, i64>,
    /// The offset of each producer's last control batch in `segments`.
    last_marker_offsets: HashMap<i64, i64>,
    /// The aborted transactions with batches in `segments`, in marker order.
    aborted: Vec<AbortedTransaction>,
}

/// Why a batch stays even when none of its records do.
#[derive(Debug, Clone, Copy)]
struct Keep {
    /// The last batch of its group: the cleaned segment must end where the group ended.
    last_of_group: bool,
    /// Its producer's last data batch (its last sequence) or, for a control batch, its
    /// producer's last marker (its producer and coordinator epochs) in the cleaned range.
    last_of_producer: bool,
}

/// What happens to one batch.
enum Outcome {
    Original,
    Rewritten(Vec<u8>),
    Dropped,
}

/// One group's `.cleaned` segment, ready to be swapped in.
#[derive(Debug)]
pub struct CleanedSegment {
    pub segment: Segment,
    /// (base offset, size, mapped `.log`) of each segment it replaces, oldest first: the
    /// swap checks that these very files are still the log's.
    pub replaced: Vec<(i64, usize, Arc<MappedFile>)>,
    pub bytes_before: usize,
    pub bytes_after: usize,
    /// The aborted transactions of which the group holds nothing but, at most, the marker:
    /// the swap removes them from the producer state before their marker can go.
    pub aborted_without_batches: Vec<AbortedTransaction>,
}

impl Log {
    /// The dirty part of the log (LogCleanerManager.cleanableOffsets): from the checkpointed
    /// first dirty offset (reset to the log start when it is out of range) up to the first
    /// of the active segment, the last stable offset (at most `high_watermark`: an open
    /// transaction, or one whose marker is not below it, is not cleaned past its first
    /// offset) and the first segment with records newer than `min.compaction.lag.ms`.
    pub fn log_to_clean(
        &self,
        checkpoint: Option<Offset>,
        high_watermark: Offset,
        now_ms: i64,
    ) -> LogToClean {
        let compaction = self.config().compaction;
        let start = self.log_start_offset();
        let first_dirty = checkpoint
            .filter(|c| (start..=self.log_end_offset()).contains(c))
            .unwrap_or(start)
            .0;
        let sealed = self.segments().sealed();
        let active_base = self.segments().active().base_offset();
        let min_lag = compaction.min_compaction_lag_ms;
        let lag_bound = sealed
            .iter()
            .filter(|s| min_lag > 0 && s.next_offset() > first_dirty)
            .find(|s| s.largest_timestamp() > now_ms.saturating_sub(min_lag))
            .map_or(i64::MAX, Segment::base_offset);
        let first_uncleanable = active_base
            .min(self.last_stable_offset(high_watermark).0)
            .min(lag_bound)
            .max(first_dirty);
        let below = |s: &&Segment| s.next_offset() <= first_uncleanable;
        let total_bytes = sealed.iter().filter(below).map(Segment::size).sum();
        let dirty: Vec<&Segment> = sealed
            .iter()
            .filter(below)
            .filter(|s| s.next_offset() > first_dirty)
            .collect();
        let cleanable_bytes = dirty.iter().map(|s| s.size()).sum();
        let earliest_dirty = dirty
            .iter()
            .filter_map(|s| s.first_batch_timestamp())
            .filter(|t| *t > 0)
            .min();
        let max_lag = compaction.max_compaction_lag_ms.max(0);
        let forced = earliest_dirty.is_some_and(|t| t < now_ms.saturating_sub(max_lag));
        LogToClean {
            first_dirty_offset: first_dirty,
            first_uncleanable_offset: first_uncleanable,
            cleanable_bytes,
            total_bytes,
            forced,
        }
    }

    /// Handles on the sealed segments a round may read, and what it must know of their
    /// producers and aborted transactions (see [`CleaningPlan`]).
    pub fn cleaning_plan(&self, to_clean: &LogToClean) -> CleaningPlan {
        let segments: Vec<SegmentSnapshot> = self
            .segments()
            .sealed()
            .iter()
            .take_while(|s| s.next_offset() <= to_clean.first_uncleanable_offset)
            .map(SegmentSnapshot::of)
            .collect();
        let mut last_data_offsets = HashMap::new();
        let mut last_marker_offsets = HashMap::new();
        for segment in &segments {
            for (_, header) in segment.batches().filter(|(_, h)| h.has_producer_id()) {
                let last_offsets = match header.is_control() {
                    true => &mut last_marker_offsets,
                    false => &mut last_data_offsets,
                };
                last_offsets.insert(header.producer_id, header.last_offset());
            }
        }
        let start = segments
            .first()
            .map_or(to_clean.first_uncleanable_offset, |s| s.base_offset);
        let aborted = self
            .producers()
            .aborted_between(start, to_clean.first_uncleanable_offset);
        CleaningPlan {
            dir: self.dir().to_path_buf(),
            config: *self.config(),
            first_dirty_offset: to_clean.first_dirty_offset,
            segments,
            last_data_offsets,
            last_marker_offsets,
            aborted,
        }
    }
}

fn check_stop(stop: &AtomicBool, plan: &CleaningPlan) -> Result<(), LogError> {
    if stop.load(Ordering::Relaxed) {
        return Err(LogError::CleaningAborted {
            dir: plan.dir.clone(),
        });
    }
    Ok(())
}

fn record_offset(header: &BatchHeader, record: &RecordView<'_>) -> i64 {
    header.base_offset + i64::from(record.offset_delta)
}

impl CleaningPlan {
    /// The transaction state a pass over this plan's segments starts from.
    pub fn transactions(&self) -> CleanedTransactions {
        CleanedTransactions::new(&self.aborted)
    }

    /// Reads the keys of the dirty segments into `map`, stopping before a batch that would
    /// overflow it; control batches and batches of aborted transactions are not mapped.
    /// Returns the end of the cleaned range: one past the last offset the map covers (the
    /// first dirty offset when nothing could be read).
    pub fn build_offset_map(
        &self,
        map: &mut OffsetMap,
        stop: &AtomicBool,
    ) -> Result<i64, LogError> {
        let first_dirty = self.first_dirty_offset;
        let mut transactions = self.transactions();
        for segment in self.segments.iter().filter(|s| s.next_offset > first_dirty) {
            for (position, header) in segment.batches() {
                check_stop(stop, self)?;
                if header.last_offset() < first_dirty {
                    continue;
                }
                let mapped = !header.is_control()
                    && !transactions.on_batch_read(&header)
                    && header.record_count > 0;
                let bytes = &segment.bytes()[position..position + header.size];
                if mapped && !self.map_batch(map, bytes, &header)? {
                    return Ok((map.latest_offset() + 1).max(first_dirty));
                }
                map.update_latest_offset(header.last_offset());
            }
            map.update_latest_offset(segment.next_offset - 1);
        }
        Ok((map.latest_offset() + 1).max(first_dirty))
    }

    /// Puts the keys of one batch's records from the first dirty offset on into `map`;
    /// returns false, having put none, when they might not fit.
    fn map_batch(
        &self,
        map: &mut OffsetMap,
        bytes: &[u8],
        header: &BatchHeader,
    ) -> Result<bool, LogError> {
        let payload = records::decompressed_payload(bytes, header)?;
        let keyed: Vec<(&[u8], i64)> = records::parse_records(&payload, header)?
            .iter()
            .filter_map(|r| r.key.map(|k| (k, record_offset(header, r))))
            .filter(|(_, offset)| *offset >= self.first_dirty_offset)
            .collect();
        if map.len() + keyed.len() > map.capacity() {
            return Ok(false);
        }
        for (key, offset) in keyed {
            map.put(key, offset);
        }
        Ok(true)
    }

    /// The segments below `end_offset` in groups whose logs and indexes fit in one segment
    /// (Cleaner.groupSegmentsBySize), so that cleaning keeps the segment count bounded.
    pub fn groups(&self, end_offset: i64) -> Vec<Vec<SegmentSnapshot>> {
        let config = self.config.segment;
        let mut groups: Vec<Vec<SegmentSnapshot>> = Vec::new();
        let mut sizes = (0usize, 0usize, 0usize);
        for segment in self.segments.iter().filter(|s| s.base_offset < end_offset) {
            let fits = groups.last().is_some_and(|group| {
                sizes.0 + segment.size <= config.segment_bytes
                    && sizes.1 + segment.index_bytes.0 <= config.segment_index_bytes
                    && sizes.2 + segment.index_bytes.1 <= config.segment_index_bytes
                    && segment.next_offset - 1 - group[0].base_offset <= i64::from(i32::MAX)
            });
            if !fits {
                groups.push(Vec::new());
                sizes = (0, 0, 0);
            }
            sizes.0 += segment.size;
            sizes.1 += segment.index_bytes.0;
            sizes.2 += segment.index_bytes.1;
            if let Some(group) = groups.last_mut() {
                group.push(segment.clone());
            }
        }
        groups
    }

    /// Writes the records of `group` that survive into one `.cleaned` segment;
    /// `transactions` is carried from group to group of one round, oldest first.
    pub fn clean_group(
        &self,
        group: &[SegmentSnapshot],
        map: &OffsetMap,
        transactions: &mut CleanedTransactions,
        now_ms: i64,
        stop: &AtomicBool,
    ) -> Result<CleanedSegment, LogError> {
        let base_offset = group[0].base_offset;
        let bytes_before: usize = group.iter().map(|s| s.size).sum();
        // A rewritten batch can grow a little (timestamp deltas from a delete horizon).
        let capacity = bytes_before.saturating_mul(2).saturating_add(4096);
        let mut out =
            Segment::create_cleaned(&self.dir, base_offset, self.config.segment, capacity)?;
        for (n, segment) in group.iter().enumerate() {
            for (position, header) in segment.batches() {
                check_stop(stop, self)?;
                let last_of_group = n + 1 == group.len() && position + header.size == segment.size;
                let keep = Keep {
                    last_of_group,
                    last_of_producer: self.is_last_of_producer(&header),
                };
                let bytes = &segment.bytes()[position..position + header.size];
                match self.batch_outcome(bytes, &header, map, transactions, keep, now_ms)? {
                    Outcome::Original => {
                        out.append_unchanged(bytes)?;
                    }
                    Outcome::Rewritten(rewritten) => {
                        out.append_unchanged(&rewritten)?;
                    }
                    Outcome::Dropped => {}
                }
            }
        }
        out.seal()?;
        let bytes_after = out.size();
        Ok(CleanedSegment {
            segment: out,
            replaced: group
                .iter()
                .map(|s| (s.base_offset, s.size, Arc::clone(&s.file)))
                .collect(),
            bytes_before,
            bytes_after,
            aborted_without_batches: transactions.take_without_batches(),
        })
    }

    /// Whether `header` is its producer's last data batch, or last control batch, in the
    /// cleaned range.
    fn is_last_of_producer(&self, header: &BatchHeader) -> bool {
        let last_offsets = match header.is_control() {
            true => &self.last_marker_offsets,
            false => &self.last_data_offsets,
        };
        header.has_producer_id()
            && last_offsets.get(&header.producer_id) == Some(&header.last_offset())
    }

    /// What happens to one batch read in order (Cleaner.cleanInto's batch retention): a
    /// marker as [`CleaningPlan::filter_marker`] says, a batch of an aborted transaction
    /// goes (or stays empty), any other batch keeps the records [`CleaningPlan::filter_batch`]
    /// keeps.
    fn batch_outcome(
        &self,
        bytes: &[u8],
        header: &BatchHeader,
        map: &OffsetMap,
        transactions: &mut CleanedTransactions,
        keep: Keep,
        now_ms: i64,
    ) -> Result<Outcome, LogError> {
        let keep_empty = keep.last_of_group || keep.last_of_producer;
        if header.is_control() {
            if control::parse(bytes, header).is_some() {
                let may_go = transactions.on_marker_read(header);
                return self.filter_marker(bytes, header, may_go, keep, now_ms);
            }
            // An emptied marker goes unless kept; a control record of another kind stays.
            return Ok(match header.record_count {
                0 => empty_outcome(header, keep_empty),
                _ => Outcome::Original,
            });
        }
        if transactions.on_batch_read(header) {
            return Ok(empty_outcome(header, keep_empty));
        }
        self.filter_batch(bytes, header, map, now_ms, keep_empty)
    }

    /// What happens to a transaction marker: it stays while `may_go` is false (a batch of
    /// its transaction was read this round); the first round in which it is true stamps a
    /// delete horizon on it, and a round after the horizon removes it, unless it is its
    /// producer's last marker (kept whole) or its group's last batch (kept empty). Kafka
    /// empties a producer's last marker too; it keeps the epochs in producer snapshots,
    /// highwater reads them back from the log.
    fn filter_marker(
        &self,
        bytes: &[u8],
        header: &BatchHeader,
        may_go: bool,
        keep: Keep,
        now_ms: i64,
    ) -> Result<Outcome, LogError> {
        let horizon = delete_horizon(header);
        if !may_go || horizon.is_some_and(|h| now_ms < h) {
            return Ok(Outcome::Original);
        }
        if horizon.is_none() {
            let payload = records::decompressed_payload(bytes, header)?;
            let marker = records::parse_records(&payload, header)?;
            let delete_retention_ms = self.config.compaction.delete_retention_ms.max(0);
            let horizon = now_ms.saturating_add(delete_retention_ms);
            let stamped = batch_rewrite::retained_batch(header, &marker, Some(horizon))?;
            return Ok(Outcome::Rewritten(stamped));
        }
        Ok(if keep.last_of_producer {
            Outcome::Original
        } else if keep.last_of_group {
            Outcome::Rewritten(batch_rewrite::empty_batch(header))
        } else {
            Outcome::Dropped
        })
    }

    /// Which records of one batch survive (Cleaner.shouldRetainRecord and
    /// MemoryRecords.filterTo): those past the map, and the latest of each key unless it
    /// is a tombstone whose batch's delete horizon has passed. Null keys below the map go.
    fn filter_batch(
        &self,
        bytes: &[u8],
        header: &BatchHeader,
        map: &OffsetMap,
        now_ms: i64,
        keep_empty: bool,
    ) -> Result<Outcome, LogError> {
        if header.record_count == 0 {
            return Ok(empty_outcome(header, keep_empty));
        }
        let payload = records::decompressed_payload(bytes, header)?;
        let all = records::parse_records(&payload, header)?;
        let horizon = delete_horizon(header);
        let keep_tombstones = horizon.is_none_or(|h| now_ms < h);
        let retained: Vec<RecordView<'_>> = all
            .iter()
            .filter(|r| {
                let offset = record_offset(header, r);
                if offset > map.latest_offset() {
                    return true;
                }
                let Some(key) = r.key else { return false };
                let latest = map.get(key).is_none_or(|found| offset >= found);
                latest && (r.has_value || keep_tombstones)
            })
            .copied()
            .collect();
        let needs_horizon = horizon.is_none() && retained.iter().any(|r| !r.has_value);
        if retained.len() == all.len() && !needs_horizon {
            return Ok(Outcome::Original);
        }
        if !retained.is_empty() {
            let delete_retention_ms = self.config.compaction.delete_retention_ms.max(0);
            let horizon = match needs_horizon {
                true => Some(now_ms.saturating_add(delete_retention_ms)),
                false => horizon,
            };
            let rewritten = batch_rewrite::retained_batch(header, &retained, horizon)?;
            return Ok(Outcome::Rewritten(rewritten));
        }
        Ok(match keep_empty {
            true => Outcome::Rewritten(batch_rewrite::empty_batch(header)),
            false => Outcome::Dropped,
        })
    }
}

/// What happens to a batch none of whose records stay: it goes, or stays empty when it
/// must (a header-only batch with the same offsets and producer fields).
fn empty_outcome(header: &BatchHeader, keep_empty: bool) -> Outcome {
    match (keep_empty, header.record_count) {
        (false, _) => Outcome::Dropped,
        (true, 0) => Outcome::Original,
        (true, _) => Outcome::Rewritten(batch_rewrite::empty_batch(header)),
    }
}

/// The outcome of one cleaning round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleaningStats {
    /// The next round's first dirty offset (for `cleaner-offset-checkpoint`).
    pub end_offset: Offset,
    pub bytes_before: usize,
    pub bytes_after: usize,
    /// Cleaned segments swapped in.
    pub segments_swapped: usize,
}

impl Log {
    /// Runs a whole round while holding the log (tests and tools; the broker runs the
    /// phases with its locks, see `replica/cleaner.rs`), whatever the dirty ratio.
    pub fn clean(
        &mut self,
        checkpoint: Option<Offset>,
        high_watermark: Offset,
        now_ms: i64,
        map_entries_max: usize,
    ) -> Result<CleaningStats, LogError> {
        let stop = AtomicBool::new(false);
        let to_clean = self.log_to_clean(checkpoint, high_watermark, now_ms);
        let plan = self.cleaning_plan(&to_clean);
        let mut map = OffsetMap::new(map_entries_max);
        let end_offset = plan.build_offset_map(&mut map, &stop)?;
        let mut stats = CleaningStats {
            end_offset: Offset(end_offset),
            ..CleaningStats::default()
        };
        let mut transactions = plan.transactions();
        for group in plan.groups(end_offset) {
            let cleaned = plan.clean_group(&group, &map, &mut transactions, now_ms, &stop)?;
            stats.bytes_before += cleaned.bytes_before;
            stats.bytes_after += cleaned.bytes_after;
            if self.replace_with_cleaned(cleaned)? {
                stats.segments_swapped += 1;
            }
        }
        Ok(stats)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ids::LeaderEpoch;
    use crate::log::batch_encode::{encode_batch, plain_record};
    use crate::log::config::{test_config, CompactionConfig, OpenOptions};
    use bytes::Bytes;
    use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A producer's batch of `(key, value)` records (`None` value: a tombstone).
    pub fn keyed_batch(records: &[(Option<u8>, Option<u8>)], compression: Compression) -> Vec<u8> {
        let records: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, (key, value))| {
                plain_record(
                    i as i64,
                    1000 + i as i64,
                    key.map(|k| Bytes::from(format!("k{k}"))),
                    value.map(|v| Bytes::from(format!("v{v}"))),
                )
            })
            .collect();
        encode_batch(&records, compression)
            .expect("encode")
            .to_vec()
    }

    /// Every data record of the log (transaction markers left out): (offset, key, value).
    pub fn all_records(log: &Log) -> Vec<(i64, Option<Bytes>, Option<Bytes>)> {
        let mut out = Vec::new();
        for segment in log.segments() {
            let mut bytes = segment.read(segment.base_offset(), i64::MAX, usize::MAX, true);
            for set in RecordBatchDecoder::decode_all(&mut bytes).expect("stored batches decode") {
                for r in set.records.into_iter().filter(|r| !r.control) {
                    out.push((r.offset, r.key, r.value));
                }
            }
        }
        out
    }

    pub fn compact_config(segment_bytes: usize) -> LogConfig {
        LogConfig {
            cleanup_delete: false,
            compaction: CompactionConfig {
                compact: true,
                delete_retention_ms: 1000,
                ..CompactionConfig::default()
            },
            ..test_config(segment_bytes, 64)
        }
    }

    fn append_all(log: &mut Log, batches: &[Vec<(Option<u8>, Option<u8>)>], codec: Compression) {
        for batch in batches {
            log.append_as_leader(&keyed_batch(batch, codec), LeaderEpoch(0))
                .expect("append");
        }
    }

    /// The model: each key's latest (offset, value) among offsets below `end`.
    fn latest_below(log: &[(i64, u8, Option<u8>)], end: i64) -> BTreeMap<u8, (i64, Option<u8>)> {
        let mut latest = BTreeMap::new();
        for (offset, key, value) in log.iter().filter(|r| r.0 < end) {
            latest.insert(*key, (*offset, *value));
        }
        latest
    }

    fn written(batches: &[Vec<(Option<u8>, Option<u8>)>]) -> Vec<(i64, u8, Option<u8>)> {
        batches
            .iter()
            .flatten()
            .enumerate()
            .map(|(offset, (key, value))| (offset as i64, key.expect("keyed"), *value))
            .collect()
    }

    pub fn key_of(bytes: &Option<Bytes>) -> u8 {
        let key = bytes.as_ref().expect("keyed");
        std::str::from_utf8(&key[1..])
            .expect("utf8")
            .parse()
            .expect("key")
    }

    pub fn value_of(bytes: &Option<Bytes>) -> Option<u8> {
        bytes.as_ref().map(|v| {
            std::str::from_utf8(&v[1..])
                .expect("utf8")
                .parse()
                .expect("v")
        })
    }

    /// Checks the log against the model: offsets increase, no record changed its offset,
    /// below `end` exactly each key's latest record (its tombstone only at or after
    /// `tombstones_from`), above it every record.
    fn check(log: &Log, model: &[(i64, u8, Option<u8>)], end: i64, tombstones_from: i64) {
        let stored = all_records(log);
        let offsets: Vec<i64> = stored.iter().map(|r| r.0).collect();
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "offsets increase: {offsets:?}"
        );
        for (offset, key, value) in &stored {
            let original = model[*offset as usize];
            assert_eq!(
                (original.1, original.2),
                (key_of(key), value_of(value)),
                "at {offset}"
            );
        }
        let below: Vec<(u8, (i64, Option<u8>))> = stored
            .iter()
            .filter(|r| r.0 < end)
            .map(|(o, k, v)| (key_of(k), (*o, value_of(v))))
            .collect();
        let expected: Vec<(u8, (i64, Option<u8>))> = latest_below(model, end)
            .into_iter()
            .filter(|(_, (offset, v))| *offset >= tombstones_from || v.is_some())
            .collect();
        let mut sorted = below.clone();
        sorted.sort();
        assert_eq!(sorted, expected, "latest value per key below {end}");
        let above = stored.iter().filter(|r| r.0 >= end).count();
        assert_eq!(
            above,
            model.iter().filter(|r| r.0 >= end).count(),
            "dirty tail kept"
        );
    }

    fn batches_strategy() -> impl Strategy<Value = Vec<Vec<(Option<u8>, Option<u8>)>>> {
        let record =
            (0u8..6, proptest::option::weighted(0.8, 0u8..100)).prop_map(|(k, v)| (Some(k), v));
        proptest::collection::vec(proptest::collection::vec(record, 1..4), 1..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Goal: after cleaning, reading the log gives exactly the latest record per key at
        /// its original offset, and after `delete.retention.ms` plus another round, no
        /// tombstone below the cleaned range. Method: random keyed writes against a model.
        #[test]
        fn cleaning_keeps_exactly_the_latest_record_per_key(
            batches in batches_strategy(),
            more in batches_strategy(),
            gzip in any::<bool>(),
        ) {
            let codec = if gzip { Compression::Gzip } else { Compression::None };
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = Log::open(dir.path(), compact_config(400), OpenOptions::default())
                .expect("open");
            append_all(&mut log, &batches, codec);
            log.roll().expect("roll");
            let segments_before = log.segments().len();
            let stats = log.clean(None, log.log_end_offset(), 10_000, 1 << 16).expect("clean");
            prop_assert_eq!(stats.end_offset, log.log_end_offset());
            let mut model = written(&batches);
            check(&log, &model, stats.end_offset.0, 0);
            prop_assert!(log.segments().len() <= segments_before);

            append_all(&mut log, &more, codec);
            log.roll().expect("roll");
            let shift = model.len() as i64;
            model.extend(written(&more).into_iter().map(|(o, k, v)| (o + shift, k, v)));
            let first_end = stats.end_offset;
            let later = log.clean(Some(first_end), log.log_end_offset(), 20_000, 1 << 16)
                .expect("clean again");
            check(&log, &model, later.end_offset.0, first_end.0);
            // Tombstones that the first round kept are past their horizon (10 s + 1 s).
            let stored = all_records(&log);
            for (offset, _, value) in &stored {
                prop_assert!(*offset >= first_end.0 || value.is_some(), "old tombstone at {}", offset);
            }
            drop(log);
            let reopened = Log::open(dir.path(), compact_config(400), OpenOptions::default())
                .expect("reopen after a crash");
            prop_assert_eq!(all_records(&reopened), stored);
        }
    }

    #[test]
    fn a_full_offset_map_cleans_what_it_covers_and_resumes_later() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            Log::open(dir.path(), compact_config(300), OpenOptions::default()).expect("open");
        let batches: Vec<Vec<(Option<u8>, Option<u8>)>> =
            (0..30u8).map(|i| vec![(Some(i % 10), Some(i))]).collect();
        append_all(&mut log, &batches, Compression::None);
        log.roll().expect("roll");
        let model = written(&batches);
        let first = log.clean(None, log.log_end_offset(), 0, 4).expect("clean");
        assert!(
            first.end_offset < log.log_end_offset(),
            "a 4-key map covers part of the log"
        );
        check(&log, &model, first.end_offset.0, 0);
        let mut checkpoint = first.end_offset;
        for _ in 0..30 {
            let next = log
                .clean(Some(checkpoint), log.log_end_offset(), 0, 4)
                .expect("clean");
            assert!(next.end_offset > checkpoint, "each round makes progress");
            checkpoint = next.end_offset;
            if checkpoint == log.log_end_offset() {
                break;
            }
        }
        assert_eq!(checkpoint, log.log_end_offset());
        let all = log.clean(None, log.log_end_offset(), 0, 64).expect("clean");
        check(&log, &model, all.end_offset.0, 0);
        assert_eq!(all_records(&log).len(), 10);
    }

    #[test]
    fn nothing_at_or_above_the_high_watermark_or_in_the_active_segment_is_cleaned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            Log::open(dir.path(), compact_config(300), OpenOptions::default()).expect("open");
        let batches: Vec<Vec<(Option<u8>, Option<u8>)>> =
            (0..20u8).map(|i| vec![(Some(0), Some(i))]).collect();
        append_all(&mut log, &batches, Compression::None);
        let to_clean = log.log_to_clean(None, Offset(5), 0);
        assert!(to_clean.first_uncleanable_offset <= 5);
        let stats = log.clean(None, Offset(5), 0, 64).expect("clean");
        assert!(stats.end_offset <= Offset(5));
        let stored = all_records(&log);
        assert!(
            stored.iter().filter(|r| r.0 >= 5).count() == 15,
            "above the bound kept"
        );
    }

    #[test]
    fn the_last_batch_of_an_idempotent_producer_survives_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            Log::open(dir.path(), compact_config(1 << 16), OpenOptions::default()).expect("open");
        let first = crate::log::batch::tests::encode_batch(2, 9, 0, 1000);
        log.append_as_leader(&first, LeaderEpoch(0))
            .expect("append");
        // `first` holds keys k0 and k1; this non-idempotent batch supersedes both.
        let second = keyed_batch(&[(Some(0), Some(1)), (Some(1), Some(1))], Compression::None);
        log.append_as_leader(&second, LeaderEpoch(0))
            .expect("append");
        log.roll().expect("roll");
        log.clean(None, log.log_end_offset(), 0, 64).expect("clean");
        let headers: Vec<BatchHeader> = log
            .segments()
            .first()
            .batches_from(0)
            .map(|(_, h)| h)
            .collect();
        assert_eq!(headers[0].producer_id, 9, "the producer's batch is kept");
        assert_eq!(headers[0].record_count, 0, "with no records left");
        assert_eq!(headers[0].last_sequence(), 1);
        drop(log);
        let mut log =
            Log::open(dir.path(), compact_config(1 << 16), OpenOptions::default()).expect("reopen");
        let next = crate::log::batch::tests::encode_batch(1, 9, 2, 1000);
        assert_eq!(
            log.append_as_leader(&next, LeaderEpoch(0))
                .expect("in sequence")
                .base_offset,
            Offset(4)
        );
    }

    /// Goal: the dirty ratio counts the sealed segments past the checkpoint, and the
    /// compaction lags bound and force cleaning as Kafka's LogCleanerManager does.
    /// Method: one log, measured with different checkpoints, times and configs.
    #[test]
    fn dirty_ratio_and_compaction_lags_decide_what_is_cleanable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            Log::open(dir.path(), compact_config(300), OpenOptions::default()).expect("open");
        let batches: Vec<Vec<(Option<u8>, Option<u8>)>> =
            (0..20u8).map(|i| vec![(Some(i % 4), Some(i))]).collect();
        append_all(&mut log, &batches, Compression::None);
        log.roll().expect("roll");
        let end = log.log_end_offset();
        let all_dirty = log.log_to_clean(None, end, 10_000);
        assert_eq!(all_dirty.first_uncleanable_offset, end.0);
        assert!((all_dirty.ratio() - 1.0).abs() < 1e-9);
        assert!(all_dirty.is_due(0.5));
        let second = log.segments().sealed()[1].base_offset();
        let half = log.log_to_clean(Some(Offset(second)), end, 10_000);
        assert!(half.ratio() < 1.0 && half.ratio() > 0.0, "{half:?}");
        let clean = log.log_to_clean(Some(end), end, 10_000);
        assert!(!clean.is_due(0.0), "nothing dirty");
        // Records have timestamps 1000..1019: a 5 s minimum lag at 3 s keeps them all.
        let mut config = compact_config(300);
        config.compaction.min_compaction_lag_ms = 5_000;
        let log = reopen(log, dir.path(), config);
        assert_eq!(log.log_to_clean(None, end, 3_000).cleanable_bytes, 0);
        assert!(log.log_to_clean(None, end, 10_000).cleanable_bytes > 0);
        config.compaction.max_compaction_lag_ms = 1_000;
        let log = reopen(log, dir.path(), config);
        let forced = log.log_to_clean(Some(Offset(second)), end, 10_000);
        assert!(
            forced.forced && forced.is_due(1.0),
            "dirty records older than the max lag"
        );
    }

    fn reopen(log: Log, dir: &std::path::Path, config: LogConfig) -> Log {
        drop(log);
        Log::open(dir, config, OpenOptions::default()).expect("reopen")
    }

    /// Goal: a follower replicates a cleaned log (gaps between batches, batches with fewer
    /// records than offsets, empty batches) unchanged. Method: fetch the leader's log
    /// segment by segment into a follower, compare, reopen the follower after a crash.
    #[test]
    fn a_follower_replicates_a_cleaned_log_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut leader =
            Log::open(dir.path(), compact_config(300), OpenOptions::default()).expect("open");
        let batches: Vec<Vec<(Option<u8>, Option<u8>)>> = (0..30u8)
            .map(|i| {
                vec![
                    (Some(i % 3), Some(i)),
                    (Some(i % 5), (i % 4 != 0).then_some(i)),
                ]
            })
            .collect();
        append_all(&mut leader, &batches, Compression::None);
        leader.roll().expect("roll");
        leader
            .clean(None, leader.log_end_offset(), 0, 64)
            .expect("clean");
        let follower_dir = tempfile::tempdir().expect("tempdir");
        let config = compact_config(300);
        let mut follower =
            Log::open(follower_dir.path(), config, OpenOptions::default()).expect("open");
        while follower.log_end_offset() < leader.log_end_offset() {
            let offset = follower.log_end_offset();
            let bytes = leader
                .read(offset, Offset(i64::MAX), 1 << 20, true)
                .expect("read");
            follower.append_as_follower(&bytes).expect("replicated");
        }
        assert_eq!(all_records(&follower), all_records(&leader));
        drop(follower);
        let follower =
            Log::open(follower_dir.path(), config, OpenOptions::default()).expect("recover");
        assert_eq!(all_records(&follower), all_records(&leader));
    }

    #[test]
    fn a_compacted_topic_refuses_records_without_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            Log::open(dir.path(), compact_config(1 << 16), OpenOptions::default()).expect("open");
        let unkeyed = keyed_batch(&[(Some(1), Some(1)), (None, Some(2))], Compression::Lz4);
        assert!(matches!(
            log.append_as_leader(&unkeyed, LeaderEpoch(0)),
            Err(LogError::NullKeyInCompactedTopic { .. })
        ));
        let keyed = keyed_batch(&[(Some(1), Some(1))], Compression::Lz4);
        log.append_as_leader(&keyed, LeaderEpoch(0))
            .expect("keyed records are accepted");
    }
}

#[cfg(test)]
pub(crate) mod transaction_tests {
    use super::tests::{all_records, compact_config, key_of, keyed_batch, value_of};
    use super::*;
    use crate::ids::ProducerEpoch;
    use crate::ids::{LeaderEpoch, ProducerId};
    use crate::log::batch_encode::encode_batch;
    use crate::log::config::OpenOptions;
    use crate::log::control::{self, Marker};
    use bytes::Bytes;
    use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, TimestampType};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A transactional batch of `producer_id` at epoch 0 holding `(key, value)` records,
    /// its sequences from `base_sequence`.
    pub fn txn_batch(
        producer_id: i64,
        base_sequence: i32,
        records: &[(u8, Option<u8>)],
    ) -> Vec<u8> {
        let records: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, (key, value))| Record {
                transactional: true,
                control: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: base_sequence + i as i32,
                timestamp: 1000 + i as i64,
                key: Some(Bytes::from(format!("k{key}"))),
                value: value.map(|v| Bytes::from(format!("v{v}"))),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        encode_batch(&records, Compression::None)
            .expect("encode")
            .to_vec()
    }

    pub fn end_txn(log: &mut Log, producer_id: i64, commit: bool) -> i64 {
        let marker = Marker {
            commit,
            coordinator_epoch: 0,
        };
        log.append_marker_as_leader(
            ProducerId(producer_id),
            ProducerEpoch(0),
            marker,
            LeaderEpoch(0),
        )
        .expect("marker")
        .base_offset
        .into()
    }

    fn append(log: &mut Log, batch: &[u8]) -> Offset {
        log.append_as_leader(batch, LeaderEpoch(0))
            .expect("append")
            .base_offset
    }

    fn open(dir: &std::path::Path, segment_bytes: usize) -> Log {
        Log::open(dir, compact_config(segment_bytes), OpenOptions::default()).expect("open")
    }

    /// Every stored batch header, oldest first.
    fn headers(log: &Log) -> Vec<BatchHeader> {
        log.segments()
            .iter()
            .flat_map(|s| {
                s.batches_from(s.base_offset())
                    .map(|(_, h)| h)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// (offset, producer id, transactional) of every stored record.
    fn record_producers(log: &Log) -> Vec<(i64, i64, bool)> {
        let mut out = Vec::new();
        for segment in log.segments() {
            let mut bytes = segment.read(segment.base_offset(), i64::MAX, usize::MAX, true);
            for set in RecordBatchDecoder::decode_all(&mut bytes).expect("stored batches decode") {
                for r in set.records.iter().filter(|r| !r.control) {
                    out.push((r.offset, r.producer_id, r.transactional));
                }
            }
        }
        out
    }

    fn clean(log: &mut Log, now_ms: i64) -> CleaningStats {
        let end = log.log_end_offset();
        log.clean(None, end, now_ms, 1 << 16).expect("clean")
    }

    /// "offset=value" for every stored record ("-" for a tombstone).
    fn values(log: &Log) -> Vec<String> {
        all_records(log)
            .iter()
            .map(|(offset, _, value)| match value {
                Some(v) => format!("{offset}={}", String::from_utf8_lossy(v)),
                None => format!("{offset}=-"),
            })
            .collect()
    }

    /// Goal: the cleanable range stops at the first offset of an open transaction, and of
    /// a decided one whose marker is not below the high watermark; records from there on
    /// stay as written. Method: duplicate keys around an open transaction, cleaned, then
    /// committed with the high watermark below and then above the marker.
    #[test]
    fn an_open_transaction_is_not_cleaned_past_its_first_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), 300);
        for i in 0..10u8 {
            append(
                &mut log,
                &keyed_batch(&[(Some(i % 2), Some(i))], Compression::None),
            );
        }
        let first = append(&mut log, &txn_batch(7, 0, &[(0, Some(50)), (1, Some(51))]));
        for i in 0..10u8 {
            append(
                &mut log,
                &keyed_batch(&[(Some(i % 2), Some(i))], Compression::None),
            );
        }
        log.roll().expect("roll");
        let end = log.log_end_offset();
        assert_eq!(log.last_stable_offset(end), first);
        assert!(log.log_to_clean(None, end, 0).first_uncleanable_offset <= first.0);
        let before = all_records(&log);
        let stats = clean(&mut log, 10_000);
        assert!(stats.end_offset <= first, "{stats:?}");
        let after = all_records(&log);
        let from_first = |records: &[(i64, Option<Bytes>, Option<Bytes>)]| {
            records
                .iter()
                .filter(|r| r.0 >= first.0)
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(from_first(&after), from_first(&before), "kept as written");
        assert!(
            after.iter().filter(|r| r.0 < first.0).count() < first.0 as usize,
            "below the transaction, duplicates were cleaned"
        );
        let marker = end_txn(&mut log, 7, true);
        log.roll().expect("roll");
        let to_clean = log.log_to_clean(None, Offset(marker), 0);
        assert!(
            to_clean.first_uncleanable_offset <= first.0,
            "marker not below the HW"
        );
        let end = log.log_end_offset();
        assert_eq!(
            log.log_to_clean(None, end, 0).first_uncleanable_offset,
            end.0
        );
    }

    /// Goal: an aborted transaction's records disappear, an older committed value of
    /// their key survives, offsets stay, and the reopened log has no open transaction, an
    /// aborted list covering no kept record, and the producer's sequence. Method: one
    /// aborted transaction of two batches among plain records, cleaned, reopened.
    #[test]
    fn an_aborted_transactions_records_disappear_and_the_log_reopens_consistent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), 1 << 16);
        append(
            &mut log,
            &keyed_batch(&[(Some(0), Some(1))], Compression::None),
        );
        append(&mut log, &txn_batch(7, 0, &[(0, Some(50)), (2, Some(52))]));
        append(&mut log, &txn_batch(7, 2, &[(3, Some(53))]));
        let marker = end_txn(&mut log, 7, false);
        append(
            &mut log,
            &keyed_batch(&[(Some(1), Some(2))], Compression::None),
        );
        log.roll().expect("roll");
        let end = log.log_end_offset();
        clean(&mut log, 10_000);
        assert_eq!(values(&log), ["0=v1", "5=v2"]);
        let stored = headers(&log);
        let offsets: Vec<(i64, i64, i32)> = stored
            .iter()
            .map(|h| (h.base_offset, h.last_offset(), h.record_count))
            .collect();
        // The producer's last data batch stays empty, for its sequence; the marker stays
        // because this round read its batches.
        assert_eq!(offsets, [(0, 0, 1), (3, 3, 0), (4, 4, 1), (5, 5, 1)]);
        assert!(stored[1].is_transactional() && stored[1].last_sequence() == 2);
        assert_eq!(stored[2].base_offset, marker);
        drop(log);
        let mut log = open(dir.path(), 1 << 16);
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.last_stable_offset(end), end, "no transaction left open");
        for aborted in log.producers().aborted_between(0, end.0) {
            let inside = record_producers(&log).into_iter().filter(|(o, p, t)| {
                *t && *p == aborted.producer_id
                    && (aborted.first_offset..=aborted.last_offset).contains(o)
            });
            assert_eq!(inside.count(), 0, "{aborted:?} covers no kept record");
        }
        assert_eq!(append(&mut log, &txn_batch(7, 3, &[(4, Some(54))])), end);
    }

    /// Goal: a committed transaction's records are deduplicated by key like any other,
    /// in batches that stay transactional with their producer fields. Method: two
    /// committed transactions and plain records writing the same keys.
    #[test]
    fn a_committed_transactions_older_duplicate_keys_are_cleaned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), 1 << 16);
        append(
            &mut log,
            &keyed_batch(&[(Some(0), Some(1))], Compression::None),
        );
        append(&mut log, &txn_batch(7, 0, &[(0, Some(2)), (1, Some(3))]));
        end_txn(&mut log, 7, true);
        append(&mut log, &txn_batch(7, 2, &[(1, Some(4))]));
        end_txn(&mut log, 7, true);
        log.roll().expect("roll");
        clean(&mut log, 10_000);
        assert_eq!(values(&log), ["1=v2", "4=v4"]);
        let rewritten = headers(&log)[0];
        assert_eq!((rewritten.base_offset, rewritten.last_offset()), (1, 2));
        assert!(rewritten.is_transactional() && !rewritten.is_control());
        assert_eq!((rewritten.producer_id, rewritten.base_sequence), (7, 0));
        let end = log.log_end_offset();
        assert_eq!(log.last_stable_offset(end), end);
    }

    /// (base offset, control, records, delete horizon) of every stored batch.
    fn shape(log: &Log) -> Vec<(i64, bool, i32, Option<i64>)> {
        headers(log)
            .iter()
            .map(|h| {
                (
                    h.base_offset,
                    h.is_control(),
                    h.record_count,
                    delete_horizon(h),
                )
            })
            .collect()
    }

    /// Goal: a marker stays while a batch of its transaction is left, is stamped with a
    /// delete horizon by the first cleaning that finds none, stays until the horizon and
    /// goes at the next cleaning; a producer's last marker stays. Method: an aborted and a
    /// committed transaction whose records all go, cleaned at chosen times.
    #[test]
    fn a_marker_outlives_its_records_by_delete_retention_then_goes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), 1 << 16);
        append(&mut log, &txn_batch(7, 0, &[(0, Some(1)), (1, Some(1))]));
        end_txn(&mut log, 7, false); // 2
        append(&mut log, &txn_batch(7, 2, &[(2, Some(2))])); // 3
        end_txn(&mut log, 7, true); // 4
        append(&mut log, &txn_batch(7, 3, &[(3, Some(3))])); // 5
        end_txn(&mut log, 7, true); // 6
        append(
            &mut log,
            &keyed_batch(&[(Some(2), Some(9))], Compression::None),
        ); // 7
        log.roll().expect("roll");
        clean(&mut log, 10_000);
        let tail = [(5, false, 1, None), (6, true, 1, None), (7, false, 1, None)];
        let mut expected = vec![(2, true, 1, None), (4, true, 1, None)];
        expected.extend(tail);
        assert_eq!(shape(&log), expected, "records gone, markers kept a round");
        let end = log.log_end_offset();
        let listed = log.producers().aborted_between(0, end.0);
        assert_eq!(listed.len(), 1, "listed while a round read its batches");
        clean(&mut log, 10_000);
        let listed = log.producers().aborted_between(0, end.0);
        assert!(
            listed.is_empty(),
            "not listed once none is left, before its marker goes"
        );
        let stamped = vec![(2, true, 1, Some(11_000)), (4, true, 1, Some(11_000))];
        let with_tail = |head: Vec<(i64, bool, i32, Option<i64>)>| {
            head.into_iter().chain(tail).collect::<Vec<_>>()
        };
        assert_eq!(shape(&log), with_tail(stamped.clone()), "horizon stamped");
        clean(&mut log, 10_999);
        assert_eq!(shape(&log), with_tail(stamped), "kept until the horizon");
        clean(&mut log, 11_000);
        assert_eq!(shape(&log), with_tail(Vec::new()), "gone after it");
        drop(log);
        let mut log = open(dir.path(), 1 << 16);
        let end = log.log_end_offset();
        assert_eq!(log.last_stable_offset(end), end);
        assert!(log.producers().aborted_between(0, end.0).is_empty());
        assert_eq!(append(&mut log, &txn_batch(7, 4, &[(4, Some(4))])), end);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Plain(Vec<(u8, Option<u8>)>),
        Txn(i64, Vec<(u8, Option<u8>)>),
        End(i64, bool),
    }

    fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
        let records = || {
            let value = proptest::option::weighted(0.8, 0u8..100);
            proptest::collection::vec((0u8..6, value), 1..4)
        };
        let op = prop_oneof![
            records().prop_map(Op::Plain),
            (1i64..3, records()).prop_map(|(p, r)| Op::Txn(p, r)),
            (1i64..3, any::<bool>()).prop_map(|(p, c)| Op::End(p, c)),
        ];
        proptest::collection::vec(op, 1..40)
    }

    /// What was written: (offset, key, value, aborted) per record, and each producer's
    /// open transaction and next sequence.
    #[derive(Debug, Default)]
    struct Model {
        records: Vec<(i64, u8, Option<u8>, bool)>,
        open: BTreeMap<i64, Vec<usize>>,
        next_sequence: BTreeMap<i64, i32>,
    }

    impl Model {
        fn apply(&mut self, log: &mut Log, op: &Op) {
            match op {
                Op::Plain(records) => {
                    let keyed: Vec<_> = records.iter().map(|(k, v)| (Some(*k), *v)).collect();
                    let base = append(log, &keyed_batch(&keyed, Compression::None));
                    self.push(base.0, records, None);
                }
                Op::Txn(producer, records) => {
                    let sequence = self.next_sequence.entry(*producer).or_default();
                    let base = append(log, &txn_batch(*producer, *sequence, records));
                    *sequence += records.len() as i32;
                    self.push(base.0, records, Some(*producer));
                }
                Op::End(producer, commit) => self.end(log, *producer, *commit),
            }
        }

        fn push(&mut self, base: i64, records: &[(u8, Option<u8>)], producer: Option<i64>) {
            for (i, (key, value)) in records.iter().enumerate() {
                if let Some(producer) = producer {
                    self.open
                        .entry(producer)
                        .or_default()
                        .push(self.records.len());
                }
                self.records.push((base + i as i64, *key, *value, false));
            }
        }

        fn end(&mut self, log: &mut Log, producer: i64, commit: bool) {
            end_txn(log, producer, commit);
            for i in self.open.remove(&producer).unwrap_or_default() {
                self.records[i].3 = !commit;
            }
        }

        /// Each key's latest record outside aborted transactions: key → (offset, value).
        fn latest(&self) -> BTreeMap<u8, (i64, Option<u8>)> {
            let mut latest = BTreeMap::new();
            for (offset, key, value, _) in self.records.iter().filter(|r| !r.3) {
                latest.insert(*key, (*offset, *value));
            }
            latest
        }
    }

    /// The stored records are written ones, none aborted, and exactly each key's latest
    /// committed or plain record (tombstones only `with_tombstones`).
    fn check_committed_view(log: &Log, model: &Model, with_tombstones: bool) {
        let mut by_key = BTreeMap::new();
        let mut previous = -1;
        for (offset, key, value) in all_records(log) {
            assert!(offset > previous, "offsets increase at {offset}");
            previous = offset;
            let written = model
                .records
                .iter()
                .find(|r| r.0 == offset)
                .expect("written");
            assert_eq!((written.1, written.2), (key_of(&key), value_of(&value)));
            assert!(!written.3, "aborted record kept at {offset}");
            let duplicate = by_key.insert(written.1, (offset, written.2));
            assert!(duplicate.is_none(), "one record per key, at {offset}");
        }
        let mut expected = model.latest();
        expected.retain(|_, (_, value)| with_tombstones || value.is_some());
        assert_eq!(by_key, expected);
    }

    /// Every kept transactional batch is followed by a marker of its producer; with
    /// `settled`, every marker is also needed: a batch of its transaction is left, or it
    /// is its producer's last marker, or its segment's last batch.
    fn check_markers(log: &Log, settled: bool) {
        let all = headers(log);
        let mut last_markers = BTreeMap::new();
        for h in all.iter().filter(|h| h.is_control()) {
            last_markers.insert(h.producer_id, h.base_offset);
        }
        let mut pending = BTreeMap::new();
        for segment in log.segments() {
            let headers: Vec<BatchHeader> = segment.batches_from(0).map(|(_, h)| h).collect();
            for (n, h) in headers.iter().enumerate() {
                if !h.is_control() {
                    if h.is_transactional() {
                        pending.insert(h.producer_id, h.base_offset);
                    }
                    continue;
                }
                let needed = pending.remove(&h.producer_id).is_some()
                    || last_markers.get(&h.producer_id) == Some(&h.base_offset)
                    || n + 1 == headers.len();
                assert!(
                    !settled || needed,
                    "marker at {} outlived its use",
                    h.base_offset
                );
            }
        }
        assert!(
            pending.is_empty(),
            "transactional batches without a marker: {pending:?}"
        );
    }

    /// Every aborted transaction the producer state lists still ends in its ABORT marker:
    /// a read_committed consumer told of it skips the producer's transactional batches
    /// from its first offset until it reads that marker, committed ones after it too.
    fn check_aborted_list(log: &Log) {
        let mut aborts = std::collections::BTreeSet::new();
        for segment in log.segments() {
            for (position, h) in segment.batches_from(0) {
                let marker = control::parse(&segment.batch_bytes(position, &h), &h);
                if marker.is_some_and(|m| !m.commit) {
                    aborts.insert((h.producer_id, h.base_offset));
                }
            }
        }
        for aborted in log.producers().aborted_between(0, log.log_end_offset().0) {
            let marker = (aborted.producer_id, aborted.last_offset);
            assert!(
                aborts.contains(&marker),
                "{aborted:?} listed without its marker"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Goal: however plain records, committed and aborted transactions interleave,
        /// cleaning keeps exactly each key's latest record outside aborted transactions at
        /// its offset, never leaves a transactional batch without its marker, removes
        /// every marker no longer needed once rounds settle, and the reopened log has no
        /// open transaction, the same aborted transactions (from the cleaned `.txnindex`
        /// files), no aborted range over a kept record, and every producer's sequence. Method: random writes against a model; rounds 10 s apart (more than
        /// `delete.retention.ms`) until one changes nothing.
        #[test]
        fn cleaning_transactions_keeps_the_committed_view(ops in ops_strategy()) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = open(dir.path(), 400);
            let mut model = Model::default();
            for op in &ops {
                model.apply(&mut log, op);
            }
            let open_producers: Vec<i64> = model.open.keys().copied().collect();
            for producer in open_producers {
                model.end(&mut log, producer, false);
            }
            log.roll().expect("roll");
            let mut now = 10_000;
            prop_assert_eq!(clean(&mut log, now).end_offset, log.log_end_offset());
            check_committed_view(&log, &model, true);
            check_markers(&log, false);
            check_aborted_list(&log);
            let mut previous = shape(&log);
            let mut settled = false;
            for _ in 0..12 {
                now += 10_000;
                clean(&mut log, now);
                check_markers(&log, false);
                check_aborted_list(&log);
                let current = shape(&log);
                settled = current == previous;
                if settled {
                    break;
                }
                previous = current;
            }
            prop_assert!(settled, "cleaning settles");
            check_committed_view(&log, &model, false);
            check_markers(&log, true);
            let stored = all_records(&log);
            let listed = log.producers().aborted_between(0, log.log_end_offset().0);
            drop(log);
            let mut log = open(dir.path(), 400);
            prop_assert_eq!(all_records(&log), stored);
            let end = log.log_end_offset();
            // The cleaned segments' `.txnindex` files hold what the producer state held.
            prop_assert_eq!(log.producers().aborted_between(0, end.0), listed);
            prop_assert_eq!(log.last_stable_offset(end), end);
            check_aborted_list(&log);
            for aborted in log.producers().aborted_between(0, end.0) {
                let range = aborted.first_offset..=aborted.last_offset;
                let covered = record_producers(&log).into_iter().any(|(o, p, t)| {
                    t && p == aborted.producer_id && range.contains(&o)
                });
                prop_assert!(!covered, "{:?} covers a kept record", aborted);
            }
            for (producer, sequence) in &model.next_sequence {
                let next = txn_batch(*producer, *sequence, &[(0, Some(0))]);
                let end = log.log_end_offset();
                prop_assert_eq!(append(&mut log, &next), end, "producer {} in sequence", producer);
                end_txn(&mut log, *producer, true);
            }
        }
    }
}
