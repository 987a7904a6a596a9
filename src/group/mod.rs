//! The group coordinator: consumer groups and their committed offsets, kept in the internal
//! compacted topic `__consumer_offsets`. A group belongs to partition
//! `abs(java hashCode(group id)) % offsets.topic.num.partitions`, and the broker leading
//! that partition is its coordinator: it replays the partition into a [`Shard`] when it
//! becomes leader (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and writes every change to it
//! before answering.
//!
//! Must not: choose Kafka error codes (see `api/errors.rs`), hold a shard lock across an
//! `.await`.

pub mod classic;
pub mod config;
pub mod consumer;
pub mod error;
pub mod journal;
mod membership;
mod offsets;
pub mod records;
pub mod shard;
pub mod subscription;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use dashmap::DashMap;
use tokio::sync::{mpsc, Notify};
use tokio::time::{Duration, Instant};

pub use classic::{JoinRequest, JoinResponse, LeavingMember, Reply, SyncRequest, SyncResponse};
pub use config::GroupConfig;
pub use consumer::{ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResponse};
pub use error::GroupError;
pub use membership::{DescribedMember, GroupDescription};
pub use offsets::{Committer, OffsetCommit, PartitionResults};
pub use records::{CommittedOffset, CoordinatorRecord};
use shard::{Group, Shard, TopicPartition};

use crate::metadata::MetadataImage;
use crate::replica::journal::TxnProducer;
use crate::replica::ReplicaManager;

/// The internal topic holding offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// How often group timers (sessions, join deadlines) run while any group has members.
const TICK_INTERVAL: Duration = Duration::from_millis(100);

/// Longest group id accepted (Kafka stores it as an int16-length string).
const GROUP_ID_LENGTH_MAX: usize = i16::MAX as usize;

/// A group as ListGroups reports it.
#[derive(Debug, Clone)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
    pub group_type: &'static str,
}

/// The group coordinator of this broker.
#[derive(Debug)]
pub struct GroupCoordinator {
    pub config: GroupConfig,
    node_id: i32,
    /// Shards of the `__consumer_offsets` partitions this broker leads.
    shards: DashMap<i32, Arc<Mutex<Shard>>>,
    /// Partitions waiting to be loaded by [`GroupCoordinator::run`].
    load_queue: mpsc::UnboundedSender<i32>,
    load_receiver: Mutex<Option<mpsc::UnboundedReceiver<i32>>>,
    /// Wakes the timer loop when a group gets members.
    wake: Notify,
}

/// Kafka's partition for a group: Java's `String.hashCode` over UTF-16 code units, sign
/// bit cleared, modulo the partition count.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    (hash & 0x7fff_ffff) % partitions.max(1)
}

impl GroupCoordinator {
    /// A coordinator that leads no partition yet.
    pub fn new(config: GroupConfig, node_id: i32) -> Self {
        let (load_queue, load_receiver) = mpsc::unbounded_channel();
        GroupCoordinator {
            config,
            node_id,
            shards: DashMap::new(),
            load_queue,
            load_receiver: Mutex::new(Some(load_receiver)),
            wake: Notify::new(),
        }
    }

    /// The `__consumer_offsets` partition of `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.config.offsets_partitions)
    }

    /// Follows a new metadata image: partitions of `__consumer_offsets` led here get a
    /// shard, queued for loading; shards of partitions led elsewhere now are dropped.
    pub fn on_image(&self, image: &MetadataImage) {
        let led: Vec<i32> = match image.topic(OFFSETS_TOPIC) {
            Some(topic) => (0..topic.partition_count())
                .filter(|p| {
                    topic
                        .partition(*p)
                        .is_some_and(|p| p.leader == self.node_id)
                })
                .collect(),
            None => Vec::new(),
        };
        self.shards.retain(|partition, shard| {
            let keep = led.contains(partition);
            if !keep {
                tracing::info!(
                    partition,
                    "no longer coordinator of __consumer_offsets-{partition}"
                );
                lock(shard).groups.clear();
            }
            keep
        });
        for partition in led {
            if self.shards.contains_key(&partition) {
                continue;
            }
            self.shards
                .insert(partition, Arc::new(Mutex::new(Shard::new(partition))));
            let _ = self.load_queue.send(partition);
        }
    }

    /// The loaded shard of `group_id`, or why there is none.
    fn shard(&self, group_id: &str) -> Result<Arc<Mutex<Shard>>, GroupError> {
        if group_id.is_empty() || group_id.len() > GROUP_ID_LENGTH_MAX {
            return Err(GroupError::InvalidGroupId {
                group: group_id.to_string(),
            });
        }
        let partition = self.partition_for(group_id);
        let Some(shard) = self.shards.get(&partition).map(|s| Arc::clone(&s)) else {
            return Err(GroupError::NotCoordinator {
                group: group_id.to_string(),
                partition,
            });
        };
        if !lock(&shard).loaded {
            return Err(GroupError::CoordinatorLoadInProgress {
                group: group_id.to_string(),
                partition,
            });
        }
        Ok(shard)
    }

    /// Runs `f` on the group `group_id` (created empty if missing, dropped again if `f`
    /// left it blank) under its shard's lock, then writes the records `f` returned and
    /// those the change queued. Returns `f`'s result and where the records end, for the
    /// caller to wait for their replication.
    fn with_group<T>(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        f: impl FnOnce(
            &mut Group,
            &GroupConfig,
            Instant,
        ) -> Result<(T, Vec<CoordinatorRecord>), GroupError>,
    ) -> Result<(T, journal::Written), GroupError> {
        self.with_group_as(replicas, group_id, None, f)
    }

    /// [`GroupCoordinator::with_group`] for a transactional producer's change (a
    /// TxnOffsetCommit): the offsets `f` returns are written in a transactional batch
    /// and held pending until the producer's marker.
    fn with_group_as<T>(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        producer: Option<TxnProducer>,
        f: impl FnOnce(
            &mut Group,
            &GroupConfig,
            Instant,
        ) -> Result<(T, Vec<CoordinatorRecord>), GroupError>,
    ) -> Result<(T, journal::Written), GroupError> {
        let shard = self.shard(group_id)?;
        let mut shard = lock(&shard);
        let now = Instant::now();
        let result = f(shard.group_or_new(group_id), &self.config, now);
        shard.drop_if_blank(group_id);
        let mut records = match &result {
            Ok((_, records)) => records.clone(),
            Err(_) => Vec::new(),
        };
        if let Some(producer) = producer {
            let written = journal::write_as(
                replicas,
                shard.partition,
                group_id,
                &records,
                Some(producer),
            )?;
            for record in records {
                if let CoordinatorRecord::Offset(key, Some(value)) = record {
                    shard
                        .pending_txn_offsets
                        .entry(producer.producer_id.0)
                        .or_default()
                        .push((key, value));
                }
            }
            return Ok((result?.0, written));
        }
        records.extend(shard.take_records());
        let written = journal::write(replicas, shard.partition, group_id, &records)?;
        let has_timers = shard.has_timers();
        drop(shard);
        if has_timers {
            self.wake.notify_one();
        }
        Ok((result?.0, written))
    }

    /// A producer's transaction ended on `__consumer_offsets-{partition}` (its marker was
    /// written there): its transactional offset commits apply or go.
    pub fn complete_transaction(&self, partition: i32, producer_id: i64, commit: bool) {
        if let Some(shard) = self.shards.get(&partition).map(|s| Arc::clone(&s)) {
            lock(&shard).complete_transaction(producer_id, commit);
        }
    }

    /// Whether `group_id` has a transactional offset commit for `topic-partition` that
    /// awaits its marker.
    pub fn has_pending_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let shard = self
            .shards
            .get(&self.partition_for(group_id))
            .map(|s| Arc::clone(&s));
        shard.is_some_and(|s| lock(&s).has_pending_offset(group_id, topic, partition))
    }

    /// The committed offset of every (group, partition) this broker coordinates.
    pub fn committed_offsets(&self) -> Vec<(String, TopicPartition, i64)> {
        let mut committed = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(&shard);
            for group in shard.groups.values() {
                committed.extend(
                    group
                        .offsets
                        .iter()
                        .map(|(tp, c)| (group.id.clone(), tp.clone(), c.offset)),
                );
            }
        }
        committed
    }

    /// Every group of every loaded shard, filtered by state and type names (lower case
    /// comparisons, as Kafka's ListGroups does; empty filters match all).
    pub fn list_groups(&self, states: &[String], types: &[String]) -> Vec<GroupListing> {
        let mut listings = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(&shard);
            for group in shard.groups.values() {
                let state = group.state_name();
                let group_type = group.type_name();
                let state_ok =
                    states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(state));
                let type_ok =
                    types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(group_type));
                if state_ok && type_ok {
                    listings.push(GroupListing {
                        group_id: group.id.clone(),
                        protocol_type: group.protocol_type(),
                        state,
                        group_type,
                    });
                }
            }
        }
        listings
    }

    /// Runs the coordinator's background work until the process ends: loads shards as
    /// partitions are led here, runs group timers and expires old offsets.
    pub async fn run(&self, replicas: &ReplicaManager) {
        let Some(mut loads) = lock(&self.load_receiver).take() else {
            tracing::error!("group coordinator background task started twice");
            return;
        };
        let mut retention = tokio::time::interval(self.config.offsets_retention_check_interval);
        retention.tick().await;
        loop {
            let busy = self.shards.iter().any(|s| lock(&s).has_timers());
            let tick = async {
                match busy {
                    true => tokio::time::sleep(TICK_INTERVAL).await,
                    false => self.wake.notified().await,
                }
            };
            tokio::select! {
                Some(partition) = loads.recv() => self.load(replicas, partition).await,
                _ = tick => self.tick(replicas),
                _ = retention.tick() => self.expire_offsets(replicas),
            }
        }
    }

    fn tick(&self, replicas: &ReplicaManager) {
        let now = Instant::now();
        for shard in self.shards.iter() {
            let mut shard = lock(&shard);
            shard.tick(&self.config, now);
            let records = shard.take_records();
            if let Err(error) = journal::write(replicas, shard.partition, "", &records) {
                tracing::error!(partition = shard.partition, %error, "cannot persist group changes");
            }
        }
    }

    fn expire_offsets(&self, replicas: &ReplicaManager) {
        let now_ms = crate::clock::system_now_ms();
        for shard in self.shards.iter() {
            let mut shard = lock(&shard);
            let records = shard.expire_offsets(self.config.offsets_retention_ms, now_ms);
            if let Err(error) = journal::write(replicas, shard.partition, "", &records) {
                tracing::error!(partition = shard.partition, %error, "cannot persist expired offsets");
            }
        }
    }

    async fn load(&self, replicas: &ReplicaManager, partition: i32) {
        let started = std::time::Instant::now();
        let records = match journal::read_all(replicas, partition).await {
            Ok(records) => records,
            Err(error) => {
                tracing::error!(partition, %error, "cannot load __consumer_offsets partition");
                return;
            }
        };
        let Some(shard) = self.shards.get(&partition).map(|s| Arc::clone(&s)) else {
            return;
        };
        let mut shard = lock(&shard);
        let now = Instant::now();
        let count = records.len();
        for record in records {
            shard.replay_loaded(record, now);
        }
        shard.loaded = true;
        tracing::info!(
            partition,
            records = count,
            groups = shard.groups.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded __consumer_offsets partition"
        );
        drop(shard);
        self.wake.notify_one();
    }
}

/// Locks a shard; a poisoned lock (a panic elsewhere) still yields the state, which every
/// change leaves consistent before it can panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Groups with offsets per topic, for OffsetFetch of all topics.
pub type OffsetsByTopic = HashMap<String, Vec<(i32, CommittedOffset)>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_kafkas_java_hash() {
        // Java: "my-group".hashCode() = -1906497762; & 0x7fffffff = 240985886; % 50 = 36.
        assert_eq!(partition_for("my-group", 50), 36);
        assert_eq!(partition_for("", 50), 0);
    }
}
