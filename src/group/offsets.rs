//! OffsetCommit, OffsetFetch and OffsetDelete on the coordinator: validation against the
//! group, then records written to `__consumer_offsets` before the answer.

use super::error::GroupError;
use super::records::{CommittedOffset, CoordinatorRecord, OffsetKey};
use super::shard::{tombstones, Membership, TopicPartition};
use super::GroupCoordinator;
use crate::clock::system_now_ms as now_ms;
use crate::replica::journal::TxnProducer;
use crate::replica::ReplicaManager;

/// One partition of an OffsetCommit.
#[derive(Debug, Clone)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Who commits: a member of the group (generation ≥ 0) or an outside tool (-1).
#[derive(Debug, Clone)]
pub struct Committer {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// The classic generation, or the KIP-848 member epoch.
    pub generation_id: i32,
    /// The request's version: KIP-848 members must commit with OffsetCommit v9+.
    pub api_version: i16,
    /// A TxnOffsetCommit: before v3 it names no member and no generation, and is then
    /// accepted whatever the group's state (Kafka's rule).
    pub transactional: bool,
}

/// Per-partition results, in request order.
pub type PartitionResults = Vec<(String, i32, Result<(), GroupError>)>;

impl GroupCoordinator {
    /// Commits offsets for `group_id`; an offset whose metadata is too large is refused on
    /// its own, a committer the group does not accept refuses them all.
    pub async fn commit_offsets(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        committer: &Committer,
        commits: Vec<OffsetCommit>,
    ) -> Result<PartitionResults, GroupError> {
        self.commit_offsets_as(replicas, group_id, committer, commits, None)
            .await
    }

    /// Commits offsets for `group_id` as OffsetCommit does, or, for a transactional
    /// producer (TxnOffsetCommit, KIP-447: the member's generation is checked the same
    /// way), pending until the producer's transaction ends on the offsets partition.
    pub async fn commit_offsets_as(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        committer: &Committer,
        commits: Vec<OffsetCommit>,
        producer: Option<TxnProducer>,
    ) -> Result<PartitionResults, GroupError> {
        let metadata_max = self.config.offset_metadata_max_bytes;
        let change = |group: &mut super::Group, _: &_, _| {
            match &group.membership {
                Membership::Classic(classic) => classic.validate_offset_commit(committer)?,
                Membership::Consumer(consumer) => consumer.validate_offset_commit(committer)?,
            }
            let mut results = Vec::with_capacity(commits.len());
            let mut records = Vec::new();
            let timestamp = now_ms();
            for commit in commits {
                let metadata = commit.metadata.unwrap_or_default();
                if metadata.len() > metadata_max {
                    let error = GroupError::OffsetMetadataTooLarge {
                        group: group_id.to_string(),
                        topic: commit.topic.clone(),
                        partition: commit.partition,
                        size: metadata.len(),
                        max: metadata_max,
                    };
                    results.push((commit.topic, commit.partition, Err(error)));
                    continue;
                }
                let value = CommittedOffset {
                    offset: commit.offset,
                    leader_epoch: commit.leader_epoch,
                    metadata,
                    commit_timestamp_ms: timestamp,
                };
                if producer.is_none() {
                    group
                        .offsets
                        .insert((commit.topic.clone(), commit.partition), value.clone());
                }
                let key = OffsetKey {
                    group: group_id.to_string(),
                    topic: commit.topic.clone(),
                    partition: commit.partition,
                };
                records.push(CoordinatorRecord::Offset(key, Some(value)));
                results.push((commit.topic, commit.partition, Ok(())));
            }
            Ok((results, records))
        };
        let (results, written) = self.with_group_as(replicas, group_id, producer, change)?;
        written
            .replicated(group_id, self.config.commit_timeout)
            .await?;
        Ok(results)
    }

    /// Committed offsets of `group_id`: of the given partitions (None where nothing is
    /// committed), or of every partition with a commit when `wanted` is `None`.
    /// A fetch that names a member (OffsetFetch v9+) is checked against a consumer group
    /// as Kafka does (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); classic groups ignore it.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        member: Option<(&str, i32)>,
        wanted: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<(TopicPartition, Option<CommittedOffset>)>, GroupError> {
        let shard = self.shard(group_id)?;
        let shard = super::lock(&shard);
        let group = shard.groups.get(group_id);
        if let (Some(g), Some((member_id, epoch))) = (group, member) {
            if let Membership::Consumer(consumer) = &g.membership {
                let member_id = Some(member_id).filter(|m| !m.is_empty() || epoch >= 0);
                consumer.validate_offset_fetch(member_id, epoch)?;
            }
        }
        let offsets = match wanted {
            Some(wanted) => wanted
                .into_iter()
                .map(|tp| {
                    let offset = group.and_then(|g| g.offsets.get(&tp)).cloned();
                    (tp, offset)
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|(tp, o)| (tp.clone(), Some(o.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        };
        Ok(offsets)
    }

    /// Deletes committed offsets of partitions no member is subscribed to.
    pub async fn delete_offsets(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<PartitionResults, GroupError> {
        let (results, written) = self.with_group(replicas, group_id, |group, _, _| {
            if group.is_empty() && group.offsets.is_empty() {
                return Err(GroupError::GroupIdNotFound {
                    group: group_id.to_string(),
                });
            }
            let subscribed = match group.is_empty() {
                true => Some(Vec::new()),
                false => group.subscribed_topics(),
            };
            let mut results = Vec::with_capacity(partitions.len());
            let mut deleted = Vec::new();
            for (topic, partition) in partitions {
                let in_use = subscribed.as_ref().is_none_or(|s| s.contains(&topic));
                let result = match in_use {
                    true => Err(GroupError::GroupSubscribedToTopic {
                        group: group_id.to_string(),
                        topic: topic.clone(),
                    }),
                    false => {
                        if group.offsets.remove(&(topic.clone(), partition)).is_some() {
                            deleted.push((topic.clone(), partition));
                        }
                        Ok(())
                    }
                };
                results.push((topic, partition, result));
            }
            Ok((results, tombstones(group_id, deleted.iter())))
        })?;
        written
            .replicated(group_id, self.config.commit_timeout)
            .await?;
        Ok(results)
    }
}
