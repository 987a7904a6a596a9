//! ConsumerGroupHeartbeat on a consumer group, as Kafka's GroupMetadataManager runs it:
//! join, heartbeat and leave of members, the group epoch bumps, the target assignment and
//! each member's reconciliation; and the timers (session and rebalance timeouts) that fence
//! members.

use std::collections::{BTreeMap, BTreeSet};

use tokio::time::{Duration, Instant};
use uuid::Uuid;

use super::assignor::{self, Assignment, AssignorMember, TopicMetadata};
use super::reconcile::{self, MemberState, Target};
use super::topic_regex;
use super::LEAVE_GROUP_STATIC_MEMBER_EPOCH;
use super::{ConsumerGroup, ConsumerMember, LEAVE_GROUP_MEMBER_EPOCH};
use crate::config::group as group_config;
use crate::group::error::GroupError;
use crate::group::GroupConfig;
use crate::metadata::MetadataImage;

/// ConsumerGroupHeartbeat v1+ requires the member to generate its id (KIP-1082).
const MEMBER_ID_REQUIRED_VERSION: i16 = 1;

/// A ConsumerGroupHeartbeat as the group sees it. `None` (or -1 for the rebalance
/// timeout) means the member did not send the field because it did not change.
#[derive(Debug, Clone)]
pub struct ConsumerHeartbeat {
    pub version: i16,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

/// A successful ConsumerGroupHeartbeat answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, when it changed or the member sent a full request.
    pub assignment: Option<Assignment>,
}

/// Checks a heartbeat's fields before the group sees it (Kafka's
/// throwIfConsumerGroupHeartbeatRequestIsInvalid); a regular expression must compile.
pub fn validate_heartbeat(
    group: &str,
    request: &ConsumerHeartbeat,
    assignors: &[String],
) -> Result<(), GroupError> {
    let invalid = |reason| {
        Err(GroupError::InvalidRequest {
            group: group.to_string(),
            reason,
        })
    };
    let epoch = request.member_epoch;
    let needs_id = request.version >= MEMBER_ID_REQUIRED_VERSION
        || epoch > 0
        || epoch == LEAVE_GROUP_MEMBER_EPOCH;
    if needs_id && request.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if request.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if request.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if let Some(pattern) = &request.subscribed_topic_regex {
        if let Err(reason) = topic_regex::compile(pattern) {
            return Err(GroupError::InvalidRegularExpression {
                group: group.to_string(),
                pattern: pattern.clone(),
                reason,
            });
        }
    }
    if epoch == 0 {
        if request.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if request.owned.as_ref().is_none_or(|owned| !owned.is_empty()) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        let unsubscribed =
            request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none();
        if unsubscribed {
            return invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set when (re-)joining.",
            );
        }
    } else if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH && request.instance_id.is_none() {
        return invalid("InstanceId can't be null.");
    } else if epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    match &request.server_assignor {
        Some(name) if !assignors.contains(name) => Err(GroupError::UnsupportedAssignor {
            group: group.to_string(),
            assignor: name.clone(),
        }),
        _ => Ok(()),
    }
}

impl ConsumerGroup {
    /// Handles a heartbeat (member epoch ≥ 0): creates or updates the member, bumps the
    /// group epoch if the assignment must change, computes the target assignment when it
    /// is behind, and reconciles the member.
    pub fn heartbeat(
        &mut self,
        request: ConsumerHeartbeat,
        image: &MetadataImage,
        config: &GroupConfig,
        now: Instant,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        let member_id = match request.member_id.is_empty() {
            true => Uuid::new_v4().to_string(),
            false => request.member_id.clone(),
        };
        let full = self.members.len() >= config.consumer_group_size_max
            && !self.members.contains_key(&member_id);
        if full {
            return Err(GroupError::GroupMaxSizeReached {
                group: self.id.clone(),
                max: config.consumer_group_size_max,
            });
        }
        let old = self.member_for(&request, &member_id, now)?;
        let member = updated_member(&old, &request);
        let mut bump = member.subscribed_topic_names != old.subscribed_topic_names
            || member.subscribed_topic_regex != old.subscribed_topic_regex;
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        self.members.insert(member_id.clone(), member);
        let regexes = self
            .members
            .values()
            .filter_map(|m| m.subscribed_topic_regex.as_ref());
        self.resolved_regexes = topic_regex::resolve(regexes, image);
        let metadata = subscription_metadata(self, image);
        if metadata != self.subscription_metadata {
            self.subscription_metadata = metadata;
            bump = true;
        }
        if bump {
            self.bump_group_epoch();
            tracing::info!(group = %self.id, epoch = self.group_epoch, member = %member_id,
                "bumped group epoch");
        }
        if self.group_epoch > self.assignment_epoch {
            self.compute_target(config);
        }
        self.reconcile_member(&member_id, request.owned.as_ref(), now);
        let own = image.group_configs(&self.id);
        let session_ms = group_config::millis(own, "consumer.session.timeout.ms")
            .unwrap_or(config.consumer_session_timeout_ms);
        let heartbeat_interval_ms = group_config::millis(own, "consumer.heartbeat.interval.ms")
            .unwrap_or(config.consumer_heartbeat_interval_ms);
        let session = Duration::from_millis(session_ms.max(0) as u64);
        let Some(member) = self.members.get_mut(&member_id) else {
            return Err(self.unknown_member(&member_id));
        };
        member.session_deadline = now + session;
        let is_full_request = request.member_epoch == 0
            || (request.rebalance_timeout_ms != -1
                && (request.subscribed_topic_names.is_some()
                    || request.subscribed_topic_regex.is_some())
                && request.owned.is_some());
        let changed = member.assignment.assigned != old.assignment.assigned;
        let response = ConsumerHeartbeatResponse {
            member_id: member_id.clone(),
            member_epoch: member.assignment.member_epoch,
            heartbeat_interval_ms,
            assignment: (is_full_request || changed).then(|| member.assignment.assigned.clone()),
        };
        self.check_invariants();
        Ok(response)
    }

    /// The member the heartbeat is from, as it was before this heartbeat: a new one on a
    /// (re)join, or the existing one after checking its epoch (Kafka's
    /// getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember).
    fn member_for(
        &mut self,
        request: &ConsumerHeartbeat,
        member_id: &str,
        now: Instant,
    ) -> Result<ConsumerMember, GroupError> {
        let joining = request.member_epoch == 0;
        let Some(instance) = &request.instance_id else {
            return match self.members.get(member_id) {
                Some(member) => {
                    self.check_epoch(member, request)?;
                    Ok(member.clone())
                }
                None if joining => {
                    tracing::info!(group = %self.id, member = member_id, "member joins");
                    Ok(ConsumerMember::new(member_id, now))
                }
                None => Err(self.unknown_member(member_id)),
            };
        };
        let existing = self
            .static_members
            .get(instance)
            .and_then(|id| self.members.get(id))
            .cloned();
        match existing {
            None if joining => {
                tracing::info!(group = %self.id, member = member_id, instance, "static member joins");
                Ok(ConsumerMember::new(member_id, now))
            }
            None => Err(self.unknown_member(member_id)),
            Some(existing) if joining => self.replace_static_member(existing, member_id, instance),
            Some(existing) if existing.member_id != member_id => {
                Err(GroupError::FencedInstanceId {
                    group: self.id.clone(),
                    instance: instance.clone(),
                    member: member_id.to_string(),
                })
            }
            Some(existing) => {
                self.check_epoch(&existing, request)?;
                Ok(existing)
            }
        }
    }

    /// A static member rejoining under a new member id takes over its predecessor's
    /// partitions and target, once the predecessor has left with epoch -2.
    fn replace_static_member(
        &mut self,
        existing: ConsumerMember,
        member_id: &str,
        instance: &str,
    ) -> Result<ConsumerMember, GroupError> {
        if existing.assignment.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            return Err(GroupError::UnreleasedInstanceId {
                group: self.id.clone(),
                instance: instance.to_string(),
                member: existing.member_id.clone(),
            });
        }
        self.members.remove(&existing.member_id);
        if let Some(target) = self.target.remove(&existing.member_id) {
            self.target.insert(member_id.to_string(), target);
        }
        tracing::info!(group = %self.id, instance, old = %existing.member_id, new = member_id,
            "static member rejoined");
        let mut member = existing;
        member.member_id = member_id.to_string();
        member.assignment.member_epoch = 0;
        member.assignment.previous_member_epoch = 0;
        Ok(member)
    }

    /// Kafka's check of a heartbeat's epoch: a newer one is fenced; an older one only
    /// passes if it is the previous epoch and the member owns no more than its assignment
    /// (the answer that moved it on may have been lost).
    fn check_epoch(
        &self,
        member: &ConsumerMember,
        request: &ConsumerHeartbeat,
    ) -> Result<(), GroupError> {
        let current = member.assignment.member_epoch;
        let received = request.member_epoch;
        let fenced = || GroupError::FencedMemberEpoch {
            group: self.id.clone(),
            member: member.member_id.clone(),
            epoch: received,
            current,
        };
        if received > current {
            return Err(fenced());
        }
        if received < current {
            let subset = request
                .owned
                .as_ref()
                .is_some_and(|owned| is_subset(owned, &member.assignment.assigned));
            if received != member.assignment.previous_member_epoch || !subset {
                return Err(fenced());
            }
        }
        Ok(())
    }

    /// Computes the target assignment at the group epoch with the members' preferred
    /// assignor (the one most of them name, else the configured default).
    fn compute_target(&mut self, config: &GroupConfig) {
        let name = preferred_assignor(self, config);
        let subscriptions: Vec<(&String, BTreeSet<String>)> = self
            .members
            .values()
            .map(|m| (&m.member_id, self.member_topics(m)))
            .collect();
        let members: Vec<AssignorMember<'_>> = subscriptions
            .iter()
            .map(|(member_id, topics)| AssignorMember {
                member_id,
                subscribed: topics,
            })
            .collect();
        let target = assignor::assign(&name, &members, &self.subscription_metadata, &self.target);
        self.target = target;
        self.assignment_epoch = self.group_epoch;
        self.assignor_name = name;
        tracing::info!(group = %self.id, epoch = self.assignment_epoch,
            assignor = %self.assignor_name, members = self.members.len(),
            "computed a new target assignment");
    }

    /// Moves the member one step towards its target; arms its rebalance timeout while it
    /// has partitions to revoke.
    fn reconcile_member(&mut self, member_id: &str, owned: Option<&Assignment>, now: Instant) {
        let Some(member) = self.members.get(member_id) else {
            return;
        };
        if member.assignment.is_reconciled_to(self.assignment_epoch) {
            return;
        }
        let empty = Assignment::new();
        let held = |topic: Uuid, partition: i32| self.held_by_other(member_id, topic, partition);
        let target = Target {
            epoch: self.assignment_epoch,
            assignment: self.target.get(member_id).unwrap_or(&empty),
            owned,
            held_by_other: &held,
        };
        let next = reconcile::reconcile(&member.assignment, &target);
        if next == member.assignment {
            return;
        }
        let timeout = Duration::from_millis(member.rebalance_timeout_ms.max(0) as u64);
        tracing::debug!(group = %self.id, member = member_id, epoch = next.member_epoch,
            state = next.state.name(), assigned = ?next.assigned,
            revoking = ?next.pending_revocation, "member assignment moved on");
        if let Some(member) = self.members.get_mut(member_id) {
            member.rebalance_deadline = match next.state {
                MemberState::UnrevokedPartitions => Some(now + timeout),
                _ => None,
            };
            member.assignment = next;
        }
    }

    /// Handles a leave (epoch -1), or a static member's temporary leave (epoch -2), which
    /// keeps its partitions for its successor.
    pub fn leave(
        &mut self,
        request: &ConsumerHeartbeat,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        let member_id = match &request.instance_id {
            None => request.member_id.clone(),
            Some(instance) => {
                let Some(owner) = self.static_members.get(instance).cloned() else {
                    return Err(self.unknown_member(&request.member_id));
                };
                if owner != request.member_id {
                    return Err(GroupError::FencedInstanceId {
                        group: self.id.clone(),
                        instance: instance.clone(),
                        member: request.member_id.clone(),
                    });
                }
                owner
            }
        };
        let Some(member) = self.members.get_mut(&member_id) else {
            return Err(self.unknown_member(&member_id));
        };
        let response = ConsumerHeartbeatResponse {
            member_id: member_id.clone(),
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            member.assignment.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
            member.assignment.pending_revocation.clear();
            member.rebalance_deadline = None;
            tracing::info!(group = %self.id, member = %member_id, "static member left for now");
            return Ok(response);
        }
        tracing::info!(group = %self.id, member = %member_id, "member left");
        self.fence(&member_id);
        Ok(response)
    }

    /// Removes a member (left, or fenced by a timer) and bumps the group epoch; its
    /// partitions are free at once.
    pub fn fence(&mut self, member_id: &str) {
        let Some(member) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance) = &member.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        self.target.remove(member_id);
        let subscribed: BTreeSet<String> = self.subscribed_topics().into_iter().collect();
        self.subscription_metadata
            .retain(|topic, _| subscribed.contains(topic));
        self.bump_group_epoch();
        tracing::info!(group = %self.id, member = member_id, epoch = self.group_epoch,
            "member removed; bumped group epoch");
        self.check_invariants();
    }

    /// Fences members whose session expired and members that did not revoke their
    /// partitions within their rebalance timeout.
    pub fn tick(&mut self, now: Instant) {
        let expired: Vec<(String, &'static str)> = self
            .members
            .values()
            .filter_map(|m| {
                if m.session_deadline <= now {
                    Some((m.member_id.clone(), "session expired"))
                } else if m.rebalance_deadline.is_some_and(|d| d <= now) {
                    Some((m.member_id.clone(), "did not revoke partitions in time"))
                } else {
                    None
                }
            })
            .collect();
        for (member_id, reason) in expired {
            tracing::info!(group = %self.id, member = %member_id, reason, "fencing member");
            self.fence(&member_id);
        }
    }
}

/// The member with the heartbeat's changes (fields not sent keep their value).
fn updated_member(old: &ConsumerMember, request: &ConsumerHeartbeat) -> ConsumerMember {
    let mut member = old.clone();
    if request.instance_id.is_some() {
        member.instance_id = request.instance_id.clone();
    }
    if request.rack_id.is_some() {
        member.rack_id = request.rack_id.clone();
    }
    if request.rebalance_timeout_ms != -1 {
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
    }
    if request.server_assignor.is_some() {
        member.server_assignor = request.server_assignor.clone();
    }
    if let Some(names) = &request.subscribed_topic_names {
        member.subscribed_topic_names = names.iter().cloned().collect();
    }
    if let Some(regex) = &request.subscribed_topic_regex {
        member.subscribed_topic_regex = Some(regex.clone()).filter(|r| !r.is_empty());
    }
    member.client_id = request.client_id.clone();
    member.client_host = request.client_host.clone();
    member
}

/// The subscribed topics that exist in `image`, with ids and partition counts.
fn subscription_metadata(
    group: &ConsumerGroup,
    image: &MetadataImage,
) -> BTreeMap<String, TopicMetadata> {
    group
        .subscribed_topics()
        .into_iter()
        .filter_map(|name| {
            let topic = image.topic(&name)?;
            let metadata = TopicMetadata {
                topic_id: topic.topic_id,
                partitions: topic.partition_count(),
            };
            Some((name, metadata))
        })
        .collect()
}

/// The assignor most members name, else the configured default (Kafka's
/// computePreferredServerAssignor).
fn preferred_assignor(group: &ConsumerGroup, config: &GroupConfig) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for member in group.members.values() {
        if let Some(name) = &member.server_assignor {
            *counts.entry(name).or_default() += 1;
        }
    }
    let most = counts.iter().max_by_key(|(_, count)| **count);
    match most {
        Some((name, _)) => name.to_string(),
        None => config
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_else(|| assignor::UNIFORM.to_string()),
    }
}

fn is_subset(owned: &Assignment, assigned: &Assignment) -> bool {
    owned.iter().all(|(topic, partitions)| {
        assigned
            .get(topic)
            .is_some_and(|mine| partitions.is_subset(mine))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::{BrokerConfig, ConfigMap};
    use crate::metadata::TopicImage;

    fn config() -> GroupConfig {
        let mut map = ConfigMap::new();
        map.insert("log.dirs".into(), "/nonexistent".into());
        map.insert("listeners".into(), "127.0.0.1:0".into());
        let broker = BrokerConfig::from_map(map).expect("config");
        GroupConfig::from_broker(&broker).expect("group config")
    }

    fn image(partitions: i32) -> MetadataImage {
        let topic = TopicImage {
            name: "t".into(),
            topic_id: Uuid::from_u128(1),
            partitions: (0..partitions)
                .map(|_| crate::metadata::PartitionImage::new(vec![1]))
                .collect(),
            configs: ConfigMap::new(),
        };
        let mut image = MetadataImage::default();
        image.topics.insert("t".into(), Arc::new(topic));
        image
    }

    fn join(member_id: &str) -> ConsumerHeartbeat {
        ConsumerHeartbeat {
            version: 1,
            member_id: member_id.into(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: 1000,
            subscribed_topic_names: Some(vec!["t".into()]),
            subscribed_topic_regex: None,
            server_assignor: None,
            owned: Some(Assignment::new()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    fn beat(
        member_id: &str,
        answer: &ConsumerHeartbeatResponse,
        owned: &Assignment,
    ) -> ConsumerHeartbeat {
        ConsumerHeartbeat {
            member_epoch: answer.member_epoch,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            owned: Some(owned.clone()),
            ..join(member_id)
        }
    }

    #[test]
    fn states_follow_the_group_through_a_rebalance() {
        // Goal: Kafka's consumer group states: Empty, Stable, Reconciling while a member
        // still revokes, Assigning after a member left and before the next heartbeat.
        // Method: drive two members by hand and read the state after each step.
        let (config, image, now) = (config(), image(4), Instant::now());
        let mut group = ConsumerGroup::new("g", assignor::UNIFORM);
        assert_eq!(group.state_name(), "Empty");
        let a = group
            .heartbeat(join("a"), &image, &config, now)
            .expect("a joins");
        assert_eq!(group.state_name(), "Stable");
        let a_owned = a.assignment.clone().expect("assignment");
        group
            .heartbeat(join("b"), &image, &config, now)
            .expect("b joins");
        assert_eq!(group.state_name(), "Reconciling");
        let a = group
            .heartbeat(beat("a", &a, &a_owned), &image, &config, now)
            .expect("a");
        assert_eq!(a.member_epoch, 1, "a revokes at its epoch");
        let a_kept = a.assignment.clone().expect("a is told what it keeps");
        let a = group
            .heartbeat(beat("a", &a, &a_kept), &image, &config, now)
            .expect("a");
        assert_eq!(a.member_epoch, 2);
        assert_eq!(
            group.state_name(),
            "Reconciling",
            "b has not taken its share yet"
        );
        let b_now = group.members["b"].assignment.clone();
        let b_answer = ConsumerHeartbeatResponse {
            member_id: "b".into(),
            member_epoch: b_now.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        group
            .heartbeat(beat("b", &b_answer, &b_now.assigned), &image, &config, now)
            .expect("b");
        assert_eq!(group.state_name(), "Stable");
        group.fence("b");
        assert_eq!(group.state_name(), "Assigning");
        assert!(!group.target.contains_key("b"));
    }

    #[test]
    fn timers_fence_silent_and_slow_members() {
        // Goal: the session timeout removes a silent member and the rebalance timeout a
        // member that does not revoke. Method: tick past each deadline.
        let (config, image, now) = (config(), image(4), Instant::now());
        let mut group = ConsumerGroup::new("g", assignor::UNIFORM);
        let a = group
            .heartbeat(join("a"), &image, &config, now)
            .expect("a joins");
        let owned = a.assignment.clone().expect("assignment");
        group
            .heartbeat(join("b"), &image, &config, now)
            .expect("b joins");
        group
            .heartbeat(beat("a", &a, &owned), &image, &config, now)
            .expect("a revokes");
        let revoke_by = group.members["a"]
            .rebalance_deadline
            .expect("rebalance deadline");
        group.tick(revoke_by);
        assert!(
            !group.members.contains_key("a"),
            "a kept its partitions too long"
        );
        let session = Duration::from_millis(config.consumer_session_timeout_ms as u64);
        group.tick(now + session);
        assert!(group.is_empty(), "b never heartbeat again");
    }
}
