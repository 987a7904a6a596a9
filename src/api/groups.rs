//! The classic group protocol and group administration: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, ListGroups, DescribeGroups and DeleteGroups, answered by the group
//! coordinator. JoinGroup and SyncGroup may park until the rebalance moves on.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest,
    SyncGroupResponse,
};

use super::errors::group_error;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType, CLUSTER};
use crate::group::{GroupError, JoinRequest, LeavingMember, SyncRequest};

/// JoinGroup from v7 and SyncGroup from v5 carry the protocol type; JoinGroup's protocol
/// name becomes nullable at v7.
const JOIN_NULLABLE_PROTOCOL_VERSION: i16 = 7;
/// JoinGroup v4+ makes a new member rejoin with the id it is given (KIP-394).
const JOIN_REQUIRES_MEMBER_ID_VERSION: i16 = 4;
/// JoinGroup v9 (KIP-814) has `skip_assignment`.
const JOIN_SKIP_ASSIGNMENT_VERSION: i16 = 9;
/// LeaveGroup v3+ names several members (KIP-345).
const LEAVE_BATCHED_VERSION: i16 = 3;

/// Logs a refused group request: debug for the client's doing, error for the broker's.
pub fn log_group_error(request: &Request, group: &str, error: &GroupError) -> ResponseError {
    let code = group_error(error);
    let api = request.api_key;
    match super::errors::is_client_error(code) && !matches!(error, GroupError::Storage { .. }) {
        true => {
            tracing::debug!(client = %request.client, ?api, group, %error, "group request refused")
        }
        false => {
            tracing::error!(client = %request.client, ?api, group, %error, "group request failed")
        }
    }
    code
}

fn opt(s: &Option<kafka_protocol::protocol::StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

/// Answers JoinGroup.
pub async fn join_group(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: JoinGroupRequest = request.decode()?;
    let version = request.version();
    let group = body.group_id.0.to_string();
    let join = JoinRequest {
        member_id: body.member_id.to_string(),
        group_instance_id: opt(&body.group_instance_id),
        client_id: opt(&request.header.client_id).unwrap_or_default(),
        client_host: format!("/{}", request.client.ip()),
        session_timeout_ms: body.session_timeout_ms,
        rebalance_timeout_ms: match version {
            0 => body.session_timeout_ms,
            _ => body.rebalance_timeout_ms,
        },
        protocol_type: body.protocol_type.to_string(),
        protocols: body
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= JOIN_REQUIRES_MEMBER_ID_VERSION,
        supports_skip_assignment: version >= JOIN_SKIP_ASSIGNMENT_VERSION,
    };
    let nullable = version >= JOIN_NULLABLE_PROTOCOL_VERSION;
    let response = match broker.groups.join(&broker.replicas, &group, join).await {
        Ok(joined) => JoinGroupResponse::default()
            .with_generation_id(joined.generation_id)
            .with_protocol_type(joined.protocol_type.map(|t| str_bytes(&t)))
            .with_protocol_name(Some(str_bytes(&joined.protocol_name.unwrap_or_default())))
            .with_leader(str_bytes(&joined.leader))
            .with_skip_assignment(joined.skip_assignment)
            .with_member_id(str_bytes(&joined.member_id))
            .with_members(
                joined
                    .members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(str_bytes(&m.member_id))
                            .with_group_instance_id(m.group_instance_id.map(|i| str_bytes(&i)))
                            .with_metadata(m.metadata)
                    })
                    .collect(),
            ),
        Err(error) => {
            let code = log_group_error(request, &group, &error);
            let member_id = match &error {
                GroupError::MemberIdRequired { member, .. } => str_bytes(member),
                _ => body.member_id.clone(),
            };
            JoinGroupResponse::default()
                .with_error_code(code.code())
                .with_generation_id(-1)
                .with_protocol_name((!nullable).then(|| str_bytes("")))
                .with_member_id(member_id)
        }
    };
    request.respond(&response)
}

/// Answers SyncGroup.
pub async fn sync_group(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: SyncGroupRequest = request.decode()?;
    let group = body.group_id.0.to_string();
    let sync = SyncRequest {
        member_id: body.member_id.to_string(),
        group_instance_id: opt(&body.group_instance_id),
        generation_id: body.generation_id,
        protocol_type: opt(&body.protocol_type),
        protocol_name: opt(&body.protocol_name),
        assignments: body
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let response = match broker.groups.sync(&broker.replicas, &group, sync).await {
        Ok(synced) => SyncGroupResponse::default()
            .with_protocol_type(synced.protocol_type.map(|t| str_bytes(&t)))
            .with_protocol_name(synced.protocol_name.map(|n| str_bytes(&n)))
            .with_assignment(synced.assignment),
        Err(error) => SyncGroupResponse::default()
            .with_error_code(log_group_error(request, &group, &error).code()),
    };
    request.respond(&response)
}

/// Answers Heartbeat.
pub fn heartbeat(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: HeartbeatRequest = request.decode()?;
    let group = body.group_id.0.to_string();
    let instance = opt(&body.group_instance_id);
    let result = broker.groups.heartbeat(
        &broker.replicas,
        &group,
        &body.member_id,
        instance.as_deref(),
        body.generation_id,
    );
    let code = match result {
        Ok(()) => 0,
        Err(error) => log_group_error(request, &group, &error).code(),
    };
    request.respond(&HeartbeatResponse::default().with_error_code(code))
}

/// Answers LeaveGroup: v0-2 name one member, v3+ a list with per-member errors.
pub fn leave_group(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: LeaveGroupRequest = request.decode()?;
    let group = body.group_id.0.to_string();
    let batched = request.version() >= LEAVE_BATCHED_VERSION;
    let leaving: Vec<LeavingMember> = match batched {
        true => body
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: opt(&m.group_instance_id),
            })
            .collect(),
        false => vec![LeavingMember {
            member_id: body.member_id.to_string(),
            group_instance_id: None,
        }],
    };
    let response = match broker.groups.leave(&broker.replicas, &group, &leaving) {
        Err(error) => LeaveGroupResponse::default()
            .with_error_code(log_group_error(request, &group, &error).code()),
        Ok(results) if !batched => {
            let code = match results.into_iter().next() {
                Some(Err(error)) => log_group_error(request, &group, &error).code(),
                _ => 0,
            };
            LeaveGroupResponse::default().with_error_code(code)
        }
        Ok(results) => {
            let members = leaving
                .iter()
                .zip(results)
                .map(|(m, result)| {
                    let code = match result {
                        Ok(()) => 0,
                        Err(error) => log_group_error(request, &group, &error).code(),
                    };
                    MemberResponse::default()
                        .with_member_id(str_bytes(&m.member_id))
                        .with_group_instance_id(m.group_instance_id.as_deref().map(str_bytes))
                        .with_error_code(code)
                })
                .collect();
            LeaveGroupResponse::default().with_members(members)
        }
    };
    request.respond(&response)
}

/// Answers ListGroups (v4 filters by state, v5 by type).
pub fn list_groups(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ListGroupsRequest = request.decode()?;
    let states: Vec<String> = body.states_filter.iter().map(|s| s.to_string()).collect();
    let types: Vec<String> = body.types_filter.iter().map(|s| s.to_string()).collect();
    // Every group with cluster DESCRIBE, else those the principal may describe (Kafka).
    let all = broker.permits(request, Operation::Describe, CLUSTER);
    let groups = broker
        .groups
        .list_groups(&states, &types)
        .into_iter()
        .filter(|g| {
            all || broker.permits(
                request,
                Operation::Describe,
                (ResourceType::Group, &g.group_id),
            )
        })
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(str_bytes(&g.group_id)))
                .with_protocol_type(str_bytes(&g.protocol_type))
                .with_group_state(str_bytes(g.state))
                .with_group_type(str_bytes(g.group_type))
        })
        .collect();
    request.respond(&ListGroupsResponse::default().with_groups(groups))
}

/// Answers DescribeGroups. An unknown group is described as Dead with no error before
/// v6, and with GROUP_ID_NOT_FOUND from v6, as Kafka does.
pub fn describe_groups(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeGroupsRequest = request.decode()?;
    let groups = body
        .groups
        .iter()
        .map(|id| describe_one(broker, request, id, body.include_authorized_operations))
        .collect();
    request.respond(&DescribeGroupsResponse::default().with_groups(groups))
}

fn describe_one(
    broker: &Broker,
    request: &Request,
    id: &GroupId,
    operations_asked: bool,
) -> DescribedGroup {
    use super::authorized_operations::{GROUP, NOT_ASKED};
    let group = id.0.to_string();
    let resource = (ResourceType::Group, group.as_str());
    let described = DescribedGroup::default()
        .with_group_id(id.clone())
        .with_authorized_operations(match operations_asked {
            true => broker.authorized_operations(request, resource, GROUP),
            false => NOT_ASKED,
        });
    if !broker.authorize(request, Operation::Describe, resource) {
        let code = super::errors::refusal_error(super::refusal::Refusal::GroupAuthorizationFailed);
        return described
            .with_error_code(code.code())
            .with_authorized_operations(NOT_ASKED);
    }
    match broker.groups.describe(&group) {
        Ok(d) => described
            .with_group_state(str_bytes(d.state))
            .with_protocol_type(str_bytes(&d.protocol_type))
            .with_protocol_data(str_bytes(&d.protocol_data))
            .with_members(
                d.members
                    .into_iter()
                    .map(|m| {
                        DescribedGroupMember::default()
                            .with_member_id(str_bytes(&m.member_id))
                            .with_group_instance_id(m.group_instance_id.as_deref().map(str_bytes))
                            .with_client_id(str_bytes(&m.client_id))
                            .with_client_host(str_bytes(&m.client_host))
                            .with_member_metadata(m.metadata)
                            .with_member_assignment(m.assignment)
                    })
                    .collect(),
            ),
        Err(GroupError::GroupIdNotFound { .. }) if request.version() < 6 => {
            described.with_group_state(str_bytes("Dead"))
        }
        Err(error) => {
            let code = log_group_error(request, &group, &error);
            let dead = described
                .with_error_code(code.code())
                .with_group_state(str_bytes("Dead"));
            match request.version() >= 6 {
                true => dead.with_error_message(Some(str_bytes(&error.to_string()))),
                false => dead,
            }
        }
    }
}

/// Answers DeleteGroups.
pub fn delete_groups(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DeleteGroupsRequest = request.decode()?;
    let results = body
        .groups_names
        .iter()
        .map(|id| {
            let group = id.0.to_string();
            let resource = (ResourceType::Group, group.as_str());
            let code = if !broker.authorize(request, Operation::Delete, resource) {
                let refusal = super::refusal::Refusal::GroupAuthorizationFailed;
                super::errors::refusal_error(refusal).code()
            } else {
                match broker.groups.delete_group(&broker.replicas, &group) {
                    Ok(()) => 0,
                    Err(error) => log_group_error(request, &group, &error).code(),
                }
            };
            DeletableGroupResult::default()
                .with_group_id(id.clone())
                .with_error_code(code)
        })
        .collect();
    request.respond(&DeleteGroupsResponse::default().with_results(results))
}
