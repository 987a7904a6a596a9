//! The metadata state machine for openraft's `RaftStateMachine`: applies committed records
//! to the [`ClusterState`], publishes each new image, and keeps snapshots.
//!
//! On-disk format: `<log.dirs>/__cluster_metadata-0/snapshot.json`, the last snapshot (its
//! openraft meta and the state as JSON), written atomically and fsynced. The state itself
//! lives in memory: a restart loads the snapshot and re-applies the committed entries after
//! it. Thread safety: one mutex around the state, never held across an await.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use super::TypeConfig;
use crate::controller::publisher::Publisher;
use crate::controller::state::{ClusterState, RecordResult};
use crate::log::checkpoint::write_atomically;

const SNAPSHOT_FILE: &str = "snapshot.json";

type NodeId = u64;

/// A snapshot as stored on disk and sent to followers.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    state: ClusterState,
}

#[derive(Debug, Default)]
struct Inner {
    state: ClusterState,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    snapshot: Option<StoredSnapshot>,
    snapshots_built: u64,
}

/// The state machine; clones share the same state.
#[derive(Debug, Clone)]
pub struct StateMachineStore {
    dir: PathBuf,
    inner: Arc<Mutex<Inner>>,
    publisher: Arc<Publisher>,
}

fn io_error(path: &Path, error: impl std::fmt::Display) -> StorageError<NodeId> {
    tracing::error!(path = %path.display(), %error, "metadata snapshot I/O failed");
    StorageIOError::write_snapshot(
        None,
        &std::io::Error::other(format!("{}: {error}", path.display())),
    )
    .into()
}

impl StateMachineStore {
    /// Loads the last snapshot from `dir`, if any, and publishes its image.
    pub fn open(dir: &Path, publisher: Arc<Publisher>) -> Result<Self, StorageError<NodeId>> {
        let path = dir.join(SNAPSHOT_FILE);
        let snapshot: Option<StoredSnapshot> = match std::fs::read(&path) {
            Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| io_error(&path, e))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error(&path, e)),
        };
        let mut inner = Inner::default();
        if let Some(snapshot) = snapshot {
            inner.state = snapshot.state.clone();
            inner.last_applied = snapshot.meta.last_log_id;
            inner.membership = snapshot.meta.last_membership.clone();
            inner.snapshot = Some(snapshot);
        }
        let offset = inner.last_applied.map_or(0, |l| l.index);
        publisher.publish_state(&inner.state, offset);
        Ok(StateMachineStore {
            dir: dir.to_path_buf(),
            inner: Arc::new(Mutex::new(inner)),
            publisher,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the current state (the lock is held for the call: keep it short).
    pub fn with_state<T>(&self, f: impl FnOnce(&ClusterState) -> T) -> T {
        f(&self.lock().state)
    }

    /// A copy of the state with the offset it was applied up to, read together.
    pub fn state_and_offset(&self) -> (ClusterState, u64) {
        let inner = self.lock();
        (
            inner.state.clone(),
            inner.last_applied.map_or(0, |l| l.index),
        )
    }

    /// The voters of the last applied membership (empty before any).
    pub fn voter_ids(&self) -> Vec<u64> {
        self.lock().membership.voter_ids().collect()
    }

    /// The index of the last applied entry (0 before any).
    pub fn applied_offset(&self) -> u64 {
        self.lock().last_applied.map_or(0, |l| l.index)
    }

    fn save(&self, snapshot: &StoredSnapshot) -> Result<Vec<u8>, StorageError<NodeId>> {
        let path = self.dir.join(SNAPSHOT_FILE);
        let bytes = serde_json::to_vec(snapshot).map_err(|e| io_error(&path, e))?;
        write_atomically(&path, &bytes).map_err(|e| io_error(&path, e))?;
        Ok(bytes)
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let snapshot = {
            let mut inner = self.lock();
            inner.snapshots_built += 1;
            let id = match inner.last_applied {
                Some(last) => format!(
                    "{}-{}-{}",
                    last.leader_id, last.index, inner.snapshots_built
                ),
                None => format!("none-{}", inner.snapshots_built),
            };
            StoredSnapshot {
                meta: SnapshotMeta {
                    last_log_id: inner.last_applied,
                    last_membership: inner.membership.clone(),
                    snapshot_id: id,
                },
                state: inner.state.clone(),
            }
        };
        let bytes = self.save(&snapshot)?;
        let meta = snapshot.meta.clone();
        self.lock().snapshot = Some(snapshot);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let inner = self.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<RecordResult>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.lock();
        let mut results = Vec::new();
        for entry in entries {
            inner.last_applied = Some(entry.log_id);
            let result = match entry.payload {
                EntryPayload::Blank => RecordResult::Applied,
                EntryPayload::Normal(record) => {
                    let result = inner.state.apply(entry.log_id.index, &record);
                    if let RecordResult::Rejected { reason } = &result {
                        tracing::debug!(offset = entry.log_id.index, %reason, "metadata record rejected");
                    }
                    result
                }
                EntryPayload::Membership(membership) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), membership);
                    RecordResult::Applied
                }
            };
            results.push(result);
        }
        let offset = inner.last_applied.map_or(0, |l| l.index);
        self.publisher.publish_state(&inner.state, offset);
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let path = self.dir.join(SNAPSHOT_FILE);
        let received: StoredSnapshot =
            serde_json::from_slice(snapshot.get_ref()).map_err(|e| io_error(&path, e))?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            state: received.state,
        };
        self.save(&stored)?;
        let mut inner = self.lock();
        inner.state = stored.state.clone();
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.snapshot = Some(stored);
        let offset = inner.last_applied.map_or(0, |l| l.index);
        self.publisher.publish_state(&inner.state, offset);
        tracing::info!(offset, "installed a metadata snapshot from the leader");
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let Some(stored) = self.lock().snapshot.clone() else {
            return Ok(None);
        };
        let path = self.dir.join(SNAPSHOT_FILE);
        let bytes = serde_json::to_vec(&stored).map_err(|e| io_error(&path, e))?;
        Ok(Some(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}
