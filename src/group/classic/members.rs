//! SyncGroup, Heartbeat, LeaveGroup, offset-commit validation and the timers of a classic
//! group: session expiry, pending-member expiry and the join deadline.

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{ClassicGroup, GroupError, Member, Reply, State, SyncResponse, SyncResult};
use crate::group::GroupConfig;

/// A SyncGroup as the group sees it.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    /// v5+: must match the group's when given.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment, member id → bytes (empty for other members).
    pub assignments: Vec<(String, Bytes)>,
}

/// One member named in a LeaveGroup.
#[derive(Debug, Clone)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

impl ClassicGroup {
    /// Handles a SyncGroup: in a stable group the member's assignment at once; while the
    /// rebalance completes, when the leader's assignment arrives (the leader's own sync
    /// stores it and persists the group).
    pub fn sync(
        &mut self,
        request: SyncRequest,
        now: Instant,
    ) -> Result<Reply<SyncResult>, GroupError> {
        self.check_alive()?;
        let member_id = request.member_id.clone();
        self.validate_member(&member_id, request.group_instance_id.as_deref())?;
        self.check_generation(&member_id, request.generation_id)?;
        let type_differs =
            request.protocol_type.is_some() && request.protocol_type != self.protocol_type;
        let name_differs =
            request.protocol_name.is_some() && request.protocol_name != self.protocol_name;
        if type_differs || name_differs {
            return Err(self.inconsistent(&member_id));
        }
        if let Some(member) = self.member_mut(&member_id) {
            member.refresh_session(now);
        }
        match self.state {
            State::Empty | State::Dead => Err(self.unknown_member(&member_id)),
            State::PreparingRebalance => Err(GroupError::RebalanceInProgress {
                group: self.id.clone(),
            }),
            State::Stable => Ok(Reply::Now(Ok(self.sync_response(&member_id)))),
            State::CompletingRebalance => Ok(self.park_sync(request)),
        }
    }

    fn park_sync(&mut self, request: SyncRequest) -> Reply<SyncResult> {
        let (sender, receiver) = oneshot::channel();
        if let Some(member) = self.member_mut(&request.member_id) {
            member.sync_waiter = Some(sender);
        }
        if self.leader.as_deref() == Some(request.member_id.as_str()) {
            for member in &mut self.members {
                member.assignment = request
                    .assignments
                    .iter()
                    .find(|(id, _)| *id == member.member_id)
                    .map(|(_, assignment)| assignment.clone())
                    .unwrap_or_default();
            }
            self.set_state(State::Stable);
            self.persist();
            tracing::info!(group = %self.id, generation = self.generation_id, "group is stable");
            let ids: Vec<String> = self.members.iter().map(|m| m.member_id.clone()).collect();
            for id in ids {
                let response = self.sync_response(&id);
                if let Some(waiter) = self.member_mut(&id).and_then(|m| m.sync_waiter.take()) {
                    let _ = waiter.send(Ok(response));
                }
            }
        }
        Reply::Later(receiver)
    }

    fn sync_response(&self, member_id: &str) -> SyncResponse {
        SyncResponse {
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .member(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    /// Handles a Heartbeat: keeps the member's session alive and tells it whether a
    /// rebalance is under way.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        self.check_alive()?;
        self.validate_member(member_id, instance_id)?;
        self.check_generation(member_id, generation_id)?;
        if let Some(member) = self.member_mut(member_id) {
            member.refresh_session(now);
        }
        match self.state {
            State::Empty | State::Dead => Err(self.unknown_member(member_id)),
            State::PreparingRebalance => Err(GroupError::RebalanceInProgress {
                group: self.id.clone(),
            }),
            State::CompletingRebalance | State::Stable => Ok(()),
        }
    }

    /// Handles one member of a LeaveGroup (a static member may be named by instance id
    /// alone) and rebalances the rest.
    pub fn leave(
        &mut self,
        leaving: &LeavingMember,
        config: &GroupConfig,
        now: Instant,
    ) -> Result<(), GroupError> {
        self.check_alive()?;
        let member_id = match &leaving.group_instance_id {
            Some(instance) => {
                let owner = self.static_members.get(instance).cloned();
                match owner {
                    None => return Err(self.unknown_member(&leaving.member_id)),
                    Some(owner) if !leaving.member_id.is_empty() && owner != leaving.member_id => {
                        return Err(GroupError::FencedInstanceId {
                            group: self.id.clone(),
                            instance: instance.clone(),
                            member: leaving.member_id.clone(),
                        })
                    }
                    Some(owner) => owner,
                }
            }
            None => leaving.member_id.clone(),
        };
        if self.pending_members.remove(&member_id).is_some() {
            return Ok(());
        }
        if self.member(&member_id).is_none() {
            return Err(self.unknown_member(&member_id));
        }
        tracing::info!(group = %self.id, member = %member_id, "member left");
        self.remove_member(&member_id, config, now);
        Ok(())
    }

    /// Removes a member (left or expired), answering its parked requests, and rebalances.
    fn remove_member(&mut self, member_id: &str, config: &GroupConfig, now: Instant) {
        let Some(index) = self.members.iter().position(|m| m.member_id == member_id) else {
            return;
        };
        let mut member = self.members.remove(index);
        let group = self.id.clone();
        member.fail_waiters(|| GroupError::UnknownMemberId {
            group: group.clone(),
            member: member_id.to_string(),
        });
        if let Some(instance) = &member.group_instance_id {
            self.static_members.remove(instance);
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.members.first().map(|m| m.member_id.clone());
        }
        match self.state {
            // As Kafka's tryCompleteElseWatch: a rebalance that nobody has to join (the last
            // member left) completes at once, so the group is Empty in the LeaveGroup answer.
            State::Stable | State::CompletingRebalance => {
                self.maybe_prepare_rebalance(config, now);
                self.maybe_complete_join(now);
            }
            State::PreparingRebalance => self.maybe_complete_join(now),
            State::Empty | State::Dead => {}
        }
    }

    /// Runs the group's timers: expires sessions and pending members, completes a join
    /// whose deadline has passed.
    pub fn tick(&mut self, config: &GroupConfig, now: Instant) {
        let before = self.pending_members.len();
        self.pending_members.retain(|_, deadline| *deadline > now);
        let pending_expired = before != self.pending_members.len();
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|m| !m.is_awaiting_join() && m.session_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in expired {
            tracing::info!(group = %self.id, member = %member_id, "member session expired");
            self.remove_member(&member_id, config, now);
        }
        if pending_expired || self.join_deadline.is_some_and(|d| now >= d) {
            self.maybe_complete_join(now);
        }
    }

    /// Whether the group has timers to run (members, pending members or a join deadline).
    pub fn has_timers(&self) -> bool {
        !self.members.is_empty() || !self.pending_members.is_empty()
    }

    /// Checks an OffsetCommit against the group, as Kafka does: a commit from outside the
    /// group (no member id, generation < 0) is allowed only while it is empty — a
    /// TxnOffsetCommit before v3, which carries neither, always; members must be known and
    /// of the current generation, and not in a rebalance's sync phase.
    pub fn validate_offset_commit(
        &self,
        committer: &crate::group::offsets::Committer,
    ) -> Result<(), GroupError> {
        let member_id = committer.member_id.as_str();
        let instance_id = committer.group_instance_id.as_deref();
        let generation_id = committer.generation_id;
        self.check_alive()?;
        if generation_id < 0 && self.state == State::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            self.check_generation(member_id, generation_id)?;
        } else if !committer.transactional && self.state != State::Empty {
            // Without member id and generation, commits are accepted only while the group
            // is empty (Kafka's rule for admin clients).
            return Err(self.unknown_member(member_id));
        }
        match self.state {
            State::CompletingRebalance => Err(GroupError::RebalanceInProgress {
                group: self.id.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Marks the group removed: parked requests get COORDINATOR_NOT_AVAILABLE.
    pub fn mark_dead(&mut self) {
        let group = self.id.clone();
        for member in &mut self.members {
            member.fail_waiters(|| GroupError::CoordinatorNotAvailable {
                group: group.clone(),
            });
        }
        self.set_state(State::Dead);
    }

    /// Members for DescribeGroups; metadata and assignment only once the group is stable.
    pub fn described_members(&self) -> impl Iterator<Item = (&Member, Bytes, Bytes)> {
        let stable = self.state == State::Stable;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members.iter().map(move |m| match stable {
            true => (m, m.metadata(&protocol), m.assignment.clone()),
            false => (m, Bytes::new(), Bytes::new()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::offsets::Committer;
    use crate::group::records::{StoredGroup, StoredMember};

    fn stable_group() -> ClassicGroup {
        let member = StoredMember {
            member_id: "m-1".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 30_000,
            session_timeout_ms: 10_000,
            subscription: Bytes::new(),
            assignment: Bytes::new(),
        };
        let stored = StoredGroup {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp_ms: 0,
            members: vec![member],
        };
        ClassicGroup::restore("g", &stored, Instant::now())
    }

    fn committer(member_id: &str, generation_id: i32, transactional: bool) -> Committer {
        Committer {
            member_id: member_id.into(),
            group_instance_id: None,
            generation_id,
            api_version: if transactional { 1 } else { 2 },
            transactional,
        }
    }

    /// Goal: Kafka's rule for commits that name no member (TxnOffsetCommit before v3, which
    /// kafkajs sends, carries neither member nor generation): a transactional one is
    /// accepted while the group has members, an OffsetCommit is not; a named member is
    /// still checked either way. Method: a stable group of one member at generation 3.
    #[test]
    fn a_transactional_commit_without_member_is_accepted_by_a_group_with_members() {
        let group = stable_group();
        assert!(group
            .validate_offset_commit(&committer("", -1, true))
            .is_ok());
        assert!(matches!(
            group.validate_offset_commit(&committer("", -1, false)),
            Err(GroupError::UnknownMemberId { .. })
        ));
        assert!(group
            .validate_offset_commit(&committer("m-1", 3, true))
            .is_ok());
        assert!(group
            .validate_offset_commit(&committer("m-2", 3, true))
            .is_err());
        assert!(group
            .validate_offset_commit(&committer("m-1", 2, true))
            .is_err());
    }
}
