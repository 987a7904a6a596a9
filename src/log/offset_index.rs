//! The sparse offset index (`.index`): 8-byte big-endian entries of (offset relative to
//! the segment's base offset, file position in the `.log`), in increasing order.
//!
//! Invariant: entries are strictly increasing in both offset and position.

use std::path::Path;

use super::error::LogError;
use super::index_file::{read_u32, IndexFile};

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
    file: IndexFile<ENTRY_BYTES>,
}

fn decode(raw: &[u8]) -> (RelativeOffset, FilePosition) {
    (
        RelativeOffset(read_u32(raw, 0)),
        FilePosition(read_u32(raw, 4)),
    )
}

/// Size, fullness, trimming and flushing are the file's (read-only access: entries are
/// added only through the typed methods, which keep the invariants).
impl std::ops::Deref for OffsetIndex {
    type Target = IndexFile<ENTRY_BYTES>;

    fn deref(&self) -> &Self::Target {
        &self.file
    }
}

impl OffsetIndex {
    /// Opens an index; existing entries are trusted only with `trust_existing`.
    pub fn open(path: &Path, max_bytes: usize, trust_existing: bool) -> Result<Self, LogError> {
        let index = OffsetIndex {
            file: IndexFile::open(path, max_bytes, trust_existing)?,
        };
        index.check_invariants();
        Ok(index)
    }

    /// Entry number `n`.
    pub fn entry(&self, n: usize) -> (RelativeOffset, FilePosition) {
        decode(self.file.entry(n))
    }

    /// Appends an entry if it keeps the index increasing and the index has room; returns
    /// whether it did.
    pub fn maybe_append(
        &mut self,
        offset: RelativeOffset,
        position: FilePosition,
    ) -> Result<bool, LogError> {
        if let Some(n) = self.len().checked_sub(1) {
            let (last_offset, last_position) = self.entry(n);
            if offset <= last_offset || position <= last_position {
                return Ok(false);
            }
        }
        let mut raw = [0u8; ENTRY_BYTES];
        raw[..4].copy_from_slice(&offset.0.to_be_bytes());
        raw[4..].copy_from_slice(&position.0.to_be_bytes());
        let appended = self.file.push(&raw)?;
        self.check_invariants();
        Ok(appended)
    }

    /// The position of the greatest entry whose offset is at most `target`, or 0.
    pub fn lookup(&self, target: RelativeOffset) -> FilePosition {
        self.lookup_entry(target)
            .map_or(FilePosition(0), |entry| entry.1)
    }

    /// The greatest entry whose offset is at most `target`, if any.
    pub fn lookup_entry(&self, target: RelativeOffset) -> Option<(RelativeOffset, FilePosition)> {
        let n = self.file.partition_point(|raw| decode(raw).0 <= target);
        n.checked_sub(1).map(|n| self.entry(n))
    }

    /// Drops every entry whose offset is at or past `offset`.
    pub fn truncate_to(&mut self, offset: RelativeOffset) {
        let keep = self.file.partition_point(|raw| decode(raw).0 < offset);
        self.file.truncate_entries(keep);
    }

    /// Forgets all entries (before a rebuild).
    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }

    /// Checks that entries increase (debug builds).
    pub fn check_invariants(&self) {
        if cfg!(debug_assertions) {
            for n in 1..self.len() {
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
        assert!(index
            .maybe_append(RelativeOffset(10), FilePosition(100))
            .expect("write"));
        assert!(index
            .maybe_append(RelativeOffset(20), FilePosition(200))
            .expect("write"));
        assert_eq!(index.lookup(RelativeOffset(5)), FilePosition(0));
        assert_eq!(index.lookup(RelativeOffset(10)), FilePosition(100));
        assert_eq!(index.lookup(RelativeOffset(19)), FilePosition(100));
        assert_eq!(index.lookup(RelativeOffset(25)), FilePosition(200));
        index.truncate_to(RelativeOffset(20));
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn trimmed_index_reopens_with_its_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("0.index");
        let mut index = OffsetIndex::open(&path, 1024, false).expect("open");
        index
            .maybe_append(RelativeOffset(3), FilePosition(64))
            .expect("write");
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
                index.maybe_append(RelativeOffset(offset), FilePosition(position)).expect("write");
                model.push((offset, position));
            }
            let expected = model.iter().rev().find(|(o, _)| *o <= target).map_or(0, |e| e.1);
            prop_assert_eq!(index.lookup(RelativeOffset(target)), FilePosition(expected));
        }
    }
}
