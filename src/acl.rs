//! Access control lists and the decision they make, with the semantics of Kafka's
//! StandardAuthorizer (KIP-11, KIP-290, KIP-801): an ACL binding allows or denies one
//! principal, from one host, one operation on resources named literally, by prefix, or by
//! the wildcard `*`. A DENY that matches wins over any ALLOW; an operation is also allowed
//! by the ones that imply it (DESCRIBE by READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by
//! ALTER_CONFIGS; ALL by itself); super users may do anything; a resource no ACL names at
//! all is open only with `allow.everyone.if.no.acl.found`.
//!
//! Must not: do I/O or know where ACLs are kept; the metadata log holds them
//! (`controller::state`), the request handlers ask [`Authorizer::authorize`].

use serde::{Deserialize, Serialize};

/// A resource type, with its wire code (Kafka's ResourceType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResourceType {
    Any = 1,
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

/// How a binding names resources, with its wire code (Kafka's PatternType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PatternType {
    /// Filters only: either of the two below.
    Any = 1,
    /// Filters only: the bindings that would apply to a resource of this name.
    Match = 2,
    Literal = 3,
    Prefixed = 4,
}

/// An operation, with its wire code (Kafka's AclOperation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operation {
    Any = 1,
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
}

/// ALLOW or DENY, with its wire code (Kafka's AclPermissionType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Permission {
    Any = 1,
    Deny = 2,
    Allow = 3,
}

macro_rules! from_code {
    ($t:ty, $($v:ident),+) => {
        impl $t {
            /// The value of a wire code, if it has one.
            pub fn from_code(code: i8) -> Option<Self> {
                [$(<$t>::$v),+].into_iter().find(|v| *v as i8 == code)
            }
        }
    };
}
from_code!(
    ResourceType,
    Any,
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User
);
from_code!(PatternType, Any, Match, Literal, Prefixed);
from_code!(
    Operation,
    Any,
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens
);
from_code!(Permission, Any, Deny, Allow);

/// The one cluster resource's name, as Kafka names it.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The cluster resource (the only one of its type).
pub const CLUSTER: (ResourceType, &str) = (ResourceType::Cluster, CLUSTER_NAME);
/// A literal resource name or principal that matches every one.
pub const WILDCARD: &str = "*";

/// One ACL (Kafka's AclBinding): `principal` from `host` may (or may not) do `operation`
/// on the resources of `resource_type` that `name` names by `pattern_type`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// A filter of bindings (DescribeAcls, DeleteAcls): each field `None` matches any value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// Why this binding cannot be created, if it cannot (Kafka's checks and words).
    pub fn invalid(&self) -> Option<&'static str> {
        let concrete = !matches!(self.resource_type, ResourceType::Any)
            && matches!(
                self.pattern_type,
                PatternType::Literal | PatternType::Prefixed
            )
            && !matches!(self.operation, Operation::Any)
            && !matches!(self.permission, Permission::Any);
        if !concrete {
            return Some("Invalid ACL creation: the binding must not use ANY or MATCH");
        }
        if self.name.is_empty() {
            return Some("Resource name should not be empty");
        }
        if self.resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return Some("The only valid name for the CLUSTER resource is kafka-cluster");
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => None,
            _ => Some("Could not parse principal from `principal` (expected TYPE:NAME)"),
        }
    }

    /// Whether this binding names resource `name` of `resource_type`.
    fn names(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => self.name == name || self.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(self.name.as_str()),
                PatternType::Any | PatternType::Match => false,
            }
    }

    /// Whether this binding applies to `principal` from `host`.
    fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == "User:*")
            && (self.host == host || self.host == WILDCARD)
    }
}

impl AclFilter {
    /// Whether `binding` matches this filter.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        let resource_type =
            self.resource_type == ResourceType::Any || self.resource_type == binding.resource_type;
        let name_and_pattern = match (self.pattern_type, &self.name) {
            (PatternType::Any, None) => true,
            (PatternType::Any, Some(name)) => binding.name == *name,
            (PatternType::Match, None) => true,
            (PatternType::Match, Some(name)) => binding.names(binding.resource_type, name),
            (pattern, None) => binding.pattern_type == pattern,
            (pattern, Some(name)) => binding.pattern_type == pattern && binding.name == *name,
        };
        let field = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        resource_type
            && name_and_pattern
            && field(&self.principal, &binding.principal)
            && field(&self.host, &binding.host)
            && (self.operation == Operation::Any || self.operation == binding.operation)
            && (self.permission == Permission::Any || self.permission == binding.permission)
    }
}

/// The operations whose ALLOW also allows `operation` (Kafka's implied operations).
fn allowed_by(operation: Operation) -> &'static [Operation] {
    use Operation::*;
    match operation {
        Describe => &[Describe, Read, Write, Delete, Alter, All],
        DescribeConfigs => &[DescribeConfigs, AlterConfigs, All],
        Read => &[Read, All],
        Write => &[Write, All],
        Create => &[Create, All],
        Delete => &[Delete, All],
        Alter => &[Alter, All],
        ClusterAction => &[ClusterAction, All],
        AlterConfigs => &[AlterConfigs, All],
        IdempotentWrite => &[IdempotentWrite, All],
        CreateTokens => &[CreateTokens, All],
        DescribeTokens => &[DescribeTokens, All],
        All | Any => &[All],
    }
}

/// The ACLs in force and the authorizer's settings.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    /// `super.users`: principals allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

/// What a decision rests on: who asks, from where.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// `User:name`.
    pub principal: &'a str,
    pub host: &'a str,
}

impl Authorizer {
    /// Whether `who` may do `operation` on resource `name` of `resource_type`, under
    /// `acls`.
    pub fn authorize(
        &self,
        acls: &[AclBinding],
        who: Requester<'_>,
        operation: Operation,
        (resource_type, name): (ResourceType, &str),
    ) -> bool {
        if self.super_users.iter().any(|s| s == who.principal) {
            return true;
        }
        let mut named = false;
        let mut allowed = false;
        let allowing = allowed_by(operation);
        for acl in acls.iter().filter(|a| a.names(resource_type, name)) {
            named = true;
            if !acl.applies_to(who.principal, who.host) {
                continue;
            }
            let denies = acl.operation == operation || acl.operation == Operation::All;
            match acl.permission {
                Permission::Deny if denies => return false,
                Permission::Allow if allowing.contains(&acl.operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!named && self.allow_if_no_acl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        p: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation: op,
            permission: p,
        }
    }

    const ALICE: Requester<'static> = Requester {
        principal: "User:alice",
        host: "10.0.0.1",
    };

    #[test]
    fn prefixed_allow_grants_exactly_what_it_names_and_deny_wins() {
        let authorizer = Authorizer::default();
        let acls = vec![
            acl(
                "orders-",
                PatternType::Prefixed,
                "User:alice",
                Operation::Write,
                Permission::Allow,
            ),
            acl(
                "orders-secret",
                PatternType::Literal,
                "User:alice",
                Operation::All,
                Permission::Deny,
            ),
        ];
        let topic = |name| (ResourceType::Topic, name);
        assert!(authorizer.authorize(&acls, ALICE, Operation::Write, topic("orders-eu")));
        assert!(
            authorizer.authorize(&acls, ALICE, Operation::Describe, topic("orders-eu")),
            "WRITE implies DESCRIBE"
        );
        assert!(!authorizer.authorize(&acls, ALICE, Operation::Read, topic("orders-eu")));
        assert!(!authorizer.authorize(&acls, ALICE, Operation::Write, topic("payments")));
        assert!(
            !authorizer.authorize(&acls, ALICE, Operation::Write, topic("orders-secret")),
            "DENY wins"
        );
        let bob = Requester {
            principal: "User:bob",
            host: "10.0.0.1",
        };
        assert!(!authorizer.authorize(&acls, bob, Operation::Write, topic("orders-eu")));
    }

    #[test]
    fn wildcards_super_users_hosts_and_resources_without_acls() {
        let mut authorizer = Authorizer {
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        };
        let mut everyone = acl(
            WILDCARD,
            PatternType::Literal,
            "User:*",
            Operation::Read,
            Permission::Allow,
        );
        everyone.host = "10.0.0.1".into();
        let acls = vec![everyone];
        let topic = (ResourceType::Topic, "anything");
        assert!(authorizer.authorize(&acls, ALICE, Operation::Read, topic));
        let elsewhere = Requester {
            principal: "User:alice",
            host: "10.0.0.2",
        };
        assert!(
            !authorizer.authorize(&acls, elsewhere, Operation::Read, topic),
            "host"
        );
        let admin = Requester {
            principal: "User:admin",
            host: "1.2.3.4",
        };
        assert!(authorizer.authorize(
            &[],
            admin,
            Operation::Alter,
            (ResourceType::Cluster, CLUSTER_NAME)
        ));
        let group = (ResourceType::Group, "g");
        assert!(
            !authorizer.authorize(&acls, ALICE, Operation::Read, group),
            "no ACL: denied"
        );
        authorizer.allow_if_no_acl = true;
        assert!(
            authorizer.authorize(&acls, ALICE, Operation::Read, group),
            "no ACL names it"
        );
    }

    #[test]
    fn filters_match_by_pattern_and_bindings_are_checked() {
        let binding = acl(
            "orders-",
            PatternType::Prefixed,
            "User:alice",
            Operation::Write,
            Permission::Allow,
        );
        let any = AclFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        };
        assert!(any.matches(&binding));
        let applying = AclFilter {
            name: Some("orders-eu".into()),
            pattern_type: PatternType::Match,
            ..any.clone()
        };
        assert!(
            applying.matches(&binding),
            "MATCH: the bindings that apply to orders-eu"
        );
        let literal = AclFilter {
            name: Some("orders-".into()),
            pattern_type: PatternType::Literal,
            ..any
        };
        assert!(!literal.matches(&binding));
        assert_eq!(binding.invalid(), None);
        let mut cluster = binding.clone();
        cluster.resource_type = ResourceType::Cluster;
        assert!(cluster.invalid().is_some());
        let mut anonymous = binding;
        anonymous.principal = "alice".into();
        assert!(anonymous.invalid().is_some());
        assert_eq!(Operation::from_code(12), Some(Operation::IdempotentWrite));
        assert_eq!(Operation::from_code(99), None);
    }
}
