//! Immutable snapshots of the cluster metadata: brokers, topics with their ids, partition
//! counts and config overrides. Every request handler reads one snapshot; the controller
//! publishes a new one after every change, so readers never see a half-made change.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::dynamic::Layers;
use crate::config::ConfigMap;
use crate::sasl::{ScramCredential, ScramMechanism};

/// SCRAM credentials by user, then mechanism name (`SCRAM-SHA-256`, `SCRAM-SHA-512`).
pub type ScramCredentials = BTreeMap<String, BTreeMap<String, ScramCredential>>;

/// The configs of a resource that sets none.
static NO_CONFIGS: ConfigMap = ConfigMap::new();

pub mod client_quotas;
pub mod features;
pub mod uuid_text;

/// "No leader" in a partition's leader field, as in Kafka.
pub const NO_LEADER: i32 = -1;

/// A registered broker (KIP-631's broker registration), as the controller quorum knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerImage {
    pub node_id: i32,
    /// The inter-broker listener's advertised address (replication, transaction markers).
    pub host: String,
    pub port: u16,
    /// Every client listener's advertised address, by listener name; a client is told the
    /// addresses of the listener it connected to. Empty in a registration written before
    /// brokers had several listeners: `host` and `port` then serve every listener.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// `broker.rack`, when the broker has one.
    #[serde(default)]
    pub rack: Option<String>,
    /// Chosen anew by every start of the broker process; tells a restart from a retry.
    pub incarnation_id: Uuid,
    /// The metadata offset of the registration record: heartbeats must carry it.
    pub broker_epoch: i64,
    /// A fenced broker leads nothing and is not shown to clients.
    pub fenced: bool,
    /// Set by a controlled shutdown until the broker is fenced.
    pub in_controlled_shutdown: bool,
    /// Replicas (topic, partition) this incarnation reported on a failed log directory
    /// (KIP-112): they lead nothing and join no ISR until the broker registers again.
    #[serde(default)]
    pub offline_replicas: std::collections::BTreeSet<(String, i32)>,
}

/// A broker's advertised address on one of its listeners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The listener's name, upper case (`PLAINTEXT`, `SSL`, `EXTERNAL`, ...).
    pub listener: String,
    pub host: String,
    pub port: u16,
}

impl BrokerImage {
    /// Where a client connected to `listener` reaches this broker; `None` when the broker
    /// has no listener of that name (Kafka leaves such a broker out of its answers).
    pub fn endpoint(&self, listener: &str) -> Option<(&str, u16)> {
        if self.endpoints.is_empty() {
            return Some((&self.host, self.port));
        }
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .map(|e| (e.host.as_str(), e.port))
    }
}

/// One partition's assignment and leadership.
///
/// Invariant: the leader, when there is one, is in the ISR; the ISR is a non-empty subset of
/// the replicas; `leader_epoch` grows on every change of leader and `partition_epoch` on every
/// change at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionImage {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// [`NO_LEADER`] when no replica may lead.
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Eligible leader replicas (KIP-966): replicas that left the ISR while it was below
    /// `min.insync.replicas`, so that they hold every record below the high watermark
    /// (which did not move meanwhile); one may lead when no ISR member can.
    #[serde(default)]
    pub elr: Vec<i32>,
    /// The last known leader while the partition has no leader (KIP-966's `LastKnownElr`
    /// as Kafka fills it by default): elected when it returns if neither an ISR member
    /// nor an eligible replica can lead.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
    /// Replicas a reassignment is adding (KIP-455): in `replicas` until it completes.
    #[serde(default)]
    pub adding_replicas: Vec<i32>,
    /// Replicas a reassignment is removing: in `replicas` until it completes.
    #[serde(default)]
    pub removing_replicas: Vec<i32>,
}

impl PartitionImage {
    /// Whether a reassignment of this partition is under way.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// A new partition: every replica in sync, the first one leading, epochs at 0.
    pub fn new(replicas: Vec<i32>) -> Self {
        PartitionImage {
            leader: replicas.first().copied().unwrap_or(NO_LEADER),
            isr: replicas.clone(),
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }
    }
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: Uuid,
    /// Every partition, by index.
    pub partitions: Vec<PartitionImage>,
    /// Topic-level config overrides.
    pub configs: ConfigMap,
}

impl TopicImage {
    /// The number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.partitions.len() as i32
    }

    /// Partition `index`, if the topic has it.
    pub fn partition(&self, index: i32) -> Option<&PartitionImage> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }
}

/// A consistent view of the cluster at one metadata offset.
#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    pub cluster_id: String,
    /// The active controller, -1 when none is known.
    pub controller_id: i32,
    /// Every registered broker, fenced or not, by node id.
    pub brokers: Vec<BrokerImage>,
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    /// The finalized level of every feature served ([`features::finalized`]).
    pub features: BTreeMap<String, i16>,
    /// Dynamic broker configs by broker id, the cluster-wide default under "".
    pub broker_configs: Arc<BTreeMap<String, ConfigMap>>,
    /// Group configs (KIP-848) by group id.
    pub group_configs: Arc<BTreeMap<String, ConfigMap>>,
    /// SCRAM credentials by user, then mechanism name (KIP-554).
    pub scram_credentials: Arc<ScramCredentials>,
    /// The ACL bindings in force.
    pub acls: Arc<Vec<crate::acl::AclBinding>>,
    /// Client quotas by entity.
    pub client_quotas: Arc<client_quotas::ClientQuotas>,
    /// Delegation tokens by id.
    pub delegation_tokens: Arc<BTreeMap<String, crate::sasl::delegation_token::DelegationToken>>,
    /// The Raft log index of the last record applied to this image.
    pub offset: u64,
}

impl MetadataImage {
    /// The registered broker `node_id`.
    pub fn broker(&self, node_id: i32) -> Option<&BrokerImage> {
        self.brokers.iter().find(|b| b.node_id == node_id)
    }

    /// The controller id to show clients: the active controller when it is an unfenced
    /// broker (combined mode), else an unfenced broker, which forwards admin requests to
    /// the active controller (as Kafka does since KIP-590); -1 while no controller is known
    /// (an election) or no broker is unfenced.
    pub fn controller_for_clients(&self) -> i32 {
        if self.controller_id < 0 {
            return -1;
        }
        let active = self
            .broker(self.controller_id)
            .filter(|b| !b.fenced)
            .map(|b| b.node_id);
        active
            .or_else(|| self.unfenced_brokers().next().map(|b| b.node_id))
            .unwrap_or(-1)
    }

    /// The brokers clients may use: registered and not fenced.
    pub fn unfenced_brokers(&self) -> impl Iterator<Item = &BrokerImage> {
        self.brokers.iter().filter(|b| !b.fenced)
    }

    /// The dynamic config layers of broker `node_id`: its own, and the cluster default.
    pub fn broker_layers(&self, node_id: i32) -> Layers<'_> {
        Layers {
            own: self
                .broker_configs
                .get(&node_id.to_string())
                .unwrap_or(&NO_CONFIGS),
            cluster_default: self.broker_configs.get("").unwrap_or(&NO_CONFIGS),
        }
    }

    /// The SCRAM credential of `user` for `mechanism`, if it has one.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<&ScramCredential> {
        self.scram_credentials.get(user)?.get(mechanism.name())
    }

    /// The configs group `group` sets itself (none for most groups).
    pub fn group_configs(&self, group: &str) -> &ConfigMap {
        self.group_configs.get(group).unwrap_or(&NO_CONFIGS)
    }

    /// The finalized level of feature `name` (0: not finalized).
    pub fn feature_level(&self, name: &str) -> i16 {
        self.features.get(name).copied().unwrap_or(0)
    }

    /// The topic called `name`.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    /// The topic with id `topic_id`.
    pub fn topic_by_id(&self, topic_id: Uuid) -> Option<&Arc<TopicImage>> {
        self.topics.values().find(|t| t.topic_id == topic_id)
    }
}

/// Topics the brokers keep for themselves (`__consumer_offsets`, later
/// `__transaction_state`): flagged internal in Metadata and closed to client produce.
pub fn is_internal_topic(name: &str) -> bool {
    matches!(name, "__consumer_offsets" | "__transaction_state")
}

/// The longest legal topic name (Apache Kafka's `Topic.MAX_NAME_LENGTH`).
pub const TOPIC_NAME_LENGTH_MAX: usize = 249;

/// Checks a topic name as Apache Kafka does: 1 to 249 characters from `[a-zA-Z0-9._-]`,
/// and neither `.` nor `..`.
pub fn validate_topic_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("topic name is empty");
    }
    if name == "." || name == ".." {
        return Err("topic name cannot be \".\" or \"..\"");
    }
    if name.len() > TOPIC_NAME_LENGTH_MAX {
        return Err("topic name is longer than 249 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(
            "topic name contains characters other than ASCII alphanumerics, '.', '_' and '-'",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name("spaces are bad").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
    }
}
