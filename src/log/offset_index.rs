//! The sparse offset index (`.index`): 8-byte big-endian entries of (offset relative to
//! the segment's base offset, file position in the `.log`), in increasing order.
//!
//! The file is preallocated to `segment.index.bytes` and trimmed to its entries on roll
//! and on clean close, as Apache Kafka's AbstractIndex does.
//! Invariant: entries are strictly increasing in both offset and position.

use std::path::Path;

use super::error::LogError;
use super::mmap::MappedFile;

/// Size of one index entry on disk.
pub const ENTRY_BYTES: usize = 8;

/// An offset relative to a segment's base offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RelativeOffset(pub u32);

/// A byte position inside a segment's `.log` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FilePosition(pub u32);

/// The memory-mapped `.index` of one segment.
#[derive(Debug)]
pub struct OffsetIndex {
    file: MappedFile,
    entries: usize,
    max_entries: usize,
}

impl OffsetIndex {
    /// Opens an index. `valid_entries` is how many entries at the start of the file are to
    /// be trusted (all of them after a clean shutdown; zero when it will be rebuilt).
    pub fn open(path: &Path, max_bytes: usize, trust_existing: bool) -> Result<Self, LogError> {
        let existing = std::fs::metadata(path)
            .map(|m| m.len() as usize)
            .unwrap_or(0);
        let capacity = (max_bytes / ENTRY_BYTES).max(1) * ENTRY_BYTES;
        let file = MappedFile::open(path, capacity.max(existing))?;
        let max_entries = file.capacity() / ENTRY_BYTES;
        let entries = if trust_existing {
            existing / ENTRY_BYTES
        } else {
            0
        };
        let index = OffsetIndex {
            file,
            entries,
            max_entries,
        };
        index.check_invariants();
        Ok(index)
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

    /// Entry number `n`.
    pub fn entry(&self, n: usize) -> (RelativeOffset, FilePosition) {
        let b = self.file.slice(n * ENTRY_BYTES, (n + 1) * ENTRY_BYTES);
        let offset = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let position = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        (RelativeOffset(offset), FilePosition(position))
    }

    /// Appends an entry if it keeps the index increasing and the index has room; returns
    /// whether it did.
    pub fn maybe_append(&mut self, offset: RelativeOffset, position: FilePosition) -> bool {
        if self.is_full() {
            return false;
        }
        if let Some(n) = self.entries.checked_sub(1) {
            let (last_offset, last_position) = self.entry(n);
            if offset <= last_offset || position <= last_position {
                return false;
            }
        }
        let mut raw = [0u8; ENTRY_BYTES];
        raw[..4].copy_from_slice(&offset.0.to_be_bytes());
        raw[4..].copy_from_slice(&position.0.to_be_bytes());
        self.file.write_at(self.entries * ENTRY_BYTES, &raw);
        self.entries += 1;
        self.check_invariants();
        true
    }

    /// The position of the greatest entry whose offset is at most `target`, or 0.
    pub fn lookup(&self, target: RelativeOffset) -> FilePosition {
        let (mut low, mut high) = (0usize, self.entries);
        while low < high {
            let mid = (low + high) / 2;
            if self.entry(mid).0 <= target {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        match low.checked_sub(1) {
            Some(n) => self.entry(n).1,
            None => FilePosition(0),
        }
    }

    /// Drops every entry whose offset is at or past `offset`.
    pub fn truncate_to(&mut self, offset: RelativeOffset) {
        while let Some(n) = self.entries.checked_sub(1) {
            if self.entry(n).0 < offset {
                break;
            }
            self.entries = n;
        }
    }

    /// Forgets all entries (before a rebuild).
    pub fn reset(&mut self) {
        self.entries = 0;
    }

    /// Flushes the entries and trims the file to them.
    pub fn trim(&self) -> Result<(), LogError> {
        self.file.trim(self.entries * ENTRY_BYTES)
    }

    /// Flushes the entries to disk.
    pub fn flush(&self) -> Result<(), LogError> {
        self.file.flush(self.entries * ENTRY_BYTES)
    }

    /// Checks that entries increase (debug builds).
    pub fn check_invariants(&self) {
        if cfg!(debug_assertions) {
            for n in 1..self.entries {
                let (a, b) = (self.entry(n - 1), self.entry(n));
                debug_assert!(a.0 < b.0, "index offsets must increase");
                debug_assert!(a.1 < b.1, "index positions must increase");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lookup_finds_the_greatest_entry_at_or_below() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut index = OffsetIndex::open(&dir.path().join("0.index"), 1024, false).expect("open");
        assert!(index.maybe_append(RelativeOffset(10), FilePosition(100)));
        assert!(index.maybe_append(RelativeOffset(20), FilePosition(200)));
        assert_eq!(index.lookup(RelativeOffset(5)), FilePosition(0));
        assert_eq!(index.lookup(RelativeOffset(10)), FilePosition(100));
        assert_eq!(index.lookup(RelativeOffset(19)), FilePosition(100));
        assert_eq!(index.lookup(RelativeOffset(25)), FilePosition(200));
    }

    #[test]
    fn trimmed_index_reopens_with_its_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("0.index");
        let mut index = OffsetIndex::open(&path, 1024, false).expect("open");
        index.maybe_append(RelativeOffset(3), FilePosition(64));
        index.trim().expect("trim");
        drop(index);
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 8);
        let index = OffsetIndex::open(&path, 1024, true).expect("reopen");
        assert_eq!(index.len(), 1);
        assert_eq!(index.entry(0), (RelativeOffset(3), FilePosition(64)));
    }

    proptest! {
        #[test]
        fn lookup_matches_a_linear_model(
            steps in proptest::collection::vec((1u32..50, 1u32..500), 0..100),
            target in 0u32..3000,
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut index = OffsetIndex::open(&dir.path().join("0.index"), 4096, false)
                .expect("open");
            let mut model = Vec::new();
            let (mut offset, mut position) = (0u32, 0u32);
            for (d_offset, d_position) in steps {
                offset += d_offset;
                position += d_position;
                index.maybe_append(RelativeOffset(offset), FilePosition(position));
                model.push((offset, position));
            }
            let expected = model.iter().rev().find(|(o, _)| *o <= target).map_or(0, |e| e.1);
            prop_assert_eq!(index.lookup(RelativeOffset(target)), FilePosition(expected));
        }
    }
}
