//! The Raft log of the metadata quorum on disk, for openraft's `RaftLogStorage`.
//!
//! On-disk format, in `<log.dirs>/__cluster_metadata-0/`:
//! - `raft.log`: entries appended in index order, each framed as a 4-byte big-endian
//!   length, a 4-byte CRC32C of the payload, then the payload (the entry as JSON). Every
//!   append is fsynced before openraft is told it is durable. A torn or corrupt tail (a
//!   crash mid-append) is cut off on open: such an entry was never acknowledged.
//! - `vote.json`: the last vote, written atomically and fsynced (Raft needs it durable).
//! - `purged.json`: the last log id removed from the front of the log.
//! - `committed.json`: the last known committed log id; only a hint that lets a restart
//!   re-apply committed entries at once, so it is written without fsync.
//!
//! Truncation and purging rewrite `raft.log` atomically (temporary file, fsync, rename).
//! Thread safety: one mutex around the files and the in-memory copy of the entries; it is
//! never held across an await (all I/O here is synchronous and short).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::TypeConfig;
use crate::log::checkpoint::write_atomically;
use crate::log::fsync;

const LOG_FILE: &str = "raft.log";
const VOTE_FILE: &str = "vote.json";
const PURGED_FILE: &str = "purged.json";
const COMMITTED_FILE: &str = "committed.json";
/// Bytes of a frame header: length and CRC32C.
const FRAME_HEADER_BYTES: usize = 8;
/// The largest entry accepted when reading the log back.
pub const ENTRY_BYTES_MAX: usize = 64 * 1024 * 1024;

type NodeId = u64;

#[derive(Debug)]
struct Files {
    dir: PathBuf,
    log: File,
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    purged: Option<LogId<NodeId>>,
}

/// The on-disk Raft log; clones share the same files.
#[derive(Debug, Clone)]
pub struct LogStore {
    files: Arc<Mutex<Files>>,
}

fn io_error(path: &Path, error: impl std::fmt::Display) -> StorageError<NodeId> {
    tracing::error!(path = %path.display(), %error, "metadata log I/O failed");
    StorageIOError::write_logs(&std::io::Error::other(format!(
        "{}: {error}",
        path.display()
    )))
    .into()
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StorageError<NodeId>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io_error(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, e)),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StorageError<NodeId>> {
    let bytes = serde_json::to_vec(value).map_err(|e| io_error(path, e))?;
    write_atomically(path, &bytes).map_err(|e| io_error(path, e))
}

/// Encodes one entry as a frame.
fn frame(entry: &Entry<TypeConfig>, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let payload = serde_json::to_vec(entry)?;
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
    out.extend_from_slice(&payload);
    Ok(())
}

/// Decodes the frames of `bytes`; returns the entries and the length of the valid prefix.
fn parse_frames(bytes: &[u8]) -> (Vec<Entry<TypeConfig>>, usize) {
    let mut entries = Vec::new();
    let mut position = 0;
    while bytes.len() - position >= FRAME_HEADER_BYTES {
        let header = &bytes[position..position + FRAME_HEADER_BYTES];
        let length = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let start = position + FRAME_HEADER_BYTES;
        if length > ENTRY_BYTES_MAX || bytes.len() - start < length {
            break;
        }
        let payload = &bytes[start..start + length];
        if crc32c::crc32c(payload) != crc {
            break;
        }
        match serde_json::from_slice(payload) {
            Ok(entry) => entries.push(entry),
            Err(_) => break,
        }
        position = start + length;
    }
    (entries, position)
}

fn open_append(path: &Path) -> Result<File, StorageError<NodeId>> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io_error(path, e))
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting off a torn tail.
    pub fn open(dir: &Path) -> Result<Self, StorageError<NodeId>> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        let path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_error(&path, e)),
        };
        let (entries, valid) = parse_frames(&bytes);
        if valid < bytes.len() {
            tracing::warn!(path = %path.display(), valid, length = bytes.len(),
                "metadata log has a torn or corrupt tail; cutting it off");
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| io_error(&path, e))?;
            file.set_len(valid as u64).map_err(|e| io_error(&path, e))?;
            fsync::sync_all(&file).map_err(|e| io_error(&path, e))?;
        }
        let files = Files {
            log: open_append(&path)?,
            entries: entries.into_iter().map(|e| (e.log_id.index, e)).collect(),
            vote: read_json(&dir.join(VOTE_FILE))?,
            committed: read_json(&dir.join(COMMITTED_FILE))?,
            purged: read_json(&dir.join(PURGED_FILE))?,
            dir: dir.to_path_buf(),
        };
        Ok(LogStore {
            files: Arc::new(Mutex::new(files)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether nothing was ever stored: no vote and no entry (a node to initialize).
    pub fn is_pristine(&self) -> bool {
        let files = self.lock();
        files.vote.is_none() && files.entries.is_empty() && files.purged.is_none()
    }
}

impl Files {
    /// Rewrites the log file with the entries in memory.
    fn rewrite(&mut self) -> Result<(), StorageError<NodeId>> {
        let path = self.dir.join(LOG_FILE);
        let mut bytes = Vec::new();
        for entry in self.entries.values() {
            frame(entry, &mut bytes).map_err(|e| io_error(&path, e))?;
        }
        write_atomically(&path, &bytes).map_err(|e| io_error(&path, e))?;
        self.log = open_append(&path)?;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let files = self.lock();
        Ok(files.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let files = self.lock();
        let last = files.entries.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: files.purged,
            last_log_id: last.or(files.purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut files = self.lock();
        write_json(&files.dir.join(VOTE_FILE), vote)?;
        files.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.lock().vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut files = self.lock();
        let path = files.dir.join(COMMITTED_FILE);
        let bytes = serde_json::to_vec(&committed).map_err(|e| io_error(&path, e))?;
        // A hint only (see the module docs): no fsync.
        std::fs::write(&path, bytes).map_err(|e| io_error(&path, e))?;
        files.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut files = self.lock();
        let path = files.dir.join(LOG_FILE);
        let mut bytes = Vec::new();
        let mut appended = Vec::new();
        for entry in entries {
            frame(&entry, &mut bytes).map_err(|e| io_error(&path, e))?;
            appended.push(entry);
        }
        let written = files
            .log
            .write_all(&bytes)
            .and_then(|()| fsync::sync_data(&files.log));
        if let Err(error) = written {
            let failure = io_error(&path, &error);
            callback.log_io_completed(Err(error));
            return Err(failure);
        }
        for entry in appended {
            files.entries.insert(entry.log_id.index, entry);
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut files = self.lock();
        files.entries.split_off(&log_id.index);
        files.rewrite()
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut files = self.lock();
        write_json(&files.dir.join(PURGED_FILE), &log_id)?;
        files.purged = Some(log_id);
        let kept = files.entries.split_off(&(log_id.index + 1));
        files.entries = kept;
        files.rewrite()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    #[test]
    fn a_torn_tail_is_cut_at_the_last_whole_entry() {
        let mut bytes = Vec::new();
        frame(&entry(1), &mut bytes).expect("frame");
        let whole = bytes.len();
        frame(&entry(2), &mut bytes).expect("frame");
        bytes.truncate(bytes.len() - 3);
        let (entries, valid) = parse_frames(&bytes);
        assert_eq!(entries.len(), 1);
        assert_eq!(valid, whole);
    }

    #[test]
    fn a_corrupt_entry_ends_the_log() {
        let mut bytes = Vec::new();
        frame(&entry(1), &mut bytes).expect("frame");
        frame(&entry(2), &mut bytes).expect("frame");
        let last = bytes.len() - 2;
        bytes[last] ^= 0xff;
        let (entries, _) = parse_frames(&bytes);
        assert_eq!(entries.len(), 1);
    }
}
