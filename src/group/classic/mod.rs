//! A group of the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): members,
//! generations and the rebalance state machine Empty → PreparingRebalance →
//! CompletingRebalance → Stable, as Apache Kafka runs it. The leader member computes the
//! assignment; this module only collects and hands it out.
//!
//! Must not: do I/O. Records to persist are queued in `records` for the shard to write;
//! answers that must wait (a join until the rebalance completes, a sync until the leader's
//! assignment) are oneshot channels completed by later calls or by `tick`.
//!
//! Invariants: the leader, when set, is a member; every static member's instance id maps
//! to that member; outside PreparingRebalance no member awaits a join.

use std::collections::HashMap;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

use super::error::GroupError;
use super::records::{CoordinatorRecord, StoredGroup, StoredMember};

/// Members that got MEMBER_ID_REQUIRED but have not joined yet, per group: a flood of joins
/// with fresh ids is refused beyond this.
pub const PENDING_MEMBERS_MAX: usize = 10_000;

/// The states of a classic group, named as Kafka's DescribeGroups reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl State {
    /// The name DescribeGroups and ListGroups report.
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

/// An answer now, or one that a later event completes.
#[derive(Debug)]
pub enum Reply<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

/// A JoinGroup as the group sees it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a new member first gets MEMBER_ID_REQUIRED with its id.
    pub require_known_member_id: bool,
    /// v9+: a static leader rejoining a stable group is told to skip the assignment
    /// (`skip_assignment`); before, it is given the old leader id and no members, so that
    /// it does not assign at all.
    pub supports_skip_assignment: bool,
}

/// One member as the leader's JoinGroup response lists it.
#[derive(Debug, Clone)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A successful JoinGroup answer.
#[derive(Debug, Clone)]
pub struct JoinResponse {
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    pub members: Vec<JoinedMember>,
}

/// A successful SyncGroup answer.
#[derive(Debug, Clone)]
pub struct SyncResponse {
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

pub type JoinResult = Result<JoinResponse, GroupError>;
pub type SyncResult = Result<SyncResponse, GroupError>;

/// One member of a classic group.
#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// Supported protocols in the member's order of preference, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    join_waiter: Option<oneshot::Sender<JoinResult>>,
    sync_waiter: Option<oneshot::Sender<SyncResult>>,
    /// When the member is removed unless it heartbeats (or joins, or syncs) before.
    session_deadline: Instant,
}

impl Member {
    fn new(request: JoinRequest, member_id: String, now: Instant) -> Self {
        let session = Duration::from_millis(request.session_timeout_ms.max(0) as u64);
        Member {
            member_id,
            group_instance_id: request.group_instance_id,
            client_id: request.client_id,
            client_host: request.client_host,
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            protocol_type: request.protocol_type,
            protocols: request.protocols,
            assignment: Bytes::new(),
            join_waiter: None,
            sync_waiter: None,
            session_deadline: now + session,
        }
    }

    /// The member's metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    fn refresh_session(&mut self, now: Instant) {
        let session = Duration::from_millis(self.session_timeout_ms.max(0) as u64);
        self.session_deadline = now + session;
    }

    fn is_awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }

    fn fail_waiters(&mut self, error: impl Fn() -> GroupError) {
        if let Some(waiter) = self.join_waiter.take() {
            let _ = waiter.send(Err(error()));
        }
        if let Some(waiter) = self.sync_waiter.take() {
            let _ = waiter.send(Err(error()));
        }
    }
}

/// The initial delay of a rebalance that starts from an empty group.
#[derive(Debug, Clone, Copy)]
struct InitialDelay {
    /// What is left of the rebalance timeout for extensions.
    remaining: Duration,
    /// `group.initial.rebalance.delay.ms`: each extension's length.
    step: Duration,
    /// Whether a new member joined since the delay was last set.
    new_member_added: bool,
}

/// A group of the classic protocol.
#[derive(Debug)]
pub struct ClassicGroup {
    pub id: String,
    pub state: State,
    pub state_since_ms: i64,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    /// Members in join order (the first to join leads a new generation).
    pub members: Vec<Member>,
    /// Static members: instance id → member id.
    pub static_members: HashMap<String, String>,
    /// Ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pending_members: HashMap<String, Instant>,
    join_deadline: Option<Instant>,
    initial_delay: Option<InitialDelay>,
    /// Records for the shard to persist, in order.
    pub records: Vec<CoordinatorRecord>,
}

impl ClassicGroup {
    /// A new, empty group.
    pub fn new(id: &str) -> Self {
        ClassicGroup {
            id: id.to_string(),
            state: State::Empty,
            state_since_ms: crate::clock::system_now_ms(),
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: Vec::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            join_deadline: None,
            initial_delay: None,
            records: Vec::new(),
        }
    }

    /// The group as it was persisted (members are restored without waiters; they must keep
    /// heartbeating within their session timeout as after any coordinator change).
    pub fn restore(id: &str, stored: &StoredGroup, now: Instant) -> Self {
        let mut group = ClassicGroup::new(id);
        group.generation_id = stored.generation;
        group.protocol_type = Some(stored.protocol_type.clone()).filter(|t| !t.is_empty());
        group.protocol_name = stored.protocol.clone();
        group.leader = stored.leader.clone();
        group.state_since_ms = stored.state_timestamp_ms;
        for m in &stored.members {
            let protocol = stored.protocol.clone().unwrap_or_default();
            let request = JoinRequest {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: stored.protocol_type.clone(),
                protocols: vec![(protocol, m.subscription.clone())],
                require_known_member_id: false,
                supports_skip_assignment: true,
            };
            let mut member = Member::new(request, m.member_id.clone(), now);
            member.assignment = m.assignment.clone();
            if let Some(instance) = &m.group_instance_id {
                group
                    .static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            group.members.push(member);
        }
        group.state = match group.members.is_empty() {
            true => State::Empty,
            false => State::Stable,
        };
        group
    }

    /// Whether the group has no members (it may still hold offsets).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether the group has never had a generation, member or pending member.
    pub fn is_blank(&self) -> bool {
        self.generation_id == 0
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.records.is_empty()
    }

    fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    fn member_mut(&mut self, member_id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.member_id == member_id)
    }

    fn set_state(&mut self, state: State) {
        self.state = state;
        self.state_since_ms = crate::clock::system_now_ms();
    }

    fn unknown_member(&self, member_id: &str) -> GroupError {
        GroupError::UnknownMemberId {
            group: self.id.clone(),
            member: member_id.to_string(),
        }
    }

    /// Checks that `member_id` is a member and, for a static member, that its instance id
    /// still maps to it (Kafka's validation before every member request).
    pub fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(owner) if owner == member_id => return Ok(()),
                Some(_) => {
                    return Err(GroupError::FencedInstanceId {
                        group: self.id.clone(),
                        instance: instance.to_string(),
                        member: member_id.to_string(),
                    })
                }
                None => return Err(self.unknown_member(member_id)),
            }
        }
        match self.member(member_id) {
            Some(_) => Ok(()),
            None => Err(self.unknown_member(member_id)),
        }
    }

    fn check_generation(&self, member_id: &str, generation: i32) -> Result<(), GroupError> {
        match generation == self.generation_id {
            true => Ok(()),
            false => Err(GroupError::IllegalGeneration {
                group: self.id.clone(),
                member: member_id.to_string(),
                generation,
                current: self.generation_id,
            }),
        }
    }

    fn check_alive(&self) -> Result<(), GroupError> {
        match self.state {
            State::Dead => Err(GroupError::CoordinatorNotAvailable {
                group: self.id.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Protocols every member supports (those of `extra` too, when given).
    fn common_protocols(&self, extra: Option<&[(String, Bytes)]>) -> Vec<String> {
        let first = match (self.members.first(), extra) {
            (Some(member), _) => &member.protocols,
            (None, Some(extra)) => extra,
            (None, None) => return Vec::new(),
        };
        first
            .iter()
            .map(|(name, _)| name.clone())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .filter(|name| extra.is_none_or(|e| e.iter().any(|(n, _)| n == name)))
            .collect()
    }

    /// Kafka's rule: each member votes for its most preferred common protocol; most votes
    /// wins, ties going to the first member's preference.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.common_protocols(None);
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for member in &self.members {
            let choice = member
                .protocols
                .iter()
                .find(|(name, _)| candidates.contains(name));
            if let Some((name, _)) = choice {
                if let Some(vote) = votes.iter_mut().find(|(c, _)| c == name) {
                    vote.1 += 1;
                }
            }
        }
        let best = votes.iter().map(|(_, n)| *n).max()?;
        votes.into_iter().find(|(_, n)| *n == best).map(|(c, _)| c)
    }

    /// The group as persisted after a rebalance.
    pub fn stored(&self) -> StoredGroup {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        StoredGroup {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            state_timestamp_ms: self.state_since_ms,
            members: self
                .members
                .iter()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    fn persist(&mut self) {
        let record = CoordinatorRecord::Group(self.id.clone(), Some(self.stored()));
        self.records.push(record);
    }

    /// Which topics the members' subscriptions name (consumer protocol type only).
    pub fn subscribed_topics(&self) -> Option<Vec<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = Vec::new();
        for member in &self.members {
            topics.extend(super::subscription::topics(&member.metadata(protocol))?);
        }
        topics.sort();
        topics.dedup();
        Some(topics)
    }
}

mod join;
mod members;

pub use members::{LeavingMember, SyncRequest};
