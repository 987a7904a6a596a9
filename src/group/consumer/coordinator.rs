//! The coordinator's entry points for the consumer protocol: ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe. A heartbeat runs under its shard's lock like any group change;
//! an empty classic group (one that only holds offsets) becomes a consumer group on its
//! first heartbeat, keeping its offsets, as in Kafka's online upgrade.

use super::{ConsumerGroup, ConsumerGroupDescription, ConsumerHeartbeat};
use super::{ConsumerHeartbeatResponse, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use crate::group::error::GroupError;
use crate::group::shard::{Group, Membership};
use crate::group::{lock, GroupConfig, GroupCoordinator};
use crate::metadata::MetadataImage;
use crate::replica::ReplicaManager;

impl GroupCoordinator {
    /// ConsumerGroupHeartbeat: a join (epoch 0), heartbeat, or leave (epoch -1 or -2).
    pub async fn consumer_heartbeat(
        &self,
        replicas: &ReplicaManager,
        group_id: &str,
        request: ConsumerHeartbeat,
        image: &MetadataImage,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        super::validate_heartbeat(group_id, &request, &self.config.consumer_assignors)?;
        let (response, written) = self.with_group(replicas, group_id, |group, config, now| {
            let epoch = request.member_epoch;
            let consumer = consumer_group_for(group, &request.member_id, epoch, config)?;
            let response = match epoch {
                LEAVE_GROUP_MEMBER_EPOCH | LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
                    consumer.leave(&request)?
                }
                _ => consumer.heartbeat(request, image, config, now)?,
            };
            Ok((response, Vec::new()))
        })?;
        written
            .replicated(group_id, self.config.commit_timeout)
            .await?;
        Ok(response)
    }

    /// ConsumerGroupDescribe of one group: GROUP_ID_NOT_FOUND unless it is a consumer group.
    pub fn consumer_describe(
        &self,
        group_id: &str,
        image: &MetadataImage,
    ) -> Result<ConsumerGroupDescription, GroupError> {
        let shard = self.shard(group_id)?;
        let shard = lock(&shard);
        match shard.groups.get(group_id).map(|g| &g.membership) {
            Some(Membership::Consumer(consumer)) => Ok(consumer.describe(image)),
            _ => Err(GroupError::GroupIdNotFound {
                group: group_id.to_string(),
            }),
        }
    }
}

/// The consumer group a heartbeat goes to. A classic group without members becomes one on
/// a join; a classic group with members refuses (GROUP_ID_NOT_FOUND, as Kafka does without
/// mixed-protocol groups). A member heartbeating into a group this coordinator does not
/// know as a consumer group is told it is unknown, so that it rejoins: membership is not
/// persisted here, and that is what a coordinator restart leaves.
fn consumer_group_for<'a>(
    group: &'a mut Group,
    member_id: &str,
    epoch: i32,
    config: &GroupConfig,
) -> Result<&'a mut ConsumerGroup, GroupError> {
    let convert = match &group.membership {
        Membership::Consumer(_) => false,
        Membership::Classic(classic) if !classic.is_empty() => {
            return Err(GroupError::GroupIdNotFound {
                group: group.id.clone(),
            })
        }
        Membership::Classic(_) if epoch == 0 => true,
        Membership::Classic(_) => {
            return Err(GroupError::UnknownMemberId {
                group: group.id.clone(),
                member: member_id.to_string(),
            })
        }
    };
    if convert {
        let default = config
            .consumer_assignors
            .first()
            .map(String::as_str)
            .unwrap_or(super::assignor::UNIFORM);
        if !group.offsets.is_empty() {
            tracing::info!(group = %group.id, offsets = group.offsets.len(),
                "empty classic group becomes a consumer group, keeping its offsets");
        }
        group.membership = Membership::Consumer(ConsumerGroup::new(&group.id, default));
    }
    match &mut group.membership {
        Membership::Consumer(consumer) => Ok(consumer),
        Membership::Classic(_) => Err(GroupError::GroupIdNotFound {
            group: group.id.clone(),
        }),
    }
}
