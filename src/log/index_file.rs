//! A memory-mapped file of fixed-size index entries (AbstractIndex in Apache Kafka), the
//! common part of the offset index and the time index.
//!
//! The file is preallocated to `segment.index.bytes` (rounded down to whole entries) and
//! trimmed to its entries on roll and on clean close. When reopened, every whole entry in
//! the file is trusted only if the caller says so (after a clean shutdown); otherwise the
//! index starts empty and is rebuilt from the log.

use std::path::Path;

use super::error::LogError;
use super::mmap::WritableMap;

/// A file of `ENTRY_BYTES`-sized entries.
#[derive(Debug)]
pub struct IndexFile<const ENTRY_BYTES: usize> {
    file: WritableMap,
    entries: usize,
    max_entries: usize,
}

impl<const ENTRY_BYTES: usize> IndexFile<ENTRY_BYTES> {
    /// Opens (or creates) an index of at most `max_bytes`, trusting the entries already in
    /// the file when `trust_existing`. With `max_bytes == 0` (a sealed segment's index)
    /// the file keeps its size: it is never grown again.
    pub fn open(path: &Path, max_bytes: usize, trust_existing: bool) -> Result<Self, LogError> {
        let existing = std::fs::metadata(path)
            .map(|m| m.len() as usize)
            .unwrap_or(0);
        let capacity = match max_bytes {
            0 => 0,
            _ => (max_bytes / ENTRY_BYTES).max(1) * ENTRY_BYTES,
        };
        let file = WritableMap::open(path, capacity.max(existing))?;
        let max_entries = file.capacity() / ENTRY_BYTES;
        let entries = if trust_existing {
            existing / ENTRY_BYTES
        } else {
            0
        };
        Ok(IndexFile {
            file,
            entries,
            max_entries,
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether the index has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Whether another entry fits.
    pub fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    /// The raw bytes of entry `n`.
    pub fn entry(&self, n: usize) -> &[u8] {
        self.file.slice(n * ENTRY_BYTES, (n + 1) * ENTRY_BYTES)
    }

    /// Appends an entry; returns false when the index is full.
    pub fn push(&mut self, raw: &[u8; ENTRY_BYTES]) -> Result<bool, LogError> {
        if self.is_full() {
            return Ok(false);
        }
        self.file.write_at(self.entries * ENTRY_BYTES, raw)?;
        self.entries += 1;
        Ok(true)
    }

    /// The number of entries for which `below` holds, assuming it holds for a prefix
    /// (binary search).
    pub fn partition_point(&self, below: impl Fn(&[u8]) -> bool) -> usize {
        let (mut low, mut high) = (0usize, self.entries);
        while low < high {
            let mid = (low + high) / 2;
            if below(self.entry(mid)) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// Keeps only the first `n` entries.
    pub fn truncate_entries(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    /// Flushes the entries and trims the file to them.
    pub fn trim(&self) -> Result<(), LogError> {
        self.file.flush()?;
        self.file.shrink(self.entries * ENTRY_BYTES)
    }

    /// Flushes the entries to disk.
    pub fn flush(&self) -> Result<(), LogError> {
        self.file.flush()
    }

    /// Trims the file to its entries without flushing them; returns a handle that syncs
    /// them later.
    pub fn shrink(&self) -> Result<(std::path::PathBuf, std::fs::File), LogError> {
        self.file.shrink(self.entries * ENTRY_BYTES)?;
        self.file.sync_handle()
    }
}

/// Big-endian i32 at `at`.
pub fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Big-endian i64 at `at`.
pub fn read_i64(b: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(raw)
}
