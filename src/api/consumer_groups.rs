//! The KIP-848 consumer group protocol: ConsumerGroupHeartbeat (join, heartbeat, leave,
//! with the coordinator's assignment in the answer) and ConsumerGroupDescribe.

use std::collections::BTreeSet;

use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe, DescribedGroup,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId,
};

use super::errors::refusal_error;
use super::groups::log_group_error;
use super::refusal::Refusal;
use super::{str_bytes, topic_name, Broker, HandlerError, Outcome, Request};
use crate::group::consumer::assignor::Assignment;
use crate::group::consumer::DescribedConsumerMember;
use crate::group::ConsumerHeartbeat;

/// Kafka's member type of a member speaking the consumer protocol (ConsumerGroupDescribe
/// v1+; 0 is a classic member).
const MEMBER_TYPE_CONSUMER: i8 = 1;

fn owned(request: &ConsumerGroupHeartbeatRequest) -> Option<Assignment> {
    request.topic_partitions.as_ref().map(|topics| {
        let mut owned = Assignment::new();
        for topic in topics {
            let partitions: BTreeSet<i32> = topic.partitions.iter().copied().collect();
            owned.entry(topic.topic_id).or_default().extend(partitions);
        }
        owned
    })
}

fn heartbeat_request(request: &Request, body: &ConsumerGroupHeartbeatRequest) -> ConsumerHeartbeat {
    let text = |s: &Option<kafka_protocol::protocol::StrBytes>| s.as_ref().map(|s| s.to_string());
    ConsumerHeartbeat {
        version: request.version(),
        member_id: body.member_id.to_string(),
        member_epoch: body.member_epoch,
        instance_id: text(&body.instance_id),
        rack_id: text(&body.rack_id),
        rebalance_timeout_ms: body.rebalance_timeout_ms,
        subscribed_topic_names: body
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: text(&body.subscribed_topic_regex),
        server_assignor: text(&body.server_assignor),
        owned: owned(body),
        client_id: text(&request.header.client_id).unwrap_or_default(),
        client_host: format!("/{}", request.client.ip()),
    }
}

fn wire_assignment(assignment: Assignment) -> WireAssignment {
    let topics = assignment
        .into_iter()
        .map(|(topic_id, partitions)| {
            TopicPartitions::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions.into_iter().collect())
        })
        .collect();
    WireAssignment::default().with_topic_partitions(topics)
}

/// Answers ConsumerGroupHeartbeat.
pub async fn heartbeat(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ConsumerGroupHeartbeatRequest = request.decode()?;
    let group = body.group_id.0.to_string();
    let heartbeat = heartbeat_request(request, &body);
    let image = broker.image();
    if !super::api_versions::enabled(
        &image,
        kafka_protocol::messages::ApiKey::ConsumerGroupHeartbeat,
    ) {
        tracing::debug!(client = %request.client, group, "KIP-848 groups are off (group.version 0)");
        let message = "The consumer group protocol is disabled: group.version is 0";
        return request.respond(
            &ConsumerGroupHeartbeatResponse::default()
                .with_error_code(refusal_error(Refusal::UnsupportedVersion).code())
                .with_error_message(Some(str_bytes(message))),
        );
    }
    // The subscribed topics must all be ones the member may describe (Kafka's check).
    let hidden = body.subscribed_topic_names.iter().flatten().find(|t| {
        !broker.authorize(
            request,
            crate::acl::Operation::Describe,
            (crate::acl::ResourceType::Topic, &t.0),
        )
    });
    if let Some(topic) = hidden {
        let message = format!("Topic authorization failed for topic {}", topic.0.as_str());
        return request.respond(
            &ConsumerGroupHeartbeatResponse::default()
                .with_error_code(refusal_error(Refusal::TopicAuthorizationFailed).code())
                .with_error_message(Some(str_bytes(&message))),
        );
    }
    let result = broker
        .groups
        .consumer_heartbeat(&broker.replicas, &group, heartbeat, &image)
        .await;
    let response = match result {
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(&answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(wire_assignment)),
        Err(error) => {
            let code = log_group_error(request, &group, &error);
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&error.to_string())))
        }
    };
    request.respond(&response)
}

fn described_assignment(topics: Vec<(uuid::Uuid, String, Vec<i32>)>) -> describe::Assignment {
    let topics = topics
        .into_iter()
        .map(|(id, name, partitions)| {
            describe::TopicPartitions::default()
                .with_topic_id(id)
                .with_topic_name(topic_name(&name))
                .with_partitions(partitions)
        })
        .collect();
    describe::Assignment::default().with_topic_partitions(topics)
}

fn described_member(member: DescribedConsumerMember, version: i16) -> describe::Member {
    let described = describe::Member::default()
        .with_member_id(str_bytes(&member.member_id))
        .with_instance_id(member.instance_id.as_deref().map(str_bytes))
        .with_rack_id(member.rack_id.as_deref().map(str_bytes))
        .with_member_epoch(member.member_epoch)
        .with_client_id(str_bytes(&member.client_id))
        .with_client_host(str_bytes(&member.client_host))
        .with_subscribed_topic_names(
            member
                .subscribed_topic_names
                .iter()
                .map(|t| topic_name(t))
                .collect(),
        )
        .with_subscribed_topic_regex(member.subscribed_topic_regex.as_deref().map(str_bytes))
        .with_assignment(described_assignment(member.assignment))
        .with_target_assignment(described_assignment(member.target_assignment));
    match version >= 1 {
        true => described.with_member_type(MEMBER_TYPE_CONSUMER),
        false => described,
    }
}

/// Answers ConsumerGroupDescribe: each group, or GROUP_ID_NOT_FOUND for one that is not a
/// consumer group.
pub fn describe(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ConsumerGroupDescribeRequest = request.decode()?;
    let image = broker.image();
    let groups = body
        .group_ids
        .iter()
        .map(|id| {
            let group = id.0.to_string();
            let resource = (crate::acl::ResourceType::Group, group.as_str());
            let operations = match body.include_authorized_operations {
                true => broker.authorized_operations(
                    request,
                    resource,
                    super::authorized_operations::GROUP,
                ),
                false => super::authorized_operations::NOT_ASKED,
            };
            let described = DescribedGroup::default()
                .with_group_id(GroupId(id.0.clone()))
                .with_authorized_operations(operations);
            if !broker.authorize(request, crate::acl::Operation::Describe, resource) {
                let refusal = super::refusal::Refusal::GroupAuthorizationFailed;
                let code = super::errors::refusal_error(refusal).code();
                return described.with_error_code(code);
            }
            match broker.groups.consumer_describe(&group, &image) {
                Ok(d) => described
                    .with_group_state(str_bytes(d.state))
                    .with_group_epoch(d.group_epoch)
                    .with_assignment_epoch(d.assignment_epoch)
                    .with_assignor_name(str_bytes(&d.assignor_name))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| described_member(m, request.version()))
                            .collect(),
                    ),
                Err(error) => {
                    let code = log_group_error(request, &group, &error);
                    described
                        .with_error_code(code.code())
                        .with_error_message(Some(str_bytes(&error.to_string())))
                }
            }
        })
        .collect();
    request.respond(&ConsumerGroupDescribeResponse::default().with_groups(groups))
}
