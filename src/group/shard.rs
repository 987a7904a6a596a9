//! The groups whose coordinator is one `__consumer_offsets` partition: their membership
//! and committed offsets, rebuilt by replaying the partition's records and changed only
//! under the shard's lock, so the log holds the changes in the order they were made.
//!
//! Must not: do I/O. Changes queue records that the coordinator writes.

use std::collections::{BTreeMap, HashMap};

use tokio::time::Instant;

use super::classic::{ClassicGroup, State};
use super::consumer::ConsumerGroup;
use super::error::GroupError;
use super::records::{CommittedOffset, CoordinatorRecord, OffsetKey};
use super::GroupConfig;

/// A topic-partition of committed offsets.
pub type TopicPartition = (String, i32);

/// Which protocol a group's members speak.
#[derive(Debug)]
pub enum Membership {
    /// JoinGroup/SyncGroup members (or none: a group that only holds offsets).
    Classic(ClassicGroup),
    /// KIP-848 members (ConsumerGroupHeartbeat); the coordinator assigns partitions.
    Consumer(ConsumerGroup),
}

/// One group: its members and its committed offsets.
#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub membership: Membership,
    pub offsets: BTreeMap<TopicPartition, CommittedOffset>,
}

impl Group {
    fn new(id: &str) -> Self {
        Group {
            id: id.to_string(),
            membership: Membership::Classic(ClassicGroup::new(id)),
            offsets: BTreeMap::new(),
        }
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        match &self.membership {
            Membership::Classic(group) => group.is_empty(),
            Membership::Consumer(group) => group.is_empty(),
        }
    }

    /// The state name DescribeGroups and ListGroups report.
    pub fn state_name(&self) -> &'static str {
        match &self.membership {
            Membership::Classic(group) => group.state.name(),
            Membership::Consumer(group) => group.state_name(),
        }
    }

    /// The group type ListGroups v5 reports.
    pub fn type_name(&self) -> &'static str {
        match &self.membership {
            Membership::Classic(_) => "classic",
            Membership::Consumer(_) => "consumer",
        }
    }

    /// The protocol type ListGroups reports ("consumer" for KIP-848 groups).
    pub fn protocol_type(&self) -> String {
        match &self.membership {
            Membership::Classic(group) => group.protocol_type.clone().unwrap_or_default(),
            Membership::Consumer(_) => "consumer".to_string(),
        }
    }

    /// Topics some member is subscribed to, when that can be known.
    pub fn subscribed_topics(&self) -> Option<Vec<String>> {
        match &self.membership {
            Membership::Classic(group) => group.subscribed_topics(),
            Membership::Consumer(group) => Some(group.subscribed_topics()),
        }
    }

    /// Records the group's changes queued for persistence.
    fn take_records(&mut self) -> Vec<CoordinatorRecord> {
        match &mut self.membership {
            Membership::Classic(group) => std::mem::take(&mut group.records),
            Membership::Consumer(group) => std::mem::take(&mut group.records),
        }
    }
}

/// The groups of one `__consumer_offsets` partition.
#[derive(Debug)]
pub struct Shard {
    pub partition: i32,
    /// Whether the partition's records have been replayed (requests wait for it).
    pub loaded: bool,
    pub groups: HashMap<String, Group>,
    /// Transactional offset commits (TxnOffsetCommit) per producer id, applied when the
    /// producer's COMMIT marker reaches this partition and dropped on ABORT (KIP-98).
    pub pending_txn_offsets: HashMap<i64, Vec<(OffsetKey, CommittedOffset)>>,
}

impl Shard {
    /// An empty shard, not yet loaded.
    pub fn new(partition: i32) -> Self {
        Shard {
            partition,
            loaded: false,
            groups: HashMap::new(),
            pending_txn_offsets: HashMap::new(),
        }
    }

    /// Applies one record or marker read back from the partition: a transactional
    /// record waits for its producer's marker.
    pub fn replay_loaded(&mut self, loaded: super::journal::Loaded, now: Instant) {
        use super::journal::Loaded;
        match loaded {
            Loaded::Record(CoordinatorRecord::Offset(key, Some(value)), Some(producer_id)) => {
                self.pending_txn_offsets
                    .entry(producer_id)
                    .or_default()
                    .push((key, value));
            }
            Loaded::Record(record, _) => self.replay(record, now),
            Loaded::Marker {
                producer_id,
                commit,
            } => self.complete_transaction(producer_id, commit),
        }
    }

    /// A producer's transaction ended on this partition: its pending offsets become the
    /// committed ones (COMMIT) or are forgotten (ABORT).
    pub fn complete_transaction(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn_offsets.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (key, value) in pending {
            let group = self.group_or_new(&key.group);
            group.offsets.insert((key.topic, key.partition), value);
        }
    }

    /// Whether a transactional offset commit of `group` for `topic-partition` awaits its
    /// marker (OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT then).
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.pending_txn_offsets
            .values()
            .flatten()
            .any(|(key, _)| key.group == group && key.topic == topic && key.partition == partition)
    }

    /// Applies one record read back from the partition.
    pub fn replay(&mut self, record: CoordinatorRecord, now: Instant) {
        match record {
            CoordinatorRecord::Offset(key, Some(value)) => {
                let group = self.group_or_new(&key.group);
                group.offsets.insert((key.topic, key.partition), value);
            }
            CoordinatorRecord::Offset(key, None) => {
                if let Some(group) = self.groups.get_mut(&key.group) {
                    group.offsets.remove(&(key.topic, key.partition));
                }
            }
            CoordinatorRecord::Group(id, Some(stored)) => {
                let group = self.group_or_new(&id);
                group.membership = Membership::Classic(ClassicGroup::restore(&id, &stored, now));
            }
            CoordinatorRecord::Group(id, None) => {
                self.groups.remove(&id);
            }
            CoordinatorRecord::ConsumerGroup(id, Some(epoch)) => {
                let group = self.group_or_new(&id);
                group.membership = Membership::Consumer(ConsumerGroup::restore(&id, epoch));
            }
            CoordinatorRecord::ConsumerGroup(id, None) => self.replay_consumer_tombstone(&id),
        }
    }

    /// A consumer group's tombstone: the group holds only its offsets again, as a classic
    /// group without members (or goes away with none).
    fn replay_consumer_tombstone(&mut self, id: &str) {
        let Some(group) = self.groups.get_mut(id) else {
            return;
        };
        if let Membership::Consumer(_) = group.membership {
            match group.offsets.is_empty() {
                true => {
                    self.groups.remove(id);
                }
                false => group.membership = Membership::Classic(ClassicGroup::new(id)),
            }
        }
    }

    /// The group called `id`, created empty when missing.
    pub fn group_or_new(&mut self, id: &str) -> &mut Group {
        self.groups
            .entry(id.to_string())
            .or_insert_with(|| Group::new(id))
    }

    /// Records every group queued since the last call.
    pub fn take_records(&mut self) -> Vec<CoordinatorRecord> {
        self.groups
            .values_mut()
            .flat_map(Group::take_records)
            .collect()
    }

    /// Drops `id` again when a request created it and left nothing behind (no members,
    /// pending members, generations or offsets), so refused requests leave no trace.
    pub fn drop_if_blank(&mut self, id: &str) {
        let blank = self.groups.get(id).is_some_and(|g| {
            g.offsets.is_empty()
                && match &g.membership {
                    Membership::Classic(c) => c.is_blank(),
                    Membership::Consumer(c) => c.is_blank(),
                }
        });
        if blank {
            self.groups.remove(id);
        }
    }

    /// Runs every group's timers.
    pub fn tick(&mut self, config: &GroupConfig, now: Instant) {
        for group in self.groups.values_mut() {
            match &mut group.membership {
                Membership::Classic(classic) => classic.tick(config, now),
                Membership::Consumer(consumer) => consumer.tick(now),
            }
        }
    }

    /// Whether any group has a timer to run.
    pub fn has_timers(&self) -> bool {
        self.groups.values().any(|g| match &g.membership {
            Membership::Classic(classic) => classic.has_timers(),
            Membership::Consumer(consumer) => !consumer.is_empty(),
        })
    }

    /// Deletes a group that has no members: tombstones for its offsets and metadata.
    pub fn delete_group(&mut self, id: &str) -> Result<Vec<CoordinatorRecord>, GroupError> {
        let Some(group) = self.groups.get_mut(id) else {
            return Err(GroupError::GroupIdNotFound {
                group: id.to_string(),
            });
        };
        if !group.is_empty() {
            return Err(GroupError::NonEmptyGroup {
                group: id.to_string(),
            });
        }
        let mut records = tombstones(id, group.offsets.keys());
        records.push(CoordinatorRecord::Group(id.to_string(), None));
        match &mut group.membership {
            Membership::Classic(classic) => classic.mark_dead(),
            Membership::Consumer(_) => {
                records.push(CoordinatorRecord::ConsumerGroup(id.to_string(), None));
            }
        }
        self.groups.remove(id);
        Ok(records)
    }

    /// Expires offsets older than the retention: a group with a protocol once it has been
    /// empty that long, a group that only holds offsets per offset commit time.
    pub fn expire_offsets(&mut self, retention_ms: i64, now_ms: i64) -> Vec<CoordinatorRecord> {
        let mut records = Vec::new();
        let mut emptied = Vec::new();
        for group in self.groups.values_mut() {
            let expired: Vec<TopicPartition> = match &group.membership {
                Membership::Classic(c) if c.state != State::Empty => continue,
                Membership::Consumer(c) if !c.is_empty() => continue,
                Membership::Classic(c) if c.protocol_type.is_some() => {
                    match c.state_since_ms.saturating_add(retention_ms) <= now_ms {
                        true => group.offsets.keys().cloned().collect(),
                        false => continue,
                    }
                }
                _ => group
                    .offsets
                    .iter()
                    .filter(|(_, o)| o.commit_timestamp_ms.saturating_add(retention_ms) <= now_ms)
                    .map(|(k, _)| k.clone())
                    .collect(),
            };
            if expired.is_empty() {
                continue;
            }
            tracing::info!(group = %group.id, offsets = expired.len(), "expired committed offsets");
            records.extend(tombstones(&group.id, expired.iter()));
            for key in &expired {
                group.offsets.remove(key);
            }
            if group.offsets.is_empty() && group.is_empty() {
                emptied.push(group.id.clone());
            }
        }
        // Kafka also deletes an empty consumer group that holds no offsets.
        emptied.extend(self.groups.values().filter_map(|g| match &g.membership {
            Membership::Consumer(c) if c.is_empty() && g.offsets.is_empty() => Some(g.id.clone()),
            _ => None,
        }));
        emptied.sort_unstable();
        emptied.dedup();
        for id in emptied {
            let Some(group) = self.groups.remove(&id) else {
                continue;
            };
            let tombstone = match group.membership {
                Membership::Classic(_) => CoordinatorRecord::Group(id, None),
                Membership::Consumer(_) => CoordinatorRecord::ConsumerGroup(id, None),
            };
            records.push(tombstone);
        }
        records
    }
}

/// Tombstones for the offsets of `group` at `keys`.
pub fn tombstones<'a>(
    group: &str,
    keys: impl Iterator<Item = &'a TopicPartition>,
) -> Vec<CoordinatorRecord> {
    keys.map(|(topic, partition)| {
        let key = OffsetKey {
            group: group.to_string(),
            topic: topic.clone(),
            partition: *partition,
        };
        CoordinatorRecord::Offset(key, None)
    })
    .collect()
}
