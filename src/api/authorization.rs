//! The authorizer's checks as the request handlers make them (Kafka's AuthHelper): with
//! `authorizer.class.name` set to Kafka's StandardAuthorizer, every API asks whether the
//! request's principal, from its host, may do the operation Kafka checks on the resources it
//! touches, against the ACL bindings of the metadata image (`crate::acl`). Without an
//! authorizer every check passes, as in Kafka. Every denial is logged with the principal,
//! host, operation and resource.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, ApiKey, ConsumerGroupHeartbeatRequest, EndTxnRequest, HeartbeatRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    SyncGroupRequest, TxnOffsetCommitRequest,
};

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::transactions::ADD_PARTITIONS_BATCHED_VERSION;
use super::{Broker, HandlerError, Request};
use crate::acl::{Authorizer, Operation, Requester, ResourceType, CLUSTER};
use crate::config::security::STANDARD_AUTHORIZER;
use crate::config::BrokerConfig;

/// The authorizer `config` asks for (`None`: no authorizer, everything is allowed).
pub fn from_config(config: &BrokerConfig) -> Option<Authorizer> {
    let class = config
        .get("authorizer.class.name")
        .unwrap_or_default()
        .trim();
    if class != STANDARD_AUTHORIZER {
        return None;
    }
    let super_users = config
        .get("super.users")
        .unwrap_or_default()
        .split(';')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect();
    let allow_if_no_acl = config.get("allow.everyone.if.no.acl.found") == Some("true");
    Some(Authorizer {
        super_users,
        allow_if_no_acl,
    })
}

/// The APIs Kafka authorizes with one operation on the cluster, and that operation.
const CLUSTER_CHECKS: &[(ApiKey, Operation)] = &[
    (ApiKey::WriteTxnMarkers, Operation::ClusterAction),
    (ApiKey::AddPartitionsToTxn, Operation::ClusterAction),
    (ApiKey::ElectLeaders, Operation::Alter),
    (ApiKey::AlterPartitionReassignments, Operation::Alter),
    (ApiKey::ListPartitionReassignments, Operation::Describe),
    (ApiKey::UpdateFeatures, Operation::Alter),
    (ApiKey::DescribeQuorum, Operation::Describe),
    (ApiKey::DescribeLogDirs, Operation::Describe),
    (ApiKey::AlterReplicaLogDirs, Operation::Alter),
    (ApiKey::DescribeUserScramCredentials, Operation::Describe),
    (ApiKey::AlterUserScramCredentials, Operation::Alter),
    (ApiKey::DescribeClientQuotas, Operation::DescribeConfigs),
    (ApiKey::AlterClientQuotas, Operation::AlterConfigs),
    (ApiKey::ListConfigResources, Operation::DescribeConfigs),
];

impl Broker {
    /// The refusal of a request Kafka authorizes as a whole (one group or transactional id,
    /// one error code): the group APIs need READ on the group, the transaction APIs WRITE
    /// on the transactional id (AddOffsetsToTxn READ on the group too), InitProducerId
    /// without a transactional id IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    pub fn refusal_of_whole_request(
        &self,
        request: &Request,
    ) -> Result<Option<ResponseError>, HandlerError> {
        if self.authorizer.is_none() {
            return Ok(None);
        }
        let group = |group: &str| {
            (!self.authorize(request, Operation::Read, (ResourceType::Group, group)))
                .then(|| refusal_error(Refusal::GroupAuthorizationFailed))
        };
        let transaction = |id: &str| {
            (!self.authorize(
                request,
                Operation::Write,
                (ResourceType::TransactionalId, id),
            ))
            .then(|| refusal_error(Refusal::TransactionalIdAuthorizationFailed))
        };
        Ok(match request.api_key {
            ApiKey::JoinGroup => group(&request.decode::<JoinGroupRequest>()?.group_id),
            ApiKey::SyncGroup => group(&request.decode::<SyncGroupRequest>()?.group_id),
            ApiKey::Heartbeat => group(&request.decode::<HeartbeatRequest>()?.group_id),
            ApiKey::LeaveGroup => group(&request.decode::<LeaveGroupRequest>()?.group_id),
            ApiKey::OffsetCommit => group(&request.decode::<OffsetCommitRequest>()?.group_id),
            ApiKey::ConsumerGroupHeartbeat => {
                group(&request.decode::<ConsumerGroupHeartbeatRequest>()?.group_id)
            }
            ApiKey::EndTxn => transaction(&request.decode::<EndTxnRequest>()?.transactional_id),
            ApiKey::AddOffsetsToTxn => {
                let body: AddOffsetsToTxnRequest = request.decode()?;
                transaction(&body.transactional_id).or_else(|| group(&body.group_id))
            }
            ApiKey::TxnOffsetCommit => {
                let body: TxnOffsetCommitRequest = request.decode()?;
                transaction(&body.transactional_id).or_else(|| group(&body.group_id))
            }
            // Sent by brokers: Kafka asks cluster ALTER (without logging its denial), then
            // CLUSTER_ACTION.
            ApiKey::WriteTxnMarkers if self.permits(request, Operation::Alter, CLUSTER) => None,
            ApiKey::AddPartitionsToTxn if request.version() < ADD_PARTITIONS_BATCHED_VERSION => {
                None
            }
            ApiKey::InitProducerId => {
                let body: InitProducerIdRequest = request.decode()?;
                match body.transactional_id.as_deref().filter(|id| !id.is_empty()) {
                    Some(id) => transaction(id),
                    None => (!self.authorize_cluster(request, Operation::IdempotentWrite)
                        && !self.authorize_any(request, Operation::Write, ResourceType::Topic))
                    .then(|| refusal_error(Refusal::ClusterAuthorizationFailed)),
                }
            }
            api_key => CLUSTER_CHECKS
                .iter()
                .find(|(key, _)| *key == api_key)
                .and_then(|(_, operation)| self.check_cluster(request, *operation).err()),
        })
    }

    /// Whether the principal may do `operation` on the cluster, or the refusal
    /// (CLUSTER_AUTHORIZATION_FAILED) to answer.
    pub fn check_cluster(
        &self,
        request: &Request,
        operation: Operation,
    ) -> Result<(), ResponseError> {
        match self.authorize_cluster(request, operation) {
            true => Ok(()),
            false => Err(refusal_error(Refusal::ClusterAuthorizationFailed)),
        }
    }

    /// The refusal of a config operation (DESCRIBE_CONFIGS or ALTER_CONFIGS) on config
    /// resource `name` of wire type `resource_type`, if refused: a topic's on the topic, a
    /// broker's or its loggers' on the cluster, a group's on the group (Kafka's checks).
    pub fn config_refusal(
        &self,
        request: &Request,
        operation: Operation,
        (resource_type, name): (i8, &str),
    ) -> Option<ResponseError> {
        const TOPIC: i8 = 2;
        const GROUP: i8 = 32;
        let (resource, refusal) = match resource_type {
            TOPIC => (
                (ResourceType::Topic, name),
                Refusal::TopicAuthorizationFailed,
            ),
            GROUP => (
                (ResourceType::Group, name),
                Refusal::GroupAuthorizationFailed,
            ),
            _ => (CLUSTER, Refusal::ClusterAuthorizationFailed),
        };
        (!self.authorize(request, operation, resource)).then(|| refusal_error(refusal))
    }

    /// Whether an authorizer is configured (ACLs are enforced and managed).
    pub fn has_authorizer(&self) -> bool {
        self.authorizer.is_some()
    }

    /// Whether the request's principal may do `operation` on resource `name` of
    /// `resource_type`; a denial is logged at INFO (Kafka's authorizer log).
    pub fn authorize(
        &self,
        request: &Request,
        operation: Operation,
        resource: (ResourceType, &str),
    ) -> bool {
        self.decide(request, operation, resource, true)
    }

    /// As [`Broker::authorize`], for a check that only filters what is shown (all topics,
    /// listed groups and transactions, authorized operations): a denial is logged at
    /// DEBUG, as Kafka does not log those.
    pub fn permits(
        &self,
        request: &Request,
        operation: Operation,
        resource: (ResourceType, &str),
    ) -> bool {
        self.decide(request, operation, resource, false)
    }

    fn decide(
        &self,
        request: &Request,
        operation: Operation,
        (resource_type, name): (ResourceType, &str),
        log_denied: bool,
    ) -> bool {
        let Some(authorizer) = &self.authorizer else {
            return true;
        };
        let host = request.client.ip().to_string();
        let who = Requester {
            principal: &request.principal,
            host: &host,
        };
        let acls = self.image().acls.clone();
        let allowed = authorizer.authorize(&acls, who, operation, (resource_type, name));
        if !allowed && log_denied {
            tracing::info!(principal = %request.principal, %host, ?operation, ?resource_type,
                resource = name, api = ?request.api_key, "authorization denied");
        } else if !allowed {
            tracing::debug!(principal = %request.principal, %host, ?operation, ?resource_type,
                resource = name, api = ?request.api_key, "not shown: authorization denied");
        }
        allowed
    }

    /// Whether the principal may do `operation` on the cluster.
    pub fn authorize_cluster(&self, request: &Request, operation: Operation) -> bool {
        self.authorize(request, operation, CLUSTER)
    }

    /// Whether some ALLOW binding lets the principal do `operation` on some resource of
    /// `resource_type` (Kafka's authorizeByResourceType, as InitProducerId without a
    /// transactional id asks it for topic WRITE).
    pub fn authorize_any(
        &self,
        request: &Request,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let Some(authorizer) = &self.authorizer else {
            return true;
        };
        if authorizer
            .super_users
            .iter()
            .any(|u| **u == *request.principal)
        {
            return true;
        }
        let host = request.client.ip().to_string();
        let acls = self.image().acls.clone();
        acls.iter().any(|acl| {
            acl.resource_type == resource_type
                && acl.permission == crate::acl::Permission::Allow
                && (acl.operation == operation || acl.operation == Operation::All)
                && (*acl.principal == *request.principal || acl.principal == "User:*")
                && (acl.host == host || acl.host == crate::acl::WILDCARD)
        })
    }

    /// Of the operations `all` (a KIP-430 bit field), those the principal may do on the
    /// resource.
    pub fn authorized_operations(
        &self,
        request: &Request,
        resource: (ResourceType, &str),
        all: i32,
    ) -> i32 {
        if self.authorizer.is_none() {
            return all;
        }
        (0..32)
            .filter(|bit| all & (1 << bit) != 0)
            .filter(|bit| {
                Operation::from_code(*bit as i8)
                    .is_some_and(|op| self.permits(request, op, resource))
            })
            .fold(0, |field, bit| field | (1 << bit))
    }
}
