//! A group of the KIP-848 consumer protocol (ConsumerGroupHeartbeat): the coordinator owns
//! the assignment. Every change of membership, of a subscription or of the partition count
//! of a subscribed topic bumps the group epoch; the next heartbeat then computes a new
//! target assignment with a server-side assignor, and each member reconciles towards its
//! target on its own heartbeats (revoke first, then assign what is free).
//!
//! Only the group epoch is persisted (Kafka's ConsumerGroupMetadata record), so that epochs
//! keep growing across restarts; members live in memory: after a coordinator restart or
//! move they get UNKNOWN_MEMBER_ID and rejoin with epoch 0 (offsets are persisted as for
//! any group).
//!
//! Must not: do I/O or choose Kafka error codes.
//!
//! Invariants: `assignment_epoch <= group_epoch`; every static member's instance id maps to
//! that member; no partition is held (assigned or pending revocation) by two members; the
//! target assignment only names members of the group.

pub mod assignor;
mod coordinator;
mod heartbeat;
pub mod reconcile;
mod topic_regex;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio::time::Instant;
use uuid::Uuid;

use self::assignor::{Assignment, TargetAssignment, TopicMetadata};
use self::reconcile::AssignmentState;
use super::error::GroupError;
use super::records::CoordinatorRecord;
use crate::metadata::MetadataImage;

pub use heartbeat::{validate_heartbeat, ConsumerHeartbeat, ConsumerHeartbeatResponse};

/// OffsetCommit carries member epochs from v9 (KIP-848); members must commit with it.
const OFFSET_COMMIT_MEMBER_EPOCH_VERSION: i16 = 9;

/// Member epoch of a member leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// Member epoch of a static member leaving for a while (it keeps its partitions).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// One member of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: BTreeSet<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub assignment: AssignmentState,
    /// When the member is removed unless it heartbeats before.
    pub session_deadline: Instant,
    /// When the member is removed unless it has revoked its partitions by then.
    pub rebalance_deadline: Option<Instant>,
}

impl ConsumerMember {
    fn new(member_id: &str, now: Instant) -> Self {
        ConsumerMember {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: 0,
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            assignment: AssignmentState::joining(),
            session_deadline: now,
            rebalance_deadline: None,
        }
    }

    /// Whether the member holds `topic`-`partition` (assigned or being revoked).
    fn holds(&self, topic: Uuid, partition: i32) -> bool {
        let has = |a: &Assignment| a.get(&topic).is_some_and(|p| p.contains(&partition));
        has(&self.assignment.assigned) || has(&self.assignment.pending_revocation)
    }
}

/// A group of the consumer protocol.
#[derive(Debug)]
pub struct ConsumerGroup {
    pub id: String,
    /// Bumped by every change the assignment must follow.
    pub group_epoch: i32,
    /// The group epoch the target assignment was computed at.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// Static members: instance id → member id.
    pub static_members: HashMap<String, String>,
    /// Target assignment of every member, computed at `assignment_epoch`.
    pub target: TargetAssignment,
    /// The subscribed topics that exist, with their ids and partition counts.
    pub subscription_metadata: BTreeMap<String, TopicMetadata>,
    /// The topics each member's regular expression matched at the last heartbeat.
    pub resolved_regexes: BTreeMap<String, BTreeSet<String>>,
    /// The assignor the last target assignment used.
    pub assignor_name: String,
    /// Records for the shard to persist, in order (the group epoch; members are not
    /// persisted).
    pub records: Vec<CoordinatorRecord>,
}

/// A member as ConsumerGroupDescribe reports it; assignments name topics by id and name.
#[derive(Debug, Clone)]
pub struct DescribedConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Vec<(Uuid, String, Vec<i32>)>,
    pub target_assignment: Vec<(Uuid, String, Vec<i32>)>,
}

/// A consumer group as ConsumerGroupDescribe reports it.
#[derive(Debug, Clone)]
pub struct ConsumerGroupDescription {
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedConsumerMember>,
}

impl ConsumerGroup {
    /// A new group without members, at epoch 0.
    pub fn new(id: &str, default_assignor: &str) -> Self {
        ConsumerGroup {
            id: id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            target: TargetAssignment::new(),
            subscription_metadata: BTreeMap::new(),
            resolved_regexes: BTreeMap::new(),
            assignor_name: default_assignor.to_string(),
            records: Vec::new(),
        }
    }

    /// The group as persisted: its epoch, without members (they rejoin after a restart and
    /// are told their epoch is stale or unknown until they do).
    pub fn restore(id: &str, epoch: i32) -> Self {
        let mut group = ConsumerGroup::new(id, assignor::UNIFORM);
        group.group_epoch = epoch;
        group.assignment_epoch = epoch;
        group
    }

    /// Bumps the group epoch and queues its record.
    fn bump_group_epoch(&mut self) {
        self.group_epoch += 1;
        let record = CoordinatorRecord::ConsumerGroup(self.id.clone(), Some(self.group_epoch));
        self.records.push(record);
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether the group never had a member (a refused first heartbeat leaves it so).
    pub fn is_blank(&self) -> bool {
        self.members.is_empty() && self.group_epoch == 0
    }

    /// The state Kafka reports: Empty, Assigning (a new target is due), Reconciling (some
    /// member has not reached the target) or Stable.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| !m.assignment.is_reconciled_to(self.assignment_epoch))
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The topics `member` subscribes to: by name, and those its regular expression
    /// matched.
    pub fn member_topics(&self, member: &ConsumerMember) -> BTreeSet<String> {
        let mut topics = member.subscribed_topic_names.clone();
        let matched = member
            .subscribed_topic_regex
            .as_ref()
            .and_then(|regex| self.resolved_regexes.get(regex));
        if let Some(matched) = matched {
            topics.extend(matched.iter().cloned());
        }
        topics
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> Vec<String> {
        let topics: BTreeSet<String> = self
            .members
            .values()
            .flat_map(|m| self.member_topics(m))
            .collect();
        topics.into_iter().collect()
    }

    fn unknown_member(&self, member_id: &str) -> GroupError {
        GroupError::UnknownMemberId {
            group: self.id.clone(),
            member: member_id.to_string(),
        }
    }

    /// Checks an OffsetCommit as Kafka's ConsumerGroup does: outside the group (epoch < 0)
    /// only while it is empty; a member only at its current epoch, with OffsetCommit v9+
    /// (any TxnOffsetCommit version).
    pub fn validate_offset_commit(
        &self,
        committer: &crate::group::offsets::Committer,
    ) -> Result<(), GroupError> {
        let (member_id, epoch) = (committer.member_id.as_str(), committer.generation_id);
        let api_version = committer.api_version;
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        if !committer.transactional
            && self.members.contains_key(member_id)
            && api_version < OFFSET_COMMIT_MEMBER_EPOCH_VERSION
        {
            return Err(GroupError::UnsupportedCommitVersion {
                group: self.id.clone(),
                member: member_id.to_string(),
                version: api_version,
            });
        }
        self.validate_member_epoch(member_id, epoch)
    }

    /// Checks an OffsetFetch that names a member (v9+); one that names none is accepted.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        epoch: i32,
    ) -> Result<(), GroupError> {
        match member_id {
            None if epoch < 0 => Ok(()),
            member_id => self.validate_member_epoch(member_id.unwrap_or_default(), epoch),
        }
    }

    fn validate_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let Some(member) = self.members.get(member_id) else {
            return Err(self.unknown_member(member_id));
        };
        match epoch == member.assignment.member_epoch {
            true => Ok(()),
            false => Err(GroupError::StaleMemberEpoch {
                group: self.id.clone(),
                member: member_id.to_string(),
                epoch,
                current: member.assignment.member_epoch,
            }),
        }
    }

    /// The group for ConsumerGroupDescribe; topics are named from `image`.
    pub fn describe(&self, image: &MetadataImage) -> ConsumerGroupDescription {
        let named = |assignment: &Assignment| -> Vec<(Uuid, String, Vec<i32>)> {
            assignment
                .iter()
                .map(|(id, partitions)| {
                    let name = image
                        .topic_by_id(*id)
                        .map(|t| t.name.clone())
                        .unwrap_or_default();
                    (*id, name, partitions.iter().copied().collect())
                })
                .collect()
        };
        let empty = Assignment::new();
        let members = self
            .members
            .values()
            .map(|m| DescribedConsumerMember {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                member_epoch: m.assignment.member_epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                assignment: named(&m.assignment.assigned),
                target_assignment: named(self.target.get(&m.member_id).unwrap_or(&empty)),
            })
            .collect();
        ConsumerGroupDescription {
            state: self.state_name(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.assignor_name.clone(),
            members,
        }
    }

    /// Checks the invariants stated on the module (debug builds).
    pub fn check_invariants(&self) {
        debug_assert!(self.assignment_epoch <= self.group_epoch, "{}", self.id);
        for (instance, member_id) in &self.static_members {
            let member = self.members.get(member_id);
            debug_assert!(
                member.is_some_and(|m| m.instance_id.as_ref() == Some(instance)),
                "{}: instance {instance} maps to {member_id}",
                self.id
            );
        }
        for member_id in self.target.keys() {
            debug_assert!(
                self.members.contains_key(member_id),
                "{}: {member_id}",
                self.id
            );
        }
        let mut holders: HashMap<(Uuid, i32), &str> = HashMap::new();
        for member in self.members.values() {
            let state = &member.assignment;
            for assignment in [&state.assigned, &state.pending_revocation] {
                for (topic, partitions) in assignment {
                    for partition in partitions {
                        let previous = holders.insert((*topic, *partition), &member.member_id);
                        debug_assert!(
                            previous.is_none_or(|p| p == member.member_id),
                            "{}: {topic}-{partition} held by {previous:?} and {}",
                            self.id,
                            member.member_id
                        );
                    }
                }
            }
        }
    }

    /// Whether a member other than `member_id` holds `topic`-`partition`.
    fn held_by_other(&self, member_id: &str, topic: Uuid, partition: i32) -> bool {
        self.members
            .values()
            .any(|m| m.member_id != member_id && m.holds(topic, partition))
    }
}
