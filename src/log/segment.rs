//! One segment of a partition's log: the memory-mapped `.log` file holding record batches
//! exactly as producers sent them (with base offset and leader epoch patched), and its
//! sparse `.index`.
//!
//! The active segment's `.log` is preallocated to `segment.bytes` and trimmed to its
//! batches when it is rolled or closed cleanly. Must not: know about partitions, producers
//! or the network.
//! Invariant: `size` bytes at the start of the `.log` are whole, CRC-checked batches with
//! contiguous increasing offsets, starting at `base_offset`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::batch::{self, BatchHeader, BatchIter};
use super::error::LogError;
use super::mmap::{MappedFile, MappedRegion};
use super::offset_index::{FilePosition, OffsetIndex, RelativeOffset};

/// Sizes a segment needs to know (from the topic's configuration).
#[derive(Debug, Clone, Copy)]
pub struct SegmentConfig {
    /// `segment.bytes`: the `.log` size at which a new segment is rolled.
    pub segment_bytes: usize,
    /// `segment.index.bytes`: the preallocated size of the `.index`.
    pub segment_index_bytes: usize,
    /// `index.interval.bytes`: bytes of batches between two index entries.
    pub index_interval_bytes: usize,
}

/// File name of a segment file: the base offset as 20 zero-padded digits and a suffix.
pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// One `.log` + `.index` pair.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log: Arc<MappedFile>,
    index: OffsetIndex,
    /// Bytes of whole batches at the start of the `.log` (the published length).
    size: usize,
    /// The offset the next batch appended here gets.
    next_offset: i64,
    bytes_since_last_index_entry: usize,
    index_interval_bytes: usize,
}

impl Segment {
    /// Creates a new, empty segment in `dir`.
    pub fn create(dir: &Path, base_offset: i64, config: SegmentConfig) -> Result<Self, LogError> {
        let log = MappedFile::open(
            &dir.join(file_name(base_offset, "log")),
            config.segment_bytes,
        )?;
        let index_path = dir.join(file_name(base_offset, "index"));
        let index = OffsetIndex::open(&index_path, config.segment_index_bytes, false)?;
        Ok(Segment {
            base_offset,
            log: Arc::new(log),
            index,
            size: 0,
            next_offset: base_offset,
            bytes_since_last_index_entry: 0,
            index_interval_bytes: config.index_interval_bytes,
        })
    }

    /// Opens an existing segment. With `recover`, every batch is re-read and CRC-checked,
    /// the index rebuilt and a torn or corrupt tail cut off; otherwise the file length and
    /// index written at the last clean close are trusted.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        config: SegmentConfig,
        recover: bool,
    ) -> Result<Self, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let file_length = std::fs::metadata(&log_path)
            .map_err(|e| LogError::io(&log_path, e))?
            .len() as usize;
        let log = MappedFile::open(&log_path, config.segment_bytes.max(file_length))?;
        let index_path = dir.join(file_name(base_offset, "index"));
        let index_exists = index_path.exists();
        let index = OffsetIndex::open(
            &index_path,
            config.segment_index_bytes,
            index_exists && !recover,
        )?;
        let mut segment = Segment {
            base_offset,
            log: Arc::new(log),
            index,
            size: file_length,
            next_offset: base_offset,
            bytes_since_last_index_entry: 0,
            index_interval_bytes: config.index_interval_bytes,
        };
        if recover || !index_exists {
            segment.recover(file_length)?;
        } else {
            segment.next_offset = segment
                .last_batch()
                .map_or(base_offset, |h| h.last_offset() + 1);
        }
        Ok(segment)
    }

    /// Re-reads the batches in the first `length` bytes, keeps the valid prefix, rebuilds
    /// the index and zeroes everything after the valid prefix.
    fn recover(&mut self, length: usize) -> Result<(), LogError> {
        self.index.reset();
        self.size = 0;
        self.bytes_since_last_index_entry = 0;
        self.next_offset = self.base_offset;
        let bytes = self.log.slice(0, length.min(self.log.capacity()));
        let mut valid = 0usize;
        let mut entries = Vec::new();
        for (position, header) in BatchIter::new(bytes) {
            let expected = self.next_offset;
            let ok = header.magic == batch::MAGIC_V2
                && header.base_offset == expected
                && header.last_offset_delta >= 0
                && batch::check_crc(&bytes[position..], &header).is_ok();
            if !ok {
                break;
            }
            entries.push((position, header));
            valid = position + header.size;
            self.next_offset = header.last_offset() + 1;
        }
        if valid < length {
            let tail = self
                .log
                .slice(valid, length.min(valid + batch::HEADER_BYTES));
            if tail.iter().any(|b| *b != 0) {
                tracing::warn!(
                    segment = %self.log.path().display(),
                    valid_bytes = valid,
                    "truncating torn or corrupt tail of segment"
                );
            }
            self.log.truncate_and_regrow(valid)?;
        }
        for (position, header) in entries {
            self.maybe_index(position, &header);
        }
        self.size = valid;
        Ok(())
    }

    /// Adds an index entry for a batch at `position` if enough bytes have passed.
    fn maybe_index(&mut self, position: usize, header: &BatchHeader) {
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            let relative = RelativeOffset((header.last_offset() - self.base_offset) as u32);
            self.index
                .maybe_append(relative, FilePosition(position as u32));
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += header.size;
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

    /// Whether a batch of `size` bytes still fits in this segment.
    pub fn has_room_for(&self, size: usize) -> bool {
        self.size + size <= self.log.capacity()
            && !self.index.is_full()
            && self.next_offset - self.base_offset < i64::from(u32::MAX) - 1
    }

    /// Appends one validated batch, patched with `base_offset` and `leader_epoch`.
    pub fn append(&mut self, bytes: &[u8], base_offset: i64, leader_epoch: i32) -> BatchHeader {
        assert_eq!(base_offset, self.next_offset, "appends must be contiguous");
        let position = self.size;
        self.log.write_at(position, bytes);
        self.log.write_at(position, &base_offset.to_be_bytes());
        self.log.write_at(
            position + batch::PARTITION_LEADER_EPOCH_AT,
            &leader_epoch.to_be_bytes(),
        );
        let written = self.log.slice(position, position + bytes.len());
        let header = BatchHeader::parse(written).expect("validated batch has a header");
        self.maybe_index(position, &header);
        self.size += header.size;
        self.next_offset = header.last_offset() + 1;
        header
    }

    /// The headers of all batches, from the index position at or below `offset`.
    pub fn batches_from(&self, offset: i64) -> impl Iterator<Item = (usize, BatchHeader)> + '_ {
        let relative = (offset - self.base_offset).clamp(0, i64::from(u32::MAX)) as u32;
        let start = self.index.lookup(RelativeOffset(relative)).0 as usize;
        BatchIter::new(self.log.slice(start, self.size)).offset_by(start)
    }

    /// The header of the last batch, if any (a linear walk from the last index entry).
    fn last_batch(&self) -> Option<BatchHeader> {
        self.batches_from(i64::MAX).last().map(|(_, h)| h)
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
            if header.base_offset >= max_offset && start.is_none() {
                break;
            }
            if header.last_offset() >= max_offset {
                break;
            }
            let first = *start.get_or_insert(position);
            let would_be = position + header.size - first;
            if would_be > max_bytes && !(min_one && position == first) {
                break;
            }
            end = position + header.size;
        }
        match start {
            Some(first) if end > first => MappedRegion {
                file: Arc::clone(&self.log),
                start: first,
                end,
            }
            .into_bytes(),
            _ => Bytes::new(),
        }
    }

    /// The raw bytes of a batch at `position` (for record-level lookups).
    pub fn batch_bytes(&self, position: usize, header: &BatchHeader) -> Bytes {
        let region = MappedRegion {
            file: Arc::clone(&self.log),
            start: position,
            end: position + header.size,
        };
        region.into_bytes()
    }

    /// Trims the `.log` and `.index` to their contents (on roll and clean close).
    pub fn seal(&self) -> Result<(), LogError> {
        self.log.trim(self.size)?;
        self.index.trim()
    }

    /// Writes the segment's dirty pages to disk.
    pub fn flush(&self) -> Result<(), LogError> {
        self.log.flush(self.size)?;
        self.index.flush()
    }

    /// Paths of the segment's files (for deletion).
    pub fn paths(&self, dir: &Path) -> [PathBuf; 2] {
        [
            dir.join(file_name(self.base_offset, "log")),
            dir.join(file_name(self.base_offset, "index")),
        ]
    }
}

impl<'a> BatchIter<'a> {
    /// Makes the positions the iterator reports relative to the file, not to the slice.
    pub fn offset_by(self, start: usize) -> impl Iterator<Item = (usize, BatchHeader)> + 'a {
        self.map(move |(position, header)| (position + start, header))
    }
}
