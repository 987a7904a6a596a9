//! A segment's aborted-transaction index (`.txnindex`, TransactionIndex in Apache Kafka):
//! one 34-byte big-endian entry per transaction aborted by a marker in the segment —
//! version (0), producer id, first offset, last offset (the ABORT marker's) and the last
//! stable offset when the marker was written. A read_committed fetch is told these so that
//! the consumer drops the aborted records; kept on disk, they need not be found again by
//! reading the log when it is opened.
//!
//! The file exists only once an entry is written (as in Kafka). Entries are appended in
//! marker order; a torn entry at the end (a crash mid-write) is ignored.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::LogError;

/// Bytes of one entry.
pub const ENTRY_SIZE: usize = 34;
const VERSION: i16 = 0;

/// A transaction that was aborted on this partition: its records in `first_offset ..
/// last_offset` (the marker's offset) are dropped by read_committed consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// One entry: an aborted transaction and the last stable offset after its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub transaction: AbortedTransaction,
    pub last_stable_offset: i64,
}

impl IndexEntry {
    /// The entry's 34 bytes.
    pub fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut bytes = [0u8; ENTRY_SIZE];
        bytes[0..2].copy_from_slice(&VERSION.to_be_bytes());
        bytes[2..10].copy_from_slice(&self.transaction.producer_id.to_be_bytes());
        bytes[10..18].copy_from_slice(&self.transaction.first_offset.to_be_bytes());
        bytes[18..26].copy_from_slice(&self.transaction.last_offset.to_be_bytes());
        bytes[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let int = |range: std::ops::Range<usize>| {
            i64::from_be_bytes(bytes[range].try_into().expect("eight bytes"))
        };
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        (version == VERSION).then(|| IndexEntry {
            transaction: AbortedTransaction {
                producer_id: int(2..10),
                first_offset: int(10..18),
                last_offset: int(18..26),
            },
            last_stable_offset: int(26..34),
        })
    }
}

/// The `.txnindex` of one segment.
#[derive(Debug)]
pub struct TxnIndex {
    path: PathBuf,
    /// Entries were written since the last fsync.
    unsynced: AtomicBool,
}

impl TxnIndex {
    /// The index at `path` (nothing is read or created yet).
    pub fn new(path: PathBuf) -> Self {
        TxnIndex {
            path,
            unsynced: AtomicBool::new(false),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry, in file order (none when the file does not exist).
    pub fn entries(&self) -> Result<Vec<IndexEntry>, LogError> {
        Ok(self.read()?.0)
    }

    /// The entries, and whether the file ends in a torn entry.
    fn read(&self) -> Result<(Vec<IndexEntry>, bool), LogError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
            Err(e) => return Err(LogError::io(&self.path, e)),
        };
        let torn = bytes.len() % ENTRY_SIZE != 0;
        if torn {
            tracing::warn!(file = %self.path.display(), bytes = bytes.len(),
                "transaction index ends in a torn entry: ignored");
        }
        let entries = bytes
            .chunks_exact(ENTRY_SIZE)
            .map(|chunk| {
                IndexEntry::decode(chunk).ok_or_else(|| LogError::CorruptFile {
                    path: self.path.clone(),
                    reason: "transaction index entry of an unknown version".into(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok((entries, torn))
    }

    /// Appends one entry (creating the file if needed); fsynced by [`TxnIndex::flush`].
    pub fn append(&self, entry: &IndexEntry) -> Result<(), LogError> {
        let io = |e| LogError::io(&self.path, e);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io)?;
        file.write_all(&entry.encode()).map_err(io)?;
        self.unsynced.store(true, Ordering::Release);
        Ok(())
    }

    /// Keeps only the entries whose marker lies before `offset` (after a truncation of the
    /// log, or before the entries from `offset` on are found again in the log).
    pub fn truncate_from(&self, offset: i64) -> Result<(), LogError> {
        let (entries, torn) = self.read()?;
        let kept = entries
            .iter()
            .take_while(|e| e.transaction.last_offset < offset)
            .count();
        if kept == entries.len() && !torn {
            return Ok(());
        }
        self.rewrite(&entries[..kept])
    }

    /// Replaces the file's entries by `entries` (the file is removed when there are none).
    pub fn rewrite(&self, entries: &[IndexEntry]) -> Result<(), LogError> {
        if entries.is_empty() {
            return super::checkpoint::remove_if_exists(&self.path);
        }
        let bytes: Vec<u8> = entries.iter().flat_map(IndexEntry::encode).collect();
        super::checkpoint::write_atomically(&self.path, &bytes)
    }

    /// The path to fsync for the entries appended since the last flush, if any (the
    /// caller syncs it: [`super::roll_sync::SegmentSync`]).
    pub fn take_unsynced(&self) -> Option<PathBuf> {
        self.unsynced
            .swap(false, Ordering::AcqRel)
            .then(|| self.path.clone())
    }

    /// Fsyncs the entries appended since the last flush.
    pub fn flush(&self) -> Result<(), LogError> {
        if !self.unsynced.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        File::open(&self.path)
            .and_then(|f| super::fsync::sync_all(&f))
            .map_err(|e| LogError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(producer_id: i64, first: i64, last: i64) -> IndexEntry {
        IndexEntry {
            transaction: AbortedTransaction {
                producer_id,
                first_offset: first,
                last_offset: last,
            },
            last_stable_offset: last + 1,
        }
    }

    /// Goal: entries survive a reopen in Kafka's 34-byte layout, a truncation keeps the
    /// markers before its offset, and a torn last entry is ignored. Method: append three,
    /// check the bytes of the first, truncate, then append half an entry by hand.
    #[test]
    fn entries_round_trip_truncate_and_ignore_a_torn_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = TxnIndex::new(dir.path().join("00000000000000000000.txnindex"));
        assert!(index.entries().expect("none").is_empty());
        for e in [entry(7, 0, 5), entry(8, 3, 9), entry(7, 10, 12)] {
            index.append(&e).expect("append");
        }
        index.flush().expect("flush");
        let bytes = std::fs::read(index.path()).expect("read");
        assert_eq!(bytes.len(), 3 * ENTRY_SIZE);
        assert_eq!(&bytes[0..2], &[0, 0], "version 0");
        assert_eq!(&bytes[2..10], &7i64.to_be_bytes(), "producer id");
        assert_eq!(&bytes[26..34], &6i64.to_be_bytes(), "last stable offset");
        let reopened = TxnIndex::new(index.path().to_path_buf());
        assert_eq!(reopened.entries().expect("read").len(), 3);
        reopened.truncate_from(9).expect("truncate");
        assert_eq!(reopened.entries().expect("read"), vec![entry(7, 0, 5)]);
        let mut file = OpenOptions::new()
            .append(true)
            .open(reopened.path())
            .expect("open");
        file.write_all(&entry(9, 1, 2).encode()[..20])
            .expect("torn");
        assert_eq!(reopened.entries().expect("read"), vec![entry(7, 0, 5)]);
        reopened.truncate_from(0).expect("truncate all");
        assert!(!reopened.path().exists(), "no entry, no file");
    }
}
