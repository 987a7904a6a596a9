//! The authorizer's checks as the request handlers make them (Kafka's AuthHelper): with
//! `authorizer.class.name` set to Kafka's StandardAuthorizer, every API asks whether the
//! request's principal, from its host, may do the operation Kafka checks on the resources it
//! touches, against the ACL bindings of the metadata image (`crate::acl`). Without an
//! authorizer every check passes, as in Kafka. Every denial is logged with the principal,
//! host, operation and resource.

use crate::acl::{Authorizer, Operation, Requester, ResourceType, CLUSTER_NAME};
use crate::config::BrokerConfig;

use super::{Broker, Request};

/// The class name of Kafka's KRaft authorizer, the one `authorizer.class.name` may name.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

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

impl Broker {
    /// Whether an authorizer is configured (ACLs are enforced and managed).
    pub fn has_authorizer(&self) -> bool {
        self.authorizer.is_some()
    }

    /// Whether the request's principal may do `operation` on resource `name` of
    /// `resource_type`; a denial is logged.
    pub fn authorize(
        &self,
        request: &Request,
        operation: Operation,
        (resource_type, name): (ResourceType, &str),
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
        if !allowed {
            tracing::info!(principal = %request.principal, %host, ?operation, ?resource_type,
                resource = name, api = ?request.api_key, "authorization denied");
        }
        allowed
    }

    /// Whether the principal may do `operation` on the cluster.
    pub fn authorize_cluster(&self, request: &Request, operation: Operation) -> bool {
        self.authorize(request, operation, (ResourceType::Cluster, CLUSTER_NAME))
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
                    .is_some_and(|op| self.authorize(request, op, resource))
            })
            .fold(0, |field, bit| field | (1 << bit))
    }
}
