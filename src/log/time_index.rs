//! The sparse time index (`.timeindex`): 12-byte big-endian entries of (max timestamp so
//! far, offset relative to the segment's base offset of the batch holding it), written
//! with the offset index entries and once more when the segment is rolled or closed
//! (TimeIndex in Apache Kafka).
//!
//! Invariant: timestamps increase strictly, offsets do not decrease.

use std::path::Path;

use super::error::LogError;
use super::index_file::{read_i64, read_u32, IndexFile};
use super::offset_index::RelativeOffset;

/// Size of one time index entry on disk.
pub const ENTRY_BYTES: usize = 12;

/// The memory-mapped `.timeindex` of one segment.
#[derive(Debug)]
pub struct TimeIndex {
    file: IndexFile<ENTRY_BYTES>,
}

fn decode(raw: &[u8]) -> (i64, RelativeOffset) {
    (read_i64(raw, 0), RelativeOffset(read_u32(raw, 8)))
}

/// Size, fullness, trimming and flushing are the file's (read-only access: entries are
/// added only through the typed methods, which keep the invariants).
impl std::ops::Deref for TimeIndex {
    type Target = IndexFile<ENTRY_BYTES>;

    fn deref(&self) -> &Self::Target {
        &self.file
    }
}

impl TimeIndex {
    /// Opens a time index; existing entries are trusted only with `trust_existing`.
    pub fn open(path: &Path, max_bytes: usize, trust_existing: bool) -> Result<Self, LogError> {
        let index = TimeIndex {
            file: IndexFile::open(path, max_bytes, trust_existing)?,
        };
        index.check_invariants();
        Ok(index)
    }

    /// Entry number `n`: (timestamp, relative offset).
    pub fn entry(&self, n: usize) -> (i64, RelativeOffset) {
        decode(self.file.entry(n))
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<(i64, RelativeOffset)> {
        self.len().checked_sub(1).map(|n| self.entry(n))
    }

    /// Appends (timestamp, offset) if the timestamp is greater than the last entry's;
    /// returns whether it did.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: RelativeOffset,
    ) -> Result<bool, LogError> {
        if let Some((last_timestamp, last_offset)) = self.last_entry() {
            if timestamp <= last_timestamp || offset < last_offset {
                return Ok(false);
            }
        }
        let mut raw = [0u8; ENTRY_BYTES];
        raw[..8].copy_from_slice(&timestamp.to_be_bytes());
        raw[8..].copy_from_slice(&offset.0.to_be_bytes());
        let appended = self.file.push(&raw)?;
        self.check_invariants();
        Ok(appended)
    }

    /// The greatest entry whose timestamp is at most `target`; its offset is where a scan
    /// for the first record at or after `target` may start. Relative offset 0 if none.
    pub fn lookup(&self, target: i64) -> RelativeOffset {
        let n = self.file.partition_point(|raw| decode(raw).0 <= target);
        n.checked_sub(1)
            .map_or(RelativeOffset(0), |n| self.entry(n).1)
    }

    /// Drops every entry whose offset is at or past `offset`.
    pub fn truncate_to(&mut self, offset: RelativeOffset) {
        let keep = self.file.partition_point(|raw| decode(raw).1 < offset);
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
                debug_assert!(a.0 < b.0, "time index timestamps must increase");
                debug_assert!(a.1 <= b.1, "time index offsets must not decrease");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_the_greatest_timestamp_at_or_below() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut index =
            TimeIndex::open(&dir.path().join("0.timeindex"), 1200, false).expect("open");
        assert!(index.maybe_append(100, RelativeOffset(5)).expect("write"));
        assert!(
            !index.maybe_append(100, RelativeOffset(9)).expect("write"),
            "timestamps must grow"
        );
        assert!(index.maybe_append(200, RelativeOffset(9)).expect("write"));
        assert_eq!(index.lookup(50), RelativeOffset(0));
        assert_eq!(index.lookup(150), RelativeOffset(5));
        assert_eq!(index.lookup(250), RelativeOffset(9));
        index.trim().expect("trim");
        drop(index);
        let index = TimeIndex::open(&dir.path().join("0.timeindex"), 1200, true).expect("reopen");
        assert_eq!(index.last_entry(), Some((200, RelativeOffset(9))));
    }
}
