//! One segment of a partition's log: the memory-mapped `.log` file holding record batches
//! exactly as producers sent them (with base offset and leader epoch patched), its sparse
//! `.index`, its `.timeindex` and its `.txnindex` (aborted transactions whose markers it
//! holds).
//!
//! The active segment's files are preallocated (`segment.bytes`, `segment.index.bytes`)
//! and trimmed to their contents when it is rolled or closed cleanly; a sealed segment's
//! files are never grown again. Must not: know about partitions, producers or the network.
//! Invariant: `size` bytes at the start of the `.log` are whole, CRC-checked batches with
//! increasing offsets, starting at or after `base_offset` (contiguous until the log cleaner
//! rewrites the segment; a cleaned segment has gaps but ends at the same offset).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::batch::{self, BatchHeader, BatchIter};
use super::error::LogError;
use super::mmap::{MappedFile, MappedRegion};
use super::offset_index::{FilePosition, OffsetIndex, RelativeOffset};
use super::time_index::TimeIndex;
use super::txn_index::TxnIndex;
use crate::ids::Offset;

/// Sizes a segment needs to know (from the topic's configuration).
#[derive(Debug, Clone, Copy)]
pub struct SegmentConfig {
    /// `segment.bytes`: the `.log` size at which a new segment is rolled.
    pub segment_bytes: usize,
    /// `segment.index.bytes`: the preallocated size of the `.index` and `.timeindex`.
    pub segment_index_bytes: usize,
    /// `index.interval.bytes`: bytes of batches between two index entries.
    pub index_interval_bytes: usize,
}

/// File name of a segment file: the base offset as 20 zero-padded digits and a suffix.
pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// How a segment is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenMode {
    /// The active segment: its files are grown back to their preallocated sizes.
    pub active: bool,
    /// Re-scan the batches, rebuild the indexes and cut a torn tail (after a crash).
    pub recover: bool,
}

/// One `.log` + `.index` + `.timeindex` (+ `.txnindex`).
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log: Arc<MappedFile>,
    index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TxnIndex,
    /// Bytes of whole batches at the start of the `.log` (the published length).
    size: usize,
    /// The offset the next batch appended here gets.
    next_offset: i64,
    /// The greatest batch max timestamp so far (-1 when none) and the last offset of the
    /// batch that holds it.
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// When the segment was created or opened (wall clock), for time-based rolls of an
    /// empty segment.
    created_ms: i64,
    /// The first batch's max timestamp, which `segment.ms` counts from (as Kafka does).
    first_batch_timestamp: Option<i64>,
    bytes_since_last_index_entry: usize,
    index_interval_bytes: usize,
}

/// The suffixes of a segment's files: the log, its two indexes and its aborted-transaction
/// index (which exists only once it has an entry).
pub const FILE_KINDS: [&str; 4] = ["log", "index", "timeindex", "txnindex"];

fn paths(dir: &Path, base_offset: i64) -> [PathBuf; 4] {
    FILE_KINDS.map(|suffix| dir.join(file_name(base_offset, suffix)))
}

/// Paths of a segment's files with a temporary suffix appended (`.cleaned`, `.swap`).
pub fn temporary_paths(dir: &Path, base_offset: i64, suffix: &str) -> [PathBuf; 4] {
    FILE_KINDS.map(|kind| dir.join(format!("{}.{suffix}", file_name(base_offset, kind))))
}

impl Segment {
    fn with_files(
        base_offset: i64,
        (log, index, time_index): (MappedFile, OffsetIndex, TimeIndex),
        txn_index: TxnIndex,
        config: SegmentConfig,
    ) -> Self {
        Segment {
            base_offset,
            log: Arc::new(log),
            index,
            time_index,
            txn_index,
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            created_ms: crate::clock::system_now_ms(),
            first_batch_timestamp: None,
            bytes_since_last_index_entry: 0,
            index_interval_bytes: config.index_interval_bytes,
        }
    }

    /// Creates a new, empty segment in `dir` (a `.txnindex` left there by a segment deleted
    /// half-way is removed).
    pub fn create(dir: &Path, base_offset: i64, config: SegmentConfig) -> Result<Self, LogError> {
        let files = paths(dir, base_offset);
        let segment = Self::create_files(files, base_offset, config, config.segment_bytes)?;
        segment.txn_index.rewrite(&[])?;
        Ok(segment)
    }

    /// Creates the log cleaner's output segment: `.cleaned` files (left-overs of an
    /// earlier attempt are replaced), the log preallocated to `capacity` bytes (sparse;
    /// trimmed by [`Segment::seal`]).
    pub fn create_cleaned(
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        capacity: usize,
    ) -> Result<Self, LogError> {
        let cleaned = temporary_paths(dir, base_offset, "cleaned");
        for path in &cleaned {
            super::checkpoint::remove_if_exists(path)?;
        }
        Self::create_files(cleaned, base_offset, config, capacity)
    }

    fn create_files(
        [log, index, time_index, txn_index]: [PathBuf; 4],
        base_offset: i64,
        config: SegmentConfig,
        capacity: usize,
    ) -> Result<Self, LogError> {
        let log = MappedFile::open(&log, capacity)?;
        let index = OffsetIndex::open(&index, config.segment_index_bytes, false)?;
        let time_index = TimeIndex::open(&time_index, config.segment_index_bytes, false)?;
        Ok(Self::with_files(
            base_offset,
            (log, index, time_index),
            TxnIndex::new(txn_index),
            config,
        ))
    }

    /// Opens an existing segment (see [`OpenMode`]); missing index files are rebuilt.
    /// Returns the segment and whether recovery cut bytes off its end.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        mode: OpenMode,
    ) -> Result<(Self, bool), LogError> {
        let [log_path, index_path, time_index_path, txn_index_path] = paths(dir, base_offset);
        let file_length = std::fs::metadata(&log_path)
            .map_err(|e| LogError::io(&log_path, e))?
            .len() as usize;
        let indexes_exist = index_path.exists() && time_index_path.exists();
        let recover = mode.recover || !indexes_exist;
        let log_bytes = if mode.active { config.segment_bytes } else { 0 };
        let index_bytes = if mode.active || recover {
            config.segment_index_bytes
        } else {
            0
        };
        let log = MappedFile::open(&log_path, log_bytes)?;
        let index = OffsetIndex::open(&index_path, index_bytes, !recover)?;
        let time_index = TimeIndex::open(&time_index_path, index_bytes, !recover)?;
        let files = (log, index, time_index);
        let mut segment =
            Self::with_files(base_offset, files, TxnIndex::new(txn_index_path), config);
        if !recover {
            segment.load_trusted(file_length);
            if segment.indexes_are_sane() {
                return Ok((segment, false));
            }
            tracing::warn!(segment = %log_path.display(), "damaged index: rebuilding it from the log");
        }
        let truncated = segment.recover(file_length, mode.active)?;
        if !mode.active {
            segment.seal()?;
        }
        Ok((segment, truncated))
    }

    /// Takes the size from the file and the rest from the indexes and the tail batches.
    fn load_trusted(&mut self, file_length: usize) {
        self.size = file_length;
        if let Some((timestamp, offset)) = self.time_index.last_entry() {
            self.max_timestamp = timestamp;
            self.offset_of_max_timestamp = self.base_offset + i64::from(offset.0);
        }
        let tail: Vec<BatchHeader> = self.batches_from(i64::MAX).map(|(_, h)| h).collect();
        for header in &tail {
            self.track_timestamp(header);
        }
        self.next_offset = tail
            .last()
            .map_or(self.base_offset, |h| h.last_offset() + 1);
        self.first_batch_timestamp =
            BatchHeader::parse(self.log.slice(0, self.size.min(batch::HEADER_BYTES)))
                .map(|h| h.max_timestamp);
    }

    /// Re-reads the batches in the first `length` bytes, keeps the valid prefix, rebuilds
    /// the indexes and frees everything after the valid prefix. Returns whether bytes other
    /// than preallocated zeros were cut (always, for a sealed segment with a bad tail).
    fn recover(&mut self, length: usize, active: bool) -> Result<bool, LogError> {
        self.index.reset();
        self.time_index.reset();
        let bytes = self.log.slice(0, length.min(self.log.capacity()));
        let mut valid = 0usize;
        let mut entries = Vec::new();
        // Offsets are contiguous in the active segment; a sealed one may have been cleaned,
        // which leaves gaps between batches (the base offset is not covered by the CRC).
        let mut expected = self.base_offset;
        for (position, header) in BatchIter::new(bytes) {
            let ok = header.magic == batch::MAGIC_V2
                && (header.base_offset == expected || (!active && header.base_offset > expected))
                && header.last_offset_delta >= 0
                && batch::check_crc(&bytes[position..], &header).is_ok();
            if !ok {
                break;
            }
            entries.push((position, header));
            valid = position + header.size;
            expected = header.last_offset() + 1;
        }
        let mut truncated = false;
        if valid < length {
            let tail = self
                .log
                .slice(valid, length.min(valid + batch::HEADER_BYTES));
            truncated = !active || tail.iter().any(|b| *b != 0);
            if truncated {
                tracing::warn!(segment = %self.log.path().display(), valid_bytes = valid,
                    "truncating torn or corrupt tail of segment");
            }
            self.log.truncate_and_regrow(valid)?;
        }
        for (position, header) in entries {
            self.record_append(position, &header)?;
        }
        Ok(truncated)
    }

    /// Checks trusted index files without reading the log (AbstractIndex.sanityCheck and
    /// more, so that a clean start reads index pages only): entries increase and lie
    /// inside the segment, and the last offset index entry points at the batch that ends
    /// at its offset. A damaged entry elsewhere is caught when a lookup lands on it
    /// (see [`Segment::batches_from`]).
    fn indexes_are_sane(&self) -> bool {
        let mut previous: Option<(RelativeOffset, FilePosition)> = None;
        for n in 0..self.index.len() {
            let (offset, position) = self.index.entry(n);
            let outside = position.0 as usize >= self.size.max(1)
                || self.base_offset + i64::from(offset.0) >= self.next_offset;
            if outside || previous.is_some_and(|(o, p)| o >= offset || p >= position) {
                return false;
            }
            previous = Some((offset, position));
        }
        if previous.is_some_and(|entry| !self.entry_matches_log(entry)) {
            return false;
        }
        let mut previous_timestamp = i64::MIN;
        for n in 0..self.time_index.len() {
            let (timestamp, offset) = self.time_index.entry(n);
            let absolute = self.base_offset + i64::from(offset.0);
            if timestamp <= previous_timestamp
                || absolute >= self.next_offset.max(self.base_offset + 1)
            {
                return false;
            }
            previous_timestamp = timestamp;
        }
        true
    }

    /// Whether an offset index entry points at the start of the batch ending at its offset.
    fn entry_matches_log(&self, (offset, position): (RelativeOffset, FilePosition)) -> bool {
        let at = position.0 as usize;
        let header = BatchHeader::parse(self.log.slice(at.min(self.size), self.size));
        let expected = self.base_offset + i64::from(offset.0);
        header.is_some_and(|h| h.last_offset() == expected && at + h.size <= self.size)
    }

    fn track_timestamp(&mut self, header: &BatchHeader) {
        // An empty batch (kept by the log cleaner for its offsets or producer state) has no
        // record to find at its timestamp: Kafka's DumpLogSegments checks time index
        // entries against the records.
        if header.max_timestamp > self.max_timestamp && header.record_count > 0 {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.last_offset();
        }
    }

    /// Updates sizes, offsets, timestamps and indexes for a batch written at `position`.
    fn record_append(&mut self, position: usize, header: &BatchHeader) -> Result<(), LogError> {
        self.track_timestamp(header);
        self.first_batch_timestamp
            .get_or_insert(header.max_timestamp);
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            let relative = RelativeOffset((header.last_offset() - self.base_offset) as u32);
            self.index
                .maybe_append(relative, FilePosition(position as u32))?;
            self.maybe_time_index()?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += header.size;
        self.size = position + header.size;
        self.next_offset = header.last_offset() + 1;
        Ok(())
    }

    fn maybe_time_index(&mut self) -> Result<(), LogError> {
        if self.max_timestamp >= 0 {
            let relative = RelativeOffset((self.offset_of_max_timestamp - self.base_offset) as u32);
            self.time_index.maybe_append(self.max_timestamp, relative)?;
        }
        Ok(())
    }

    /// The segment's first offset.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// The offset the next appended batch would get.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Bytes of batches stored.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The greatest timestamp in the segment, -1 if none.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// The last offset of the batch holding the greatest timestamp.
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }

    /// The timestamp `segment.ms` and `retention.ms` count from: the greatest timestamp,
    /// or the creation time of a segment without timestamps.
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            self.max_timestamp
        } else {
            self.created_ms
        }
    }

    /// Whether appending a batch whose max timestamp is `batch_timestamp` must first roll
    /// the segment by Kafka's rule (LogSegment.timeWaitedForRoll): the time waited is the
    /// new batch's timestamp minus the first batch's, or the wall-clock age of a segment
    /// without timestamps.
    pub fn is_due_for_time_roll(&self, now_ms: i64, batch_timestamp: i64, segment_ms: i64) -> bool {
        let waited = match self.first_batch_timestamp {
            Some(first) if first >= 0 => batch_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        self.size > 0 && waited > segment_ms
    }

    /// Whether a batch of `size` bytes still fits in this segment.
    pub fn has_room_for(&self, size: usize) -> bool {
        self.size + size <= self.log.capacity()
            && !self.index.is_full()
            && !self.time_index.is_full()
            && self.next_offset - self.base_offset < i64::from(u32::MAX) - 1
    }

    /// Appends one validated batch, patched with `base_offset` and `leader_epoch`.
    pub fn append(
        &mut self,
        bytes: &[u8],
        base_offset: i64,
        leader_epoch: i32,
        log_append_time: Option<i64>,
    ) -> Result<BatchHeader, LogError> {
        assert_eq!(base_offset, self.next_offset, "appends must be contiguous");
        let position = self.size;
        let (head, rest) = bytes.split_at(batch::HEADER_BYTES);
        let mut head: [u8; batch::HEADER_BYTES] = head.try_into().expect("split at its length");
        batch::patch(&mut head, base_offset, leader_epoch);
        if let Some(now) = log_append_time {
            batch::stamp_log_append_time(&mut head, rest, now);
        }
        self.log.write_at(position, &[&head, rest])?;
        let header = BatchHeader::parse(&head).expect("validated batch has a header");
        self.record_append(position, &header)?;
        Ok(header)
    }

    /// Appends a batch exactly as it is (one the log cleaner rewrote, or a follower got
    /// from its leader): its offsets must lie past every offset already here (a compacted
    /// log leaves gaps) and it must fit.
    pub fn append_unchanged(&mut self, bytes: &[u8]) -> Result<BatchHeader, LogError> {
        let header = BatchHeader::parse(bytes).ok_or(LogError::InvalidBatch {
            reason: "batch without a header",
        })?;
        if header.base_offset < self.next_offset {
            return Err(LogError::NonContiguousOffset {
                expected: Offset(self.next_offset),
                found: Offset(header.base_offset),
            });
        }
        if self.size + bytes.len() > self.log.capacity() {
            return Err(LogError::BatchLargerThanSegment {
                size: self.size + bytes.len(),
                max: self.log.capacity(),
            });
        }
        let position = self.size;
        self.log.write_at(position, &[bytes])?;
        self.record_append(position, &header)?;
        Ok(header)
    }

    /// The mapped `.log` file, for readers that work without the log's lock (the cleaner
    /// reads sealed segments, whose published bytes never change).
    pub fn log_file(&self) -> Arc<MappedFile> {
        Arc::clone(&self.log)
    }

    /// Bytes of the offset index and of the time index (for grouping cleaned segments).
    pub fn index_sizes(&self) -> (usize, usize) {
        (
            self.index.len() * super::offset_index::ENTRY_BYTES,
            self.time_index.len() * super::time_index::ENTRY_BYTES,
        )
    }

    /// The first batch's max timestamp (`max.compaction.lag.ms` counts from it).
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.first_batch_timestamp
    }

    /// The headers of all batches, from the index position at or below `offset`.
    pub fn batches_from(&self, offset: i64) -> impl Iterator<Item = (usize, BatchHeader)> + '_ {
        let relative = (offset - self.base_offset).clamp(0, i64::from(u32::MAX)) as u32;
        let start = match self.index.lookup_entry(RelativeOffset(relative)) {
            Some(entry) if self.entry_matches_log(entry) => entry.1 .0 as usize,
            Some(entry) => {
                tracing::warn!(segment = %self.log.path().display(), offset = entry.0 .0,
                    "damaged index entry: scanning the segment from its start");
                0
            }
            None => 0,
        };
        BatchIter::new(self.log.slice(start, self.size)).offset_by(start)
    }

    /// The headers of the batches from where a scan for the first record with a timestamp
    /// at or after `timestamp` may start (time index, then offset index).
    pub fn batches_from_timestamp(
        &self,
        timestamp: i64,
    ) -> impl Iterator<Item = (usize, BatchHeader)> + '_ {
        let relative = self.time_index.lookup(timestamp);
        self.batches_from(self.base_offset + i64::from(relative.0))
    }

    /// Whole batches starting with the one holding `offset`, up to (not including) the
    /// first batch at or past `max_offset`, up to `max_bytes` — except that the first batch
    /// is always returned whole when `min_one` (KIP-74). Zero-copy: points into the map.
    pub fn read(&self, offset: i64, max_offset: i64, max_bytes: usize, min_one: bool) -> Bytes {
        let mut start = None;
        let mut end = 0usize;
        for (position, header) in self.batches_from(offset) {
            if header.last_offset() < offset {
                continue;
            }
            if header.last_offset() >= max_offset {
                break;
            }
            let first = *start.get_or_insert(position);
            if position + header.size - first > max_bytes && !(min_one && position == first) {
                break;
            }
            end = position + header.size;
        }
        match start {
            Some(first) if end > first => self.region(first, end),
            _ => Bytes::new(),
        }
    }

    fn region(&self, start: usize, end: usize) -> Bytes {
        MappedRegion {
            file: Arc::clone(&self.log),
            start,
            end,
        }
        .into_bytes()
    }

    /// The bytes `[start, end)` of the `.log` (zero-copy), within the published size.
    pub fn bytes(&self, start: usize, end: usize) -> Bytes {
        self.region(start.min(self.size), end.min(self.size))
    }

    /// The raw bytes of a batch at `position` (for record-level lookups).
    pub fn batch_bytes(&self, position: usize, header: &BatchHeader) -> Bytes {
        self.region(position, position + header.size)
    }

    /// Adds the final time index entry and trims all three files to their contents (on
    /// roll and clean close), flushing them to disk.
    pub fn seal(&mut self) -> Result<(), LogError> {
        self.maybe_time_index()?;
        self.log.trim(self.size)?;
        self.index.trim()?;
        self.time_index.trim()?;
        self.txn_index.flush()
    }

    /// [`Segment::seal`] without its fsyncs: the files are trimmed, and what syncs them is
    /// returned, for the caller to run once it no longer holds the log (a roll).
    pub fn seal_deferred(&mut self) -> Result<super::roll_sync::SegmentSync, LogError> {
        self.maybe_time_index()?;
        self.log.shrink(self.size)?;
        let files = vec![
            self.log.sync_handle()?,
            self.index.shrink()?,
            self.time_index.shrink()?,
        ];
        Ok(super::roll_sync::SegmentSync::new(
            files,
            self.txn_index.take_unsynced(),
        ))
    }

    /// Writes the segment's dirty pages to disk.
    pub fn flush(&self) -> Result<(), LogError> {
        self.log.flush()?;
        self.index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// The segment's aborted-transaction index.
    pub fn txn_index(&self) -> &TxnIndex {
        &self.txn_index
    }

    /// Paths of the segment's files (for deletion).
    pub fn paths(&self, dir: &Path) -> [PathBuf; 4] {
        paths(dir, self.base_offset)
    }
}

impl<'a> BatchIter<'a> {
    /// Makes the positions the iterator reports relative to the file, not to the slice.
    pub fn offset_by(self, start: usize) -> impl Iterator<Item = (usize, BatchHeader)> + 'a {
        self.map(move |(position, header)| (position + start, header))
    }
}
