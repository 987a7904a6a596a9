//! The coordinator's entry points for classic-protocol members (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup) and for the admin calls on whole groups (DescribeGroups,
//! DeleteGroups). Each runs the group's state machine under its shard's lock, writes what
//! changed, and only then waits, for a parked answer or for replication.

use bytes::Bytes;

use super::classic::{ClassicGroup, JoinResult, Reply, SyncResult};
use super::error::GroupError;
use super::records::CoordinatorRecord;
use super::shard::{Group, Membership};
use super::{journal, lock, GroupCoordinator, JoinRequest, LeavingMember, SyncRequest};
use crate::replica::ReplicaManager;

/// One member as DescribeGroups reports it.
#[derive(Debug, Clone)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<DescribedMember>,
}

/// The classic group behind a classic-protocol request; a consumer group does not know
/// classic members (Kafka's answer without mixed-protocol groups: UNKNOWN_MEMBER_ID).
fn classic<'a>(group: &'a mut Group, member_id: &str) -> Result<&'a mut ClassicGroup, GroupError> {
    match &mut group.membership {
        Membership::Classic(classic) => Ok(classic),
        Membership::Consumer(_) => Err(GroupError::UnknownMemberId {
            group: group.id.clone(),
            member: member_id.to_string(),
        }),
    }
}

/// The classic group a JoinGroup goes to: an empty consumer group becomes a classic group
/// again (keeping its offsets, as Kafka's online downgrade of an empty group); one with
/// members refuses classic members with INCONSISTENT_GROUP_PROTOCOL.
fn classic_for_join<'a>(
    group: &'a mut Group,
    member_id: &str,
) -> Result<&'a mut ClassicGroup, GroupError> {
    if let Membership::Consumer(consumer) = &group.membership {
        if !consumer.is_empty() {
            return Err(GroupError::InconsistentGroupProtocol {
                group: group.id.clone(),
                member: member_id.to_string(),
            });
        }
        tracing::info!(group = %group.id, "empty consumer group becomes a classic group");
        let mut classic = ClassicGroup::new(&group.id);
        classic
            .records
            .push(CoordinatorRecord::ConsumerGroup(group.id.clone(), None));
        group.membership = Membership::Classic(classic);
    }
    classic(group, member_id)
}

impl GroupCoordinator {
    /// Waits for a parked answer (a dropped sender means the group went away), then for
    /// the records written on the way to be replicated.
    async fn settle<T>(
        &self,
        group_id: &str,
        (reply, written): (Reply<Result<T, GroupError>>, journal::Written),
    ) -> Result<T, GroupError> {
        let response = match reply {
            Reply::Now(result) => result,
            Reply::Later(receiver) => receiver.await.unwrap_or_else(|_| {
                Err(GroupError::CoordinatorNotAvailable {
                    group: group_id.to_string(),
                })
            }),
        }?;
        written
            .replicated(group_id, self.config.commit_timeout)
            .await?;
        Ok(response)
    }

    /// JoinGroup: validates the session timeout, then joins the group's rebalance.
    pub async fn join(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        request: JoinRequest,
    ) -> JoinResult {
        let timeout = request.session_timeout_ms;
        if timeout < self.config.session_timeout_min_ms
            || timeout > self.config.session_timeout_max_ms
        {
            return Err(GroupError::InvalidSessionTimeout {
                group: group_id.to_string(),
                timeout_ms: timeout,
            });
        }
        let parked = self.with_group(replicas, group_id, |group, config, now| {
            let member_id = request.member_id.clone();
            let reply = classic_for_join(group, &member_id)?.join(request, config, now)?;
            Ok((reply, Vec::new()))
        })?;
        self.settle(group_id, parked).await
    }

    /// SyncGroup: the member's assignment, once the leader has sent it and it is stored.
    pub async fn sync(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        request: SyncRequest,
    ) -> SyncResult {
        let parked = self.with_group(replicas, group_id, |group, _, now| {
            let member_id = request.member_id.clone();
            Ok((classic(group, &member_id)?.sync(request, now)?, Vec::new()))
        })?;
        self.settle(group_id, parked).await
    }

    /// Heartbeat: keeps a member's session and reports a rebalance under way.
    pub fn heartbeat(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        self.with_group(replicas, group_id, |group, _, now| {
            classic(group, member_id)?.heartbeat(member_id, instance_id, generation_id, now)?;
            Ok(((), Vec::new()))
        })
        .map(|_| ())
    }

    /// LeaveGroup: the result of each member leaving; the group-level error if the group
    /// cannot take any.
    pub fn leave(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.with_group(replicas, group_id, |group, config, now| {
            let first = members.first().map(|m| m.member_id.as_str()).unwrap_or("");
            let group = classic(group, first)?;
            if group.is_blank() {
                return Err(GroupError::UnknownMemberId {
                    group: group_id.to_string(),
                    member: members
                        .first()
                        .map(|m| m.member_id.clone())
                        .unwrap_or_default(),
                });
            }
            let results = members
                .iter()
                .map(|m| group.leave(m, config, now))
                .collect();
            Ok((results, Vec::new()))
        })
        .map(|(results, _)| results)
    }

    /// DescribeGroups of one group; an unknown group is reported Dead, as Kafka does.
    pub fn describe(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        let shard = self.shard(group_id)?;
        let shard = lock(&shard);
        let Some(group) = shard.groups.get(group_id) else {
            return Err(GroupError::GroupIdNotFound {
                group: group_id.to_string(),
            });
        };
        match &group.membership {
            Membership::Classic(classic) => Ok(describe_classic(classic)),
            Membership::Consumer(_) => Err(GroupError::GroupIdNotFound {
                group: group_id.to_string(),
            }),
        }
    }

    /// DeleteGroups of one group: refused while it has members.
    pub fn delete_group(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
    ) -> Result<(), GroupError> {
        let shard = self.shard(group_id)?;
        let mut shard = lock(&shard);
        let records = shard.delete_group(group_id)?;
        journal::write(replicas, shard.partition, group_id, &records)?;
        tracing::info!(group = group_id, "deleted group");
        Ok(())
    }
}

fn describe_classic(group: &ClassicGroup) -> GroupDescription {
    let stable = group.state == super::classic::State::Stable;
    GroupDescription {
        state: group.state.name(),
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        protocol_data: match stable {
            true => group.protocol_name.clone().unwrap_or_default(),
            false => String::new(),
        },
        members: group
            .described_members()
            .map(|(m, metadata, assignment)| DescribedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata,
                assignment,
            })
            .collect(),
    }
}
