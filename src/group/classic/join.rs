//! JoinGroup and the rebalance it starts: new, known and static members, the initial delay
//! of an empty group, and the completion that opens a new generation.

use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

use super::{
    ClassicGroup, GroupError, InitialDelay, JoinRequest, JoinResponse, JoinResult, JoinedMember,
    Member, Reply, State, PENDING_MEMBERS_MAX,
};
use crate::group::GroupConfig;

impl ClassicGroup {
    /// Handles a JoinGroup: answers at once (errors, MEMBER_ID_REQUIRED, a rejoin that
    /// changes nothing) or when the rebalance it joins completes.
    pub fn join(
        &mut self,
        request: JoinRequest,
        config: &GroupConfig,
        now: Instant,
    ) -> Result<Reply<JoinResult>, GroupError> {
        self.check_alive()?;
        if request.protocol_type.is_empty() || request.protocols.is_empty() {
            return Err(self.inconsistent(&request.member_id));
        }
        let compatible = match self.members.is_empty() {
            true => true,
            false => {
                self.protocol_type.as_deref() == Some(request.protocol_type.as_str())
                    && !self.common_protocols(Some(&request.protocols)).is_empty()
            }
        };
        if !compatible {
            return Err(self.inconsistent(&request.member_id));
        }
        match request.member_id.is_empty() {
            true => self.join_new_member(request, config, now),
            false => self.join_known_member(request, config, now),
        }
    }

    pub(super) fn inconsistent(&self, member_id: &str) -> GroupError {
        GroupError::InconsistentGroupProtocol {
            group: self.id.clone(),
            member: member_id.to_string(),
        }
    }

    fn join_new_member(
        &mut self,
        request: JoinRequest,
        config: &GroupConfig,
        now: Instant,
    ) -> Result<Reply<JoinResult>, GroupError> {
        let member_id = format!("{}-{}", request.client_id, uuid::Uuid::new_v4());
        if let Some(instance) = request.group_instance_id.clone() {
            if let Some(old_id) = self.static_members.get(&instance).cloned() {
                return Ok(self.replace_static_member(request, &old_id, member_id, config, now));
            }
        }
        if self.members.len() >= config.group_size_max {
            return Err(GroupError::GroupMaxSizeReached {
                group: self.id.clone(),
                max: config.group_size_max,
            });
        }
        if request.require_known_member_id && request.group_instance_id.is_none() {
            if self.pending_members.len() >= PENDING_MEMBERS_MAX {
                return Err(GroupError::GroupMaxSizeReached {
                    group: self.id.clone(),
                    max: PENDING_MEMBERS_MAX,
                });
            }
            let session = Duration::from_millis(request.session_timeout_ms.max(0) as u64);
            self.pending_members
                .insert(member_id.clone(), now + session);
            return Err(GroupError::MemberIdRequired {
                group: self.id.clone(),
                member: member_id,
            });
        }
        Ok(self.add_member_and_rebalance(request, member_id, config, now))
    }

    fn join_known_member(
        &mut self,
        request: JoinRequest,
        config: &GroupConfig,
        now: Instant,
    ) -> Result<Reply<JoinResult>, GroupError> {
        let member_id = request.member_id.clone();
        if self.pending_members.remove(&member_id).is_some() {
            if self.members.len() >= config.group_size_max {
                return Err(GroupError::GroupMaxSizeReached {
                    group: self.id.clone(),
                    max: config.group_size_max,
                });
            }
            return Ok(self.add_member_and_rebalance(request, member_id, config, now));
        }
        self.validate_member(&member_id, request.group_instance_id.as_deref())?;
        let Some(member) = self.member_mut(&member_id) else {
            return Err(self.unknown_member(&member_id));
        };
        let unchanged = member.protocols == request.protocols;
        member.refresh_session(now);
        match self.state {
            State::PreparingRebalance => Ok(self.update_and_wait(request, config, now)),
            State::CompletingRebalance if unchanged => {
                Ok(Reply::Now(Ok(self.join_response(&member_id))))
            }
            State::Stable if unchanged && self.leader.as_deref() != Some(&member_id) => {
                Ok(Reply::Now(Ok(self.join_response(&member_id))))
            }
            State::CompletingRebalance | State::Stable => {
                Ok(self.update_and_wait(request, config, now))
            }
            State::Empty | State::Dead => Err(self.unknown_member(&member_id)),
        }
    }

    /// Updates a known member's protocols and timeouts, rebalances, and parks its join.
    fn update_and_wait(
        &mut self,
        request: JoinRequest,
        config: &GroupConfig,
        now: Instant,
    ) -> Reply<JoinResult> {
        let (sender, receiver) = oneshot::channel();
        if let Some(member) = self.member_mut(&request.member_id) {
            member.protocols = request.protocols;
            member.session_timeout_ms = request.session_timeout_ms;
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
            member.join_waiter = Some(sender);
        }
        self.maybe_prepare_rebalance(config, now);
        self.maybe_complete_join(now);
        Reply::Later(receiver)
    }

    fn add_member_and_rebalance(
        &mut self,
        request: JoinRequest,
        member_id: String,
        config: &GroupConfig,
        now: Instant,
    ) -> Reply<JoinResult> {
        let (sender, receiver) = oneshot::channel();
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        let mut member = Member::new(request, member_id.clone(), now);
        member.join_waiter = Some(sender);
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        self.members.push(member);
        if self.leader.is_none() {
            self.leader = Some(member_id);
        }
        if let Some(delay) = self.initial_delay.as_mut() {
            delay.new_member_added = true;
        }
        self.maybe_prepare_rebalance(config, now);
        self.maybe_complete_join(now);
        Reply::Later(receiver)
    }

    /// A static member rejoining under a new member id takes over the old member's place.
    /// In a stable group whose protocol would not change, it gets the current assignment
    /// without a rebalance; otherwise it joins the rebalance.
    fn replace_static_member(
        &mut self,
        request: JoinRequest,
        old_id: &str,
        new_id: String,
        config: &GroupConfig,
        now: Instant,
    ) -> Reply<JoinResult> {
        let group = self.id.clone();
        let instance = request.group_instance_id.clone().unwrap_or_default();
        let Some(member) = self.member_mut(old_id) else {
            return Reply::Now(Err(self.unknown_member(old_id)));
        };
        member.fail_waiters(|| GroupError::FencedInstanceId {
            group: group.clone(),
            instance: instance.clone(),
            member: old_id.to_string(),
        });
        member.member_id = new_id.clone();
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        member.protocols = request.protocols.clone();
        member.refresh_session(now);
        self.static_members.insert(instance, new_id.clone());
        let old_leader = self.leader.clone();
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        tracing::info!(group = %self.id, old_id, new_id, "static member rejoined");
        // Kafka's rule: a stable group rebalances only if the protocol it would select
        // changes (new subscription metadata alone does not trigger one).
        let unchanged = self.select_protocol() == self.protocol_name;
        if self.state == State::Stable && unchanged {
            self.persist();
            let mut response = self.join_response(&new_id);
            if request.supports_skip_assignment {
                response.skip_assignment = self.leader.as_deref() == Some(new_id.as_str());
            } else {
                // As Kafka before JoinGroup v9: the old leader id, so that the member
                // does not take itself for the leader and assign again.
                response.leader = old_leader.unwrap_or_default();
                response.members = Vec::new();
            }
            return Reply::Now(Ok(response));
        }
        let request = JoinRequest {
            member_id: new_id,
            ..request
        };
        self.update_and_wait(request, config, now)
    }

    /// The JoinGroup answer for `member_id` in the current generation: the leader also gets
    /// every member's metadata for the chosen protocol.
    fn join_response(&self, member_id: &str) -> JoinResponse {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let is_leader = self.leader.as_deref() == Some(member_id);
        let members = match is_leader {
            true => self
                .members
                .iter()
                .map(|m| JoinedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect(),
            false => Vec::new(),
        };
        JoinResponse {
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members,
        }
    }

    /// Starts a rebalance unless one is under way: SyncGroups waiting for an assignment
    /// are told REBALANCE_IN_PROGRESS; an empty group first waits
    /// `group.initial.rebalance.delay.ms` for more members.
    pub(super) fn maybe_prepare_rebalance(&mut self, config: &GroupConfig, now: Instant) {
        if !matches!(
            self.state,
            State::Empty | State::Stable | State::CompletingRebalance
        ) {
            return;
        }
        if self.state == State::CompletingRebalance {
            let group = self.id.clone();
            for member in &mut self.members {
                member.assignment = bytes::Bytes::new();
                if let Some(waiter) = member.sync_waiter.take() {
                    let _ = waiter.send(Err(GroupError::RebalanceInProgress {
                        group: group.clone(),
                    }));
                }
            }
        }
        let rebalance_timeout = self.rebalance_timeout();
        let initial = Duration::from_millis(config.initial_rebalance_delay_ms.max(0) as u64);
        if self.state == State::Empty && !initial.is_zero() {
            self.initial_delay = Some(InitialDelay {
                remaining: rebalance_timeout.saturating_sub(initial),
                step: initial,
                new_member_added: false,
            });
            self.join_deadline = Some(now + initial.min(rebalance_timeout));
        } else {
            self.join_deadline = Some(now + rebalance_timeout);
        }
        tracing::info!(group = %self.id, generation = self.generation_id, members = self.members.len(),
            "preparing to rebalance");
        self.set_state(State::PreparingRebalance);
    }

    fn rebalance_timeout(&self) -> Duration {
        let ms = self
            .members
            .iter()
            .map(|m| m.rebalance_timeout_ms.max(0))
            .max()
            .unwrap_or(0);
        Duration::from_millis(ms as u64)
    }

    /// Completes the join phase when every member has rejoined (outside an initial delay)
    /// or when its deadline has passed; an initial delay is extended while members keep
    /// arriving, up to the rebalance timeout.
    pub(super) fn maybe_complete_join(&mut self, now: Instant) {
        if self.state != State::PreparingRebalance {
            return;
        }
        let deadline_passed = self.join_deadline.is_some_and(|d| now >= d);
        if let Some(delay) = self.initial_delay {
            if !deadline_passed {
                return;
            }
            if delay.new_member_added && !delay.remaining.is_zero() {
                let extension = delay.remaining.min(delay.step);
                self.initial_delay = Some(InitialDelay {
                    remaining: delay.remaining.saturating_sub(extension),
                    step: delay.step,
                    new_member_added: false,
                });
                self.join_deadline = Some(now + extension);
                return;
            }
            self.complete_join(now);
            return;
        }
        let all_joined =
            self.members.iter().all(Member::is_awaiting_join) && self.pending_members.is_empty();
        if all_joined || deadline_passed {
            self.complete_join(now);
        }
    }

    /// Opens the next generation: members that did not rejoin are removed, a protocol and
    /// a leader are chosen and every parked join is answered.
    fn complete_join(&mut self, now: Instant) {
        self.initial_delay = None;
        self.join_deadline = None;
        let (joined, missing): (Vec<Member>, Vec<Member>) = std::mem::take(&mut self.members)
            .into_iter()
            .partition(Member::is_awaiting_join);
        self.members = joined;
        for member in missing {
            tracing::info!(group = %self.id, member = %member.member_id,
                "removed member that did not rejoin in time");
            if let Some(instance) = &member.group_instance_id {
                self.static_members.remove(instance);
            }
        }
        self.generation_id += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.leader = None;
            self.set_state(State::Empty);
            self.persist();
            tracing::info!(group = %self.id, generation = self.generation_id, "group is empty");
            return;
        }
        self.protocol_name = self.select_protocol();
        let leader_present = self
            .leader
            .as_deref()
            .is_some_and(|l| self.member(l).is_some());
        if !leader_present {
            self.leader = self.members.first().map(|m| m.member_id.clone());
        }
        self.set_state(State::CompletingRebalance);
        tracing::info!(group = %self.id, generation = self.generation_id,
            protocol = ?self.protocol_name, members = self.members.len(), "rebalance joined");
        let ids: Vec<String> = self.members.iter().map(|m| m.member_id.clone()).collect();
        for id in ids {
            let response = self.join_response(&id);
            if let Some(member) = self.member_mut(&id) {
                member.refresh_session(now);
                if let Some(waiter) = member.join_waiter.take() {
                    let _ = waiter.send(Ok(response));
                }
            }
        }
    }
}
