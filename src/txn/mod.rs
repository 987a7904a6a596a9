//! The transaction coordinator (KIP-98): transactional ids and their transactions, kept in
//! the internal compacted topic `__transaction_state`. An id belongs to partition
//! `abs(java hashCode(id)) % transaction.state.log.num.partitions`, and the broker leading
//! that partition coordinates it: it replays the partition when it becomes leader
//! (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and writes every state change there, waiting
//! for its replication, before applying it and answering.
//!
//! Markers, timeouts and the requests are driven from `api/` (they need the other
//! brokers); this module holds the state and its log.
//!
//! Must not: choose Kafka error codes (see `api/errors.rs`), hold a shard lock across an
//! `.await`.

pub mod config;
pub mod error;
pub mod records;
pub mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use dashmap::DashMap;
use tokio::sync::{mpsc, oneshot};

pub use config::TxnConfig;
pub use error::TxnError;
use records::TransactionRecord;
pub use state::{EndPlan, InitPlan, TransactionMetadata, TxnPartition, TxnState};

use crate::metadata::MetadataImage;
use crate::replica::journal::{self, Entry};
use crate::replica::ReplicaManager;

/// The internal topic holding transaction state.
pub const TRANSACTION_TOPIC: &str = "__transaction_state";

/// Longest transactional id accepted (stored as an int16-length string).
const TRANSACTIONAL_ID_LENGTH_MAX: usize = i16::MAX as usize;

/// The transactional ids whose coordinator is one `__transaction_state` partition.
#[derive(Debug)]
pub struct TxnShard {
    pub partition: i32,
    /// The partition's leader epoch when this broker took it over: stamped on markers, so
    /// that partitions refuse those of a deposed coordinator.
    pub coordinator_epoch: i32,
    pub loaded: bool,
    pub transactions: HashMap<String, TransactionMetadata>,
}

/// The transaction coordinator of this broker.
#[derive(Debug)]
pub struct TransactionCoordinator {
    pub config: TxnConfig,
    node_id: i32,
    shards: DashMap<i32, Arc<Mutex<TxnShard>>>,
    load_queue: mpsc::UnboundedSender<i32>,
    load_receiver: Mutex<Option<mpsc::UnboundedReceiver<i32>>>,
    /// Decided transactions whose markers the background task writes.
    finish_queue: mpsc::UnboundedSender<Finish>,
    finish_receiver: Mutex<Option<mpsc::UnboundedReceiver<Finish>>>,
}

/// A decided transaction to finish (markers, then its completion), and whom to tell.
#[derive(Debug)]
pub struct Finish {
    pub transition: Transition,
    pub done: Option<oneshot::Sender<()>>,
}

/// A state change decided under the shard's lock, to be written before it applies.
#[derive(Debug)]
pub struct Transition {
    pub partition: i32,
    pub coordinator_epoch: i32,
    pub next: TransactionMetadata,
}

impl TransactionCoordinator {
    /// A coordinator that leads no partition yet.
    pub fn new(config: TxnConfig, node_id: i32) -> Self {
        let (load_queue, load_receiver) = mpsc::unbounded_channel();
        let (finish_queue, finish_receiver) = mpsc::unbounded_channel();
        TransactionCoordinator {
            config,
            node_id,
            shards: DashMap::new(),
            load_queue,
            load_receiver: Mutex::new(Some(load_receiver)),
            finish_queue,
            finish_receiver: Mutex::new(Some(finish_receiver)),
        }
    }

    /// The `__transaction_state` partition of `transactional_id`.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        crate::group::partition_for(transactional_id, self.config.partitions)
    }

    /// Follows a new metadata image: partitions of `__transaction_state` led here get a
    /// shard, queued for loading (again when the leader epoch moved); others are dropped.
    pub fn on_image(&self, image: &MetadataImage) {
        let led: HashMap<i32, i32> = match image.topic(TRANSACTION_TOPIC) {
            Some(topic) => (0..topic.partition_count())
                .filter_map(|p| topic.partition(p).map(|image| (p, image)))
                .filter(|(_, image)| image.leader == self.node_id)
                .map(|(p, image)| (p, image.leader_epoch))
                .collect(),
            None => HashMap::new(),
        };
        self.shards.retain(|partition, shard| {
            let keep = led.get(partition) == Some(&lock(shard).coordinator_epoch);
            if !keep {
                tracing::info!(
                    partition,
                    "no longer coordinator of __transaction_state-{partition} at this epoch"
                );
            }
            keep
        });
        for (partition, coordinator_epoch) in led {
            if self.shards.contains_key(&partition) {
                continue;
            }
            let shard = TxnShard {
                partition,
                coordinator_epoch,
                loaded: false,
                transactions: HashMap::new(),
            };
            self.shards.insert(partition, Arc::new(Mutex::new(shard)));
            let _ = self.load_queue.send(partition);
        }
    }

    /// The partition loads queued by [`TransactionCoordinator::on_image`] (taken once, by
    /// the task that loads them).
    pub fn take_loads(&self) -> Option<mpsc::UnboundedReceiver<i32>> {
        lock(&self.load_receiver).take()
    }

    /// The decided transactions queued by [`TransactionCoordinator::finish`] (taken once).
    pub fn take_finishes(&self) -> Option<mpsc::UnboundedReceiver<Finish>> {
        lock(&self.finish_receiver).take()
    }

    /// Queues a decided transaction for its markers; the receiver (if any) hears when it
    /// is complete.
    pub fn finish(&self, transition: Transition) -> oneshot::Receiver<()> {
        let (done, receiver) = oneshot::channel();
        let finish = Finish {
            transition,
            done: Some(done),
        };
        if self.finish_queue.send(finish).is_err() {
            tracing::error!("transaction marker task is not running");
        }
        receiver
    }

    /// Whether `transition` is still the state of its transaction here (this broker still
    /// coordinates it, at the same epoch, and nothing else changed it).
    pub fn is_current(&self, transition: &Transition) -> bool {
        let id = &transition.next.transactional_id;
        let Some(shard) = self
            .shards
            .get(&transition.partition)
            .map(|s| Arc::clone(&s))
        else {
            return false;
        };
        let shard = lock(&shard);
        shard.coordinator_epoch == transition.coordinator_epoch
            && shard.transactions.get(id).is_some_and(|m| {
                m.state == transition.next.state
                    && m.producer_epoch == transition.next.producer_epoch
            })
    }

    /// The loaded shard of `transactional_id`, or why there is none.
    fn shard(&self, transactional_id: &str) -> Result<Arc<Mutex<TxnShard>>, TxnError> {
        if transactional_id.is_empty() || transactional_id.len() > TRANSACTIONAL_ID_LENGTH_MAX {
            return Err(TxnError::InvalidTransactionalId {
                transactional_id: transactional_id.to_string(),
            });
        }
        let partition = self.partition_for(transactional_id);
        let Some(shard) = self.shards.get(&partition).map(|s| Arc::clone(&s)) else {
            return Err(TxnError::NotCoordinator {
                transactional_id: transactional_id.to_string(),
                partition,
            });
        };
        if !lock(&shard).loaded {
            return Err(TxnError::CoordinatorLoadInProgress {
                transactional_id: transactional_id.to_string(),
                partition,
            });
        }
        Ok(shard)
    }

    /// The state of `transactional_id` (None: not known) and its coordinator epoch.
    pub fn get(
        &self,
        transactional_id: &str,
    ) -> Result<(Option<TransactionMetadata>, i32), TxnError> {
        let shard = self.shard(transactional_id)?;
        let shard = lock(&shard);
        let found = shard.transactions.get(transactional_id).cloned();
        Ok((found, shard.coordinator_epoch))
    }

    /// Decides a change of `transactional_id` with `decide` (given its current state),
    /// marks it pending, writes it and waits for its replication, then applies it.
    /// Returns `decide`'s result and the state now in force (None if nothing changed).
    pub async fn transition<T>(
        &self,
        replicas: &ReplicaManager,
        transactional_id: &str,
        decide: impl FnOnce(
            Option<&TransactionMetadata>,
        ) -> Result<(T, Option<TransactionMetadata>), TxnError>,
    ) -> Result<(T, Option<Transition>), TxnError> {
        let shard = self.shard(transactional_id)?;
        let (result, transition, written) = {
            let mut guard = lock(&shard);
            let current = guard.transactions.get(transactional_id);
            let (result, next) = decide(current)?;
            let Some(mut next) = next else {
                return Ok((result, None));
            };
            next.pending = None;
            // A Dead id is written as a tombstone: the topic's compaction forgets it.
            let record = TransactionRecord {
                transactional_id: transactional_id.to_string(),
                metadata: Some(next.clone()).filter(|m| m.state != TxnState::Dead),
            };
            let written = journal::write(
                replicas,
                (TRANSACTION_TOPIC, guard.partition),
                &[record.encode()],
                None,
            )
            .map_err(|e| TxnError::storage(transactional_id, &e))?;
            let mut marked = guard
                .transactions
                .get(transactional_id)
                .cloned()
                .unwrap_or_else(|| next.clone());
            marked.pending = Some(next.state);
            guard
                .transactions
                .insert(transactional_id.to_string(), marked);
            let transition = Transition {
                partition: guard.partition,
                coordinator_epoch: guard.coordinator_epoch,
                next,
            };
            (result, transition, written)
        };
        let replicated = written.replicated(self.config.write_timeout).await;
        let mut guard = lock(&shard);
        if !replicated {
            // The write may still commit later (a new leader replays it); until then the
            // old state stands here, without its pending mark.
            if let Some(current) = guard.transactions.get_mut(transactional_id) {
                current.pending = None;
            }
            return Err(TxnError::Timeout {
                transactional_id: transactional_id.to_string(),
                timeout_ms: self.config.write_timeout.as_millis() as u64,
            });
        }
        match transition.next.state {
            TxnState::Dead => guard.transactions.remove(transactional_id),
            _ => guard
                .transactions
                .insert(transactional_id.to_string(), transition.next.clone()),
        };
        Ok((result, Some(transition)))
    }

    /// Replays `__transaction_state-{partition}`; returns the transactions that were
    /// deciding (their markers must be written again by the new coordinator).
    pub async fn load(&self, replicas: &ReplicaManager, partition: i32) -> Vec<Transition> {
        let started = std::time::Instant::now();
        let entries = match journal::read_all(replicas, (TRANSACTION_TOPIC, partition)).await {
            Ok(entries) => entries,
            Err(error) => {
                tracing::error!(partition, %error, "cannot load __transaction_state partition");
                return Vec::new();
            }
        };
        let Some(shard) = self.shards.get(&partition).map(|s| Arc::clone(&s)) else {
            return Vec::new();
        };
        let mut shard = lock(&shard);
        for entry in entries {
            let Entry::Record { key, value, .. } = entry else {
                continue;
            };
            match TransactionRecord::decode(&key, value.as_deref()) {
                Ok(Some(record)) => match record.metadata {
                    Some(metadata) => {
                        shard.transactions.insert(record.transactional_id, metadata);
                    }
                    None => {
                        shard.transactions.remove(&record.transactional_id);
                    }
                },
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(partition, %error, "skipping an undecodable transaction record")
                }
            }
        }
        shard.loaded = true;
        tracing::info!(
            partition,
            transactions = shard.transactions.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded __transaction_state partition"
        );
        let coordinator_epoch = shard.coordinator_epoch;
        shard
            .transactions
            .values()
            .filter(|m| m.state.is_preparing())
            .map(|m| Transition {
                partition,
                coordinator_epoch,
                next: m.clone(),
            })
            .collect()
    }

    /// Transactional ids whose open transaction has outlived its timeout.
    pub fn timed_out(&self, now_ms: i64) -> Vec<String> {
        let mut expired = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(&shard);
            if !shard.loaded {
                continue;
            }
            expired.extend(
                shard
                    .transactions
                    .values()
                    .filter(|m| m.timed_out(now_ms).is_some())
                    .map(|m| m.transactional_id.clone()),
            );
        }
        expired
    }

    /// Transactional ids idle past `transactional.id.expiration.ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<String> {
        let expiration_ms = self.config.id_expiration_ms;
        let mut expired = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(&shard);
            if shard.loaded {
                expired.extend(
                    shard
                        .transactions
                        .values()
                        .filter(|m| m.expired(now_ms, expiration_ms).is_some())
                        .map(|m| m.transactional_id.clone()),
                );
            }
        }
        expired
    }

    /// Every transaction of every loaded shard (ListTransactions).
    pub fn all(&self) -> Vec<TransactionMetadata> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(&shard);
            all.extend(shard.transactions.values().cloned());
        }
        all
    }
}

/// Locks a shard; a poisoned lock still yields the state, which every change leaves
/// consistent before it can panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
