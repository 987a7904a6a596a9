//! Client quotas (KIP-13, KIP-55, KIP-124, KIP-546, KIP-599) as the metadata log holds them:
//! values by quota key for each entity — a user, a client id, both, or an IP, each either
//! named or the default — and which of them applies to a connection, in Kafka's order of
//! precedence (its DefaultQuotaCallback).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The entity types a quota can name (Kafka's ClientQuotaEntity).
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// Bytes per second a client may produce (Kafka's QuotaConfig).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Bytes per second a client may fetch.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Percentage of one request thread's time per second a client may take.
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Partitions per second a client may create or delete (KIP-599).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// Connections per second an IP may open (KIP-612).
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// How a quota key's value is typed (Kafka checks integral ones are whole numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Long,
    Int,
    Double,
}

/// The keys a user and/or client-id entity may set.
pub const USER_CLIENT_KEYS: &[(&str, KeyType)] = &[
    (PRODUCER_BYTE_RATE, KeyType::Long),
    (CONSUMER_BYTE_RATE, KeyType::Long),
    (REQUEST_PERCENTAGE, KeyType::Double),
    (CONTROLLER_MUTATION_RATE, KeyType::Double),
];
/// The keys an IP entity may set.
pub const IP_KEYS: &[(&str, KeyType)] = &[(CONNECTION_CREATION_RATE, KeyType::Int)];

/// One part of an entity: its name, or the default of its type (`<default>` in
/// kafka-configs, a null name on the wire).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// From a wire name: null is the default.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        match name {
            None => EntityName::Default,
            Some(name) => EntityName::Named(name.to_string()),
        }
    }

    /// The wire name: null for the default.
    pub fn wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(name) => Some(name),
        }
    }
}

/// What a quota applies to: a user, a client id, both, or an IP.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
    pub ip: Option<EntityName>,
}

impl QuotaEntity {
    /// Its parts as (entity type, name), in Kafka's order.
    pub fn parts(&self) -> impl Iterator<Item = (&'static str, &EntityName)> {
        [
            (USER, &self.user),
            (CLIENT_ID, &self.client_id),
            (IP, &self.ip),
        ]
        .into_iter()
        .filter_map(|(kind, name)| Some((kind, name.as_ref()?)))
    }

    fn of(user: Option<EntityName>, client_id: Option<EntityName>) -> QuotaEntity {
        QuotaEntity {
            user,
            client_id,
            ip: None,
        }
    }
}

impl std::fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .parts()
            .map(|(kind, name)| match name {
                EntityName::Default => format!("{kind}=<default>"),
                EntityName::Named(name) => format!("{kind}={name}"),
            })
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

/// One change the metadata log records (Kafka's ClientQuotaRecord): `key` of `entity` set
/// to `value`, or removed when `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaChange {
    pub entity: QuotaEntity,
    pub key: String,
    pub value: Option<f64>,
}

/// Values are checked positive and finite before they are recorded.
impl Eq for QuotaChange {}

/// Quota values by key.
pub type QuotaValues = BTreeMap<String, f64>;

/// Every entity's quotas. Serialized as a list of pairs (the keys are not strings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    from = "Vec<(QuotaEntity, QuotaValues)>",
    into = "Vec<(QuotaEntity, QuotaValues)>"
)]
pub struct ClientQuotas(pub BTreeMap<QuotaEntity, QuotaValues>);

impl From<Vec<(QuotaEntity, QuotaValues)>> for ClientQuotas {
    fn from(pairs: Vec<(QuotaEntity, QuotaValues)>) -> Self {
        ClientQuotas(pairs.into_iter().collect())
    }
}

impl From<ClientQuotas> for Vec<(QuotaEntity, QuotaValues)> {
    fn from(quotas: ClientQuotas) -> Self {
        quotas.0.into_iter().collect()
    }
}

impl Eq for ClientQuotas {}

/// Whom a connection's usage is counted for (Kafka's quota metric tags): the user and the
/// client id, either left empty when the quota that applies is shared by all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaTags {
    pub user: String,
    pub client_id: String,
}

impl ClientQuotas {
    /// Whether any entity sets `key`.
    pub fn any(&self, key: &str) -> bool {
        self.0.values().any(|values| values.contains_key(key))
    }

    fn value(&self, entity: &QuotaEntity, key: &str) -> Option<f64> {
        self.0.get(entity)?.get(key).copied()
    }

    /// The usage tags of a client (`user` is the principal's name, without `User:`) for
    /// quota `key`: Kafka's eight levels, most specific first, decide whether the user,
    /// the client id or both count.
    pub fn tags(&self, key: &str, user: &str, client_id: &str) -> QuotaTags {
        let named = |name: &str| Some(EntityName::Named(name.to_string()));
        let default = || Some(EntityName::Default);
        let both = QuotaTags {
            user: user.to_string(),
            client_id: client_id.to_string(),
        };
        let levels = [
            (QuotaEntity::of(named(user), named(client_id)), true, true),
            (QuotaEntity::of(named(user), default()), true, true),
            (QuotaEntity::of(named(user), None), true, false),
            (QuotaEntity::of(default(), named(client_id)), true, true),
            (QuotaEntity::of(default(), default()), true, true),
            (QuotaEntity::of(default(), None), true, false),
        ];
        for (entity, by_user, by_client) in levels {
            if self.value(&entity, key).is_some() {
                return QuotaTags {
                    user: if by_user { both.user } else { String::new() },
                    client_id: if by_client {
                        both.client_id
                    } else {
                        String::new()
                    },
                };
            }
        }
        QuotaTags {
            user: String::new(),
            client_id: both.client_id,
        }
    }

    /// The quota `key` bounds usage counted under `tags` with, if any (Kafka's
    /// DefaultQuotaCallback.quotaLimit).
    pub fn limit(&self, key: &str, tags: &QuotaTags) -> Option<f64> {
        let named = |name: &str| Some(EntityName::Named(name.to_string()));
        let default = || Some(EntityName::Default);
        let (user, client_id) = (tags.user.as_str(), tags.client_id.as_str());
        let candidates = match (user.is_empty(), client_id.is_empty()) {
            (false, false) => vec![
                QuotaEntity::of(named(user), named(client_id)),
                QuotaEntity::of(named(user), default()),
                QuotaEntity::of(default(), named(client_id)),
                QuotaEntity::of(default(), default()),
            ],
            (false, true) => vec![
                QuotaEntity::of(named(user), None),
                QuotaEntity::of(default(), None),
            ],
            (true, false) => vec![
                QuotaEntity::of(None, named(client_id)),
                QuotaEntity::of(None, default()),
            ],
            (true, true) => Vec::new(),
        };
        candidates.iter().find_map(|e| self.value(e, key))
    }

    /// The connection creation rate an IP is bounded by: its own, else the default.
    pub fn ip_limit(&self, ip: &str) -> Option<f64> {
        let of = |name| QuotaEntity {
            ip: Some(name),
            ..QuotaEntity::default()
        };
        self.value(
            &of(EntityName::Named(ip.to_string())),
            CONNECTION_CREATION_RATE,
        )
        .or_else(|| self.value(&of(EntityName::Default), CONNECTION_CREATION_RATE))
    }

    /// Applies one change: a value sets its key, none removes it (and the entity with its
    /// last key).
    pub fn apply(&mut self, change: &QuotaChange) {
        let QuotaChange { entity, key, value } = change;
        match value {
            Some(value) => {
                self.0
                    .entry(entity.clone())
                    .or_default()
                    .insert(key.to_string(), *value);
            }
            None => {
                if let Some(values) = self.0.get_mut(entity) {
                    values.remove(key);
                    if values.is_empty() {
                        self.0.remove(entity);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(entity: QuotaEntity, value: Option<f64>) -> QuotaChange {
        QuotaChange {
            entity,
            key: PRODUCER_BYTE_RATE.to_string(),
            value,
        }
    }

    fn set(quotas: &mut ClientQuotas, user: Option<EntityName>, client: Option<EntityName>) {
        quotas.apply(&change(QuotaEntity::of(user, client), Some(1.0)));
    }

    fn named(name: &str) -> Option<EntityName> {
        Some(EntityName::Named(name.to_string()))
    }

    #[test]
    fn without_user_quotas_usage_counts_by_client_id() {
        let mut quotas = ClientQuotas::default();
        set(&mut quotas, None, Some(EntityName::Default));
        let tags = quotas.tags(PRODUCER_BYTE_RATE, "alice", "app");
        assert_eq!((tags.user.as_str(), tags.client_id.as_str()), ("", "app"));
        assert_eq!(quotas.limit(PRODUCER_BYTE_RATE, &tags), Some(1.0));
    }

    #[test]
    fn a_user_quota_is_shared_by_the_users_client_ids() {
        let mut quotas = ClientQuotas::default();
        set(&mut quotas, named("alice"), None);
        let tags = quotas.tags(PRODUCER_BYTE_RATE, "alice", "app");
        assert_eq!((tags.user.as_str(), tags.client_id.as_str()), ("alice", ""));
        assert_eq!(quotas.limit(PRODUCER_BYTE_RATE, &tags), Some(1.0));
        let bob = quotas.tags(PRODUCER_BYTE_RATE, "bob", "app");
        assert_eq!(quotas.limit(PRODUCER_BYTE_RATE, &bob), None);
    }

    #[test]
    fn the_most_specific_level_wins() {
        let mut quotas = ClientQuotas::default();
        set(&mut quotas, Some(EntityName::Default), None);
        let both = QuotaEntity::of(named("alice"), named("app"));
        quotas.apply(&change(both, Some(5.0)));
        let tags = quotas.tags(PRODUCER_BYTE_RATE, "alice", "app");
        assert_eq!(quotas.limit(PRODUCER_BYTE_RATE, &tags), Some(5.0));
        let other = quotas.tags(PRODUCER_BYTE_RATE, "alice", "other");
        assert_eq!(
            (other.user.as_str(), other.client_id.as_str()),
            ("alice", "")
        );
        assert_eq!(quotas.limit(PRODUCER_BYTE_RATE, &other), Some(1.0));
    }

    #[test]
    fn removing_the_last_key_removes_the_entity_and_pairs_round_trip() {
        let mut quotas = ClientQuotas::default();
        let entity = QuotaEntity::of(named("alice"), None);
        quotas.apply(&change(entity.clone(), Some(2.0)));
        let json = serde_json::to_string(&quotas).expect("encode");
        let back: ClientQuotas = serde_json::from_str(&json).expect("decode");
        assert_eq!(back, quotas);
        quotas.apply(&change(entity, None));
        assert!(quotas.0.is_empty());
    }
}
