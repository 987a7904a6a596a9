//! The cleaner's map from a key's digest to the last offset at which the key was written in
//! the dirty part of a log (SkimpyOffsetMap in Apache Kafka). Keys are not stored: a 128-bit
//! digest (two independently seeded SipHash values) stands for each, so memory is bounded by
//! the number of distinct keys, and that number by `entries_max`.
//!
//! Invariant: `latest_offset` is at least every offset in the map.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

/// Bytes one entry costs, counted against `log.cleaner.dedupe.buffer.size` (16-byte digest,
/// 8-byte offset, and the hash table's own overhead).
pub const ENTRY_BYTES: usize = 32;

/// Digest → latest offset, with a fixed capacity.
#[derive(Debug)]
pub struct OffsetMap {
    seeds: (RandomState, RandomState),
    offsets: HashMap<u128, i64>,
    entries_max: usize,
    /// The last offset whose batch was fully read into the map (-1 when none).
    latest_offset: i64,
}

impl OffsetMap {
    /// An empty map that holds at most `entries_max` keys (at least one).
    pub fn new(entries_max: usize) -> Self {
        OffsetMap {
            seeds: (RandomState::new(), RandomState::new()),
            offsets: HashMap::new(),
            entries_max: entries_max.max(1),
            latest_offset: -1,
        }
    }

    fn digest(&self, key: &[u8]) -> u128 {
        let high = self.seeds.0.hash_one(key);
        let low = self.seeds.1.hash_one(key);
        (u128::from(high) << 64) | u128::from(low)
    }

    /// The most keys the map may hold.
    pub fn capacity(&self) -> usize {
        self.entries_max
    }

    /// Records that `key` was written at `offset` (offsets are put in increasing order).
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let digest = self.digest(key);
        self.offsets.insert(digest, offset);
    }

    /// The last offset recorded for `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.offsets.get(&self.digest(key)).copied()
    }

    /// Marks every offset up to `offset` as read.
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    /// The last offset read into the map; records after it are not covered by the map.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Number of distinct keys.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether no key is recorded.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_per_key() {
        let mut map = OffsetMap::new(2);
        map.put(b"a", 1);
        map.put(b"b", 2);
        map.put(b"a", 3);
        assert_eq!(map.get(b"a"), Some(3));
        assert_eq!(map.get(b"b"), Some(2));
        assert_eq!(map.get(b"c"), None);
        assert_eq!(map.len(), 2, "one entry per distinct key");
        assert_eq!(map.capacity(), 2);
    }
}
