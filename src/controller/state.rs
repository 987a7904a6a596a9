//! The cluster metadata state machine: the records the controller quorum agrees on through
//! Raft, and the state they build when applied in log order (brokers, topics, partitions,
//! configs, producer id blocks). In the spirit of KRaft's metadata records (KIP-631), in a
//! compact serde form of our own.
//!
//! Must not: do I/O, read clocks or draw random numbers. Applying the same records in the
//! same order gives the same state on every node; whatever is random (topic ids, cluster
//! id) is chosen by the active controller before it proposes the record.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::AclBinding;
use crate::config::ConfigMap;
use crate::metadata::client_quotas::{ClientQuotas, QuotaChange};
use crate::metadata::{
    features, BrokerImage, Endpoint, MetadataImage, PartitionImage, ScramCredentials, TopicImage,
    NO_LEADER,
};
use crate::sasl::delegation_token::DelegationToken;
use crate::sasl::ScramCredential;

/// Producer ids handed out per block (Kafka's ProducerIdsRecord hands out 1000 at a time).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// Past incarnations remembered per broker, to refuse a registration from a stale process.
pub const PAST_INCARNATIONS_MAX: usize = 16;

/// The broker epoch of a registration that follows no clean shutdown.
pub(crate) fn no_epoch() -> i64 {
    -1
}

/// A change of one partition's leader or ISR, as the active controller decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChange {
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
    pub isr: Vec<i32>,
    /// The eligible leader replicas after the change (KIP-966), set by the active
    /// controller when it proposes the change ([`PartitionChange::with_elr`]).
    #[serde(default)]
    pub elr: Vec<i32>,
    /// See [`PartitionImage::last_known_elr`]; set with `elr`.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
    /// The new replica set, with the replicas a reassignment adds and removes (KIP-455;
    /// Kafka's PartitionChangeRecord); `None`: the assignment does not change.
    #[serde(default)]
    pub assignment: Option<Assignment>,
}

/// A partition's replicas while a reassignment runs, or once it is done (`adding` and
/// `removing` empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The target replicas first, then those being removed.
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl PartitionChange {
    /// A change of `topic-partition` to `leader` and `isr`.
    pub fn new(topic: &str, partition: i32, leader: i32, isr: Vec<i32>) -> Self {
        PartitionChange {
            topic: topic.to_string(),
            partition,
            leader,
            isr,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            assignment: None,
        }
    }

    /// Sets the eligible leader replicas this change leaves `current` with: while the new
    /// ISR is smaller than `min_isr` (capped by the replication factor), the members it
    /// loses join the ELR (with strict min ISR the high watermark stood still, so they
    /// hold every record below it); ISR members are never in it; once the ISR is back to
    /// `min_isr` it is empty. A change that leaves the partition without a leader
    /// remembers the last one (`last_known_elr`); one that elects a leader forgets it.
    pub fn with_elr(mut self, current: &PartitionImage, min_isr: usize) -> Self {
        let replicas = self
            .assignment
            .as_ref()
            .map_or(&current.replicas, |a| &a.replicas);
        let min_isr = min_isr.min(replicas.len());
        let below = self.isr.len() < min_isr;
        self.last_known_elr = match (below, self.leader, current.leader) {
            (true, NO_LEADER, NO_LEADER) => current.last_known_elr.clone(),
            (true, NO_LEADER, last) => vec![last],
            _ => Vec::new(),
        };
        self.elr = match below {
            false => Vec::new(),
            true => {
                let mut elr: Vec<i32> = current
                    .elr
                    .iter()
                    .chain(current.isr.iter())
                    .copied()
                    .filter(|r| !self.isr.contains(r) && replicas.contains(r))
                    .collect();
                elr.sort_unstable();
                elr.dedup();
                elr
            }
        };
        self
    }
}

/// One record of the replicated metadata log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// The first record of a cluster: its id, plus what a pre-Raft metadata snapshot held.
    InitCluster {
        cluster_id: String,
        topics: Vec<TopicImage>,
        next_producer_id: i64,
        /// The SCRAM users the cluster starts with (`scram.bootstrap.credentials`, as
        /// `kafka-storage format --add-scram` gives them to Kafka).
        #[serde(default)]
        scram_credentials: ScramCredentials,
    },
    /// A broker process registers; it starts fenced, its epoch is this record's offset.
    RegisterBroker {
        node_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
        /// Every client listener's advertised address (see [`BrokerImage::endpoints`]).
        #[serde(default)]
        endpoints: Vec<Endpoint>,
        /// `broker.rack`, when the broker has one.
        #[serde(default)]
        rack: Option<String>,
        /// The broker epoch its clean-shutdown markers name (KIP-966's
        /// `PreviousBrokerEpoch`), -1 after a crash: only a restart after a clean shutdown
        /// of the registration the controller knows keeps the broker's ELR memberships.
        #[serde(default = "no_epoch")]
        previous_broker_epoch: i64,
    },
    FenceBroker {
        node_id: i32,
        broker_epoch: i64,
    },
    UnfenceBroker {
        node_id: i32,
        broker_epoch: i64,
    },
    /// The broker asked for a controlled shutdown.
    BeginControlledShutdown {
        node_id: i32,
        broker_epoch: i64,
    },
    /// The broker's replicas of these partitions are on a failed log directory.
    ReplicasOffline {
        node_id: i32,
        broker_epoch: i64,
        partitions: Vec<(String, i32)>,
    },
    CreateTopic(TopicImage),
    DeleteTopic {
        name: String,
        topic_id: Uuid,
    },
    /// New partitions, with their replicas, appended to a topic.
    CreatePartitions {
        name: String,
        replicas: Vec<Vec<i32>>,
    },
    /// Replaces a topic's config overrides.
    AlterTopicConfigs {
        name: String,
        configs: ConfigMap,
    },
    /// Leader and ISR changes; epochs are bumped when applied.
    ChangePartitions(Vec<PartitionChange>),
    /// Reserves the next block of producer ids.
    AllocateProducerIds {
        node_id: i32,
    },
    /// Finalizes feature levels (UpdateFeatures; Kafka's FeatureLevelRecord).
    FinalizeFeatures {
        levels: Vec<(String, i16)>,
    },
    /// Sets (`Some`) or removes (`None`) users' SCRAM credentials, each by mechanism name
    /// (AlterUserScramCredentials; Kafka's UserScramCredentialRecord).
    AlterScramCredentials {
        changes: Vec<(String, String, Option<ScramCredential>)>,
    },
    /// Sets and removes client quotas (AlterClientQuotas; Kafka's ClientQuotaRecord).
    AlterClientQuotas {
        changes: Vec<QuotaChange>,
    },
    /// Adds ACL bindings (CreateAcls; Kafka's AccessControlEntryRecord).
    CreateAcls {
        bindings: Vec<AclBinding>,
    },
    /// Removes ACL bindings (DeleteAcls; Kafka's RemoveAccessControlEntryRecord).
    DeleteAcls {
        bindings: Vec<AclBinding>,
    },
    /// Adds or replaces a delegation token (Kafka's DelegationTokenRecord).
    PutDelegationToken(DelegationToken),
    /// Removes delegation tokens, expired or expired by request (Kafka's
    /// RemoveDelegationTokenRecord).
    RemoveDelegationTokens {
        token_ids: Vec<String>,
    },
    /// Replaces the configs of a resource other than a topic (Kafka's ConfigRecord):
    /// dynamic broker configs, group configs. An empty map removes the resource's entry.
    AlterConfigs {
        resource: ConfigResource,
        configs: ConfigMap,
    },
}

/// A resource with configs of its own, besides topics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigResource {
    /// Dynamic configs of broker `Some(id)`, or the cluster-wide default of every broker
    /// (`None`; Kafka's broker resource with an empty name).
    Broker(Option<i32>),
    /// A consumer group's configs (KIP-848).
    Group(String),
}

/// What applying a record produced, returned to whoever proposed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum RecordResult {
    #[default]
    Applied,
    /// The epoch of a registered broker (the registration record's offset).
    Registered { broker_epoch: i64 },
    /// The first id of a reserved block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids.
    ProducerIds { first: i64 },
    /// The record no longer fitted the state when it was applied (e.g. a topic created
    /// twice by racing requests) and changed nothing.
    Rejected { reason: String },
}

/// The replicated state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    pub cluster_id: String,
    pub brokers: BTreeMap<i32, BrokerImage>,
    pub topics: BTreeMap<String, TopicImage>,
    /// Producer ids below this were (or may have been) handed out.
    pub next_producer_id: i64,
    /// Incarnations each broker registered with before its current one.
    pub past_incarnations: BTreeMap<i32, Vec<Uuid>>,
    /// Feature levels finalized by records (the others are at their defaults).
    #[serde(default)]
    pub features: BTreeMap<String, i16>,
    /// Dynamic broker configs by broker id, the cluster-wide default under "".
    #[serde(default)]
    pub broker_configs: BTreeMap<String, ConfigMap>,
    /// Group configs by group id.
    #[serde(default)]
    pub group_configs: BTreeMap<String, ConfigMap>,
    /// SCRAM credentials by user, then mechanism (Kafka's UserScramCredentialRecord).
    #[serde(default)]
    pub scram_credentials: ScramCredentials,
    /// The ACL bindings in force, each once.
    #[serde(default)]
    pub acls: std::collections::BTreeSet<AclBinding>,
    /// Client quotas by entity (Kafka's ClientQuotaRecord).
    #[serde(default)]
    pub client_quotas: ClientQuotas,
    /// Delegation tokens by id.
    #[serde(default)]
    pub delegation_tokens: BTreeMap<String, DelegationToken>,
}

impl ClusterState {
    /// Whether broker `node_id` reported its replica of `topic`-`partition` offline.
    pub fn replica_offline(&self, node_id: i32, topic: &str, partition: i32) -> bool {
        self.brokers.get(&node_id).is_some_and(|b| {
            !b.offline_replicas.is_empty()
                && b.offline_replicas.contains(&(topic.to_string(), partition))
        })
    }
}

fn rejected(reason: impl Into<String>) -> RecordResult {
    RecordResult::Rejected {
        reason: reason.into(),
    }
}

impl ClusterState {
    /// Applies `record`, found at log `offset`.
    pub fn apply(&mut self, offset: u64, record: &Record) -> RecordResult {
        let result = match record {
            Record::InitCluster {
                cluster_id,
                topics,
                next_producer_id,
                scram_credentials,
            } => self.init(cluster_id, topics, *next_producer_id, scram_credentials),
            Record::RegisterBroker {
                node_id,
                incarnation_id,
                host,
                port,
                endpoints,
                rack,
                previous_broker_epoch,
            } => {
                let address = (host.as_str(), *port);
                self.register(
                    offset,
                    (*node_id, *incarnation_id),
                    address,
                    (endpoints, rack.as_deref()),
                    *previous_broker_epoch,
                )
            }
            Record::FenceBroker {
                node_id,
                broker_epoch,
            } => self.set_fenced(*node_id, *broker_epoch, true),
            Record::UnfenceBroker {
                node_id,
                broker_epoch,
            } => self.set_fenced(*node_id, *broker_epoch, false),
            Record::BeginControlledShutdown {
                node_id,
                broker_epoch,
            } => self.with_broker(*node_id, *broker_epoch, |b| b.in_controlled_shutdown = true),
            Record::ReplicasOffline {
                node_id,
                broker_epoch,
                partitions,
            } => self.with_broker(*node_id, *broker_epoch, |b| {
                b.offline_replicas.extend(partitions.iter().cloned());
            }),
            Record::CreateTopic(topic) => self.create_topic(topic),
            Record::DeleteTopic { name, topic_id } => self.delete_topic(name, *topic_id),
            Record::CreatePartitions { name, replicas } => self.create_partitions(name, replicas),
            Record::AlterTopicConfigs { name, configs } => self.alter_topic_configs(name, configs),
            Record::ChangePartitions(changes) => self.change_partitions(changes),
            Record::AllocateProducerIds { .. } => {
                let first = self.next_producer_id;
                self.next_producer_id += PRODUCER_ID_BLOCK_SIZE;
                RecordResult::ProducerIds { first }
            }
            Record::FinalizeFeatures { levels } => {
                self.features.extend(levels.iter().cloned());
                RecordResult::Applied
            }
            Record::AlterConfigs { resource, configs } => self.alter_configs(resource, configs),
            Record::AlterScramCredentials { changes } => self.alter_scram_credentials(changes),
            Record::PutDelegationToken(token) => self.change_tokens(Some(token), &[]),
            Record::RemoveDelegationTokens { token_ids } => self.change_tokens(None, token_ids),
            Record::AlterClientQuotas { changes } => self.alter_client_quotas(changes),
            Record::CreateAcls { bindings } => self.change_acls(bindings, true),
            Record::DeleteAcls { bindings } => self.change_acls(bindings, false),
        };
        self.check_invariants();
        result
    }

    fn alter_topic_configs(&mut self, name: &str, configs: &ConfigMap) -> RecordResult {
        match self.topics.get_mut(name) {
            Some(topic) => {
                topic.configs = configs.clone();
                RecordResult::Applied
            }
            None => rejected(format!("unknown topic {name}")),
        }
    }

    fn alter_client_quotas(&mut self, changes: &[QuotaChange]) -> RecordResult {
        changes.iter().for_each(|c| self.client_quotas.apply(c));
        RecordResult::Applied
    }

    fn change_acls(&mut self, bindings: &[AclBinding], add: bool) -> RecordResult {
        for binding in bindings {
            match add {
                true => self.acls.insert(binding.clone()),
                false => self.acls.remove(binding),
            };
        }
        RecordResult::Applied
    }

    fn change_tokens(&mut self, put: Option<&DelegationToken>, remove: &[String]) -> RecordResult {
        if let Some(token) = put {
            let id = token.token_id.clone();
            self.delegation_tokens.insert(id, token.clone());
        }
        for id in remove {
            self.delegation_tokens.remove(id);
        }
        RecordResult::Applied
    }

    fn alter_scram_credentials(
        &mut self,
        changes: &[(String, String, Option<ScramCredential>)],
    ) -> RecordResult {
        for (user, mechanism, credential) in changes {
            let of_user = self.scram_credentials.entry(user.clone()).or_default();
            match credential {
                Some(credential) => of_user.insert(mechanism.clone(), credential.clone()),
                None => of_user.remove(mechanism),
            };
            if of_user.is_empty() {
                self.scram_credentials.remove(user);
            }
        }
        RecordResult::Applied
    }

    fn alter_configs(&mut self, resource: &ConfigResource, configs: &ConfigMap) -> RecordResult {
        let (map, name) = match resource {
            ConfigResource::Broker(id) => (
                &mut self.broker_configs,
                id.map(|id| id.to_string()).unwrap_or_default(),
            ),
            ConfigResource::Group(group) => (&mut self.group_configs, group.clone()),
        };
        match configs.is_empty() {
            true => map.remove(&name),
            false => map.insert(name, configs.clone()),
        };
        RecordResult::Applied
    }

    fn init(
        &mut self,
        cluster_id: &str,
        topics: &[TopicImage],
        next: i64,
        scram_credentials: &ScramCredentials,
    ) -> RecordResult {
        if !self.cluster_id.is_empty() {
            return rejected("the cluster is already initialized");
        }
        self.scram_credentials = scram_credentials.clone();
        self.cluster_id = cluster_id.to_string();
        self.topics = topics.iter().map(|t| (t.name.clone(), t.clone())).collect();
        self.next_producer_id = next;
        RecordResult::Applied
    }

    fn register(
        &mut self,
        offset: u64,
        (node_id, incarnation_id): (i32, Uuid),
        (host, port): (&str, u16),
        (endpoints, rack): (&[Endpoint], Option<&str>),
        previous_broker_epoch: i64,
    ) -> RecordResult {
        let broker_epoch = offset as i64;
        let clean = self.brokers.get(&node_id).is_some_and(|old| {
            previous_broker_epoch >= 0 && old.broker_epoch == previous_broker_epoch
        });
        if let Some(old) = self.brokers.get(&node_id) {
            if old.incarnation_id == incarnation_id {
                return RecordResult::Registered {
                    broker_epoch: old.broker_epoch,
                };
            }
            let past = self.past_incarnations.entry(node_id).or_default();
            if past.contains(&incarnation_id) {
                return rejected(format!(
                    "broker {node_id}: stale incarnation {incarnation_id}"
                ));
            }
            past.push(old.incarnation_id);
            if past.len() > PAST_INCARNATIONS_MAX {
                past.remove(0);
            }
        }
        // A new incarnation after a crash may have lost its unflushed tail: it is no
        // longer eligible to lead where it was (KIP-966). After a clean shutdown of the
        // registration known here, its log is whole and it stays eligible.
        if !clean {
            for topic in self.topics.values_mut() {
                for partition in &mut topic.partitions {
                    partition.elr.retain(|r| *r != node_id);
                }
            }
        }
        self.brokers.insert(
            node_id,
            BrokerImage {
                node_id,
                host: host.to_string(),
                port,
                endpoints: endpoints.to_vec(),
                rack: rack.map(str::to_string),
                incarnation_id,
                broker_epoch,
                fenced: true,
                in_controlled_shutdown: false,
                offline_replicas: Default::default(),
            },
        );
        RecordResult::Registered { broker_epoch }
    }

    fn with_broker(
        &mut self,
        node_id: i32,
        broker_epoch: i64,
        change: impl FnOnce(&mut BrokerImage),
    ) -> RecordResult {
        match self.brokers.get_mut(&node_id) {
            Some(broker) if broker.broker_epoch == broker_epoch => {
                change(broker);
                RecordResult::Applied
            }
            Some(broker) => rejected(format!(
                "broker {node_id}: epoch {broker_epoch} is not the current {}",
                broker.broker_epoch
            )),
            None => rejected(format!("broker {node_id} is not registered")),
        }
    }

    fn set_fenced(&mut self, node_id: i32, broker_epoch: i64, fenced: bool) -> RecordResult {
        self.with_broker(node_id, broker_epoch, |b| {
            b.fenced = fenced;
            if fenced {
                b.in_controlled_shutdown = false;
            }
        })
    }

    fn create_topic(&mut self, topic: &TopicImage) -> RecordResult {
        if self.topics.contains_key(&topic.name) {
            return rejected(format!("topic {} already exists", topic.name));
        }
        self.topics.insert(topic.name.clone(), topic.clone());
        RecordResult::Applied
    }

    fn delete_topic(&mut self, name: &str, topic_id: Uuid) -> RecordResult {
        match self.topics.get(name) {
            Some(topic) if topic.topic_id == topic_id => {
                self.topics.remove(name);
                RecordResult::Applied
            }
            _ => rejected(format!("unknown topic {name} with id {topic_id}")),
        }
    }

    fn create_partitions(&mut self, name: &str, replicas: &[Vec<i32>]) -> RecordResult {
        match self.topics.get_mut(name) {
            Some(topic) => {
                let added = replicas.iter().map(|r| PartitionImage::new(r.clone()));
                topic.partitions.extend(added);
                RecordResult::Applied
            }
            None => rejected(format!("unknown topic {name}")),
        }
    }

    fn change_partitions(&mut self, changes: &[PartitionChange]) -> RecordResult {
        for change in changes {
            let Some(partition) = self.topics.get_mut(&change.topic).and_then(|t| {
                t.partitions
                    .get_mut(usize::try_from(change.partition).ok()?)
            }) else {
                continue;
            };
            // A replica taken out of the assignment must not go on at the epoch it knew
            // (Kafka bumps the leader epoch whenever the replicas lose a member).
            let shrunk = change
                .assignment
                .as_ref()
                .is_some_and(|a| partition.replicas.iter().any(|r| !a.replicas.contains(r)));
            if partition.leader != change.leader || shrunk {
                partition.leader_epoch += 1;
            }
            if let Some(assignment) = &change.assignment {
                partition.replicas = assignment.replicas.clone();
                partition.adding_replicas = assignment.adding.clone();
                partition.removing_replicas = assignment.removing.clone();
            }
            partition.leader = change.leader;
            partition.isr = change.isr.clone();
            partition.elr = change.elr.clone();
            partition.last_known_elr = change.last_known_elr.clone();
            partition.partition_epoch += 1;
        }
        RecordResult::Applied
    }

    /// The immutable image of this state at `offset`, with `controller_id` as the active
    /// controller.
    pub fn image(&self, offset: u64, controller_id: i32) -> MetadataImage {
        MetadataImage {
            cluster_id: self.cluster_id.clone(),
            controller_id,
            brokers: self.brokers.values().cloned().collect(),
            topics: self
                .topics
                .iter()
                .map(|(name, t)| (name.clone(), Arc::new(t.clone())))
                .collect(),
            features: features::finalized(&self.features),
            broker_configs: Arc::new(self.broker_configs.clone()),
            group_configs: Arc::new(self.group_configs.clone()),
            scram_credentials: Arc::new(self.scram_credentials.clone()),
            acls: Arc::new(self.acls.iter().cloned().collect()),
            client_quotas: Arc::new(self.client_quotas.clone()),
            delegation_tokens: Arc::new(self.delegation_tokens.clone()),
            offset,
        }
    }

    /// Checks the partition invariants (debug builds).
    pub fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        for topic in self.topics.values() {
            for p in &topic.partitions {
                // KIP-966: an ISR empties only when its last member left, into the ELR.
                debug_assert!(
                    !p.isr.is_empty()
                        || (p.leader == NO_LEADER && !p.elr.is_empty())
                        || p.leader == NO_LEADER && !p.last_known_elr.is_empty(),
                    "{}: empty ISR with a leader or without an eligible replica",
                    topic.name
                );
                debug_assert!(
                    p.elr.iter().all(|r| !p.isr.contains(r)),
                    "{}: an ISR member in the ELR",
                    topic.name
                );
                debug_assert!(
                    p.isr.iter().all(|r| p.replicas.contains(r)),
                    "{}: ISR outside the replicas",
                    topic.name
                );
                debug_assert!(
                    p.leader == NO_LEADER || p.isr.contains(&p.leader),
                    "{}: leader outside the ISR",
                    topic.name
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, replicas: &[&[i32]]) -> TopicImage {
        TopicImage {
            name: name.into(),
            topic_id: Uuid::from_u128(7),
            partitions: replicas
                .iter()
                .map(|r| PartitionImage::new(r.to_vec()))
                .collect(),
            configs: ConfigMap::new(),
        }
    }

    fn register(
        state: &mut ClusterState,
        offset: u64,
        node_id: i32,
        incarnation: u128,
    ) -> RecordResult {
        register_after(state, (offset, node_id, incarnation), -1)
    }

    /// A registration of (offset, node, incarnation) after a clean shutdown at
    /// `previous_broker_epoch` (-1: a crash).
    fn register_after(
        state: &mut ClusterState,
        (offset, node_id, incarnation): (u64, i32, u128),
        previous_broker_epoch: i64,
    ) -> RecordResult {
        let record = Record::RegisterBroker {
            node_id,
            incarnation_id: Uuid::from_u128(incarnation),
            host: "h".into(),
            port: 1,
            endpoints: Vec::new(),
            rack: None,
            previous_broker_epoch,
        };
        state.apply(offset, &record)
    }

    #[test]
    fn a_registration_starts_fenced_with_its_offset_as_epoch() {
        let mut state = ClusterState::default();
        let result = register(&mut state, 5, 1, 10);
        assert_eq!(result, RecordResult::Registered { broker_epoch: 5 });
        assert!(state.brokers[&1].fenced);
        let unfence = Record::UnfenceBroker {
            node_id: 1,
            broker_epoch: 5,
        };
        assert_eq!(state.apply(6, &unfence), RecordResult::Applied);
        assert!(!state.brokers[&1].fenced);
    }

    #[test]
    fn a_stale_incarnation_or_epoch_is_rejected() {
        let mut state = ClusterState::default();
        register(&mut state, 1, 1, 10);
        register(&mut state, 2, 1, 11);
        assert!(matches!(
            register(&mut state, 3, 1, 10),
            RecordResult::Rejected { .. }
        ));
        let stale = Record::UnfenceBroker {
            node_id: 1,
            broker_epoch: 1,
        };
        assert!(matches!(
            state.apply(4, &stale),
            RecordResult::Rejected { .. }
        ));
        assert_eq!(state.brokers[&1].broker_epoch, 2);
    }

    #[test]
    fn a_leader_change_bumps_both_epochs_and_an_isr_change_only_the_partition_epoch() {
        let mut state = ClusterState::default();
        state.apply(1, &Record::CreateTopic(topic("t", &[&[1, 2, 3]])));
        let change = |leader, isr: &[i32]| {
            Record::ChangePartitions(vec![PartitionChange::new("t", 0, leader, isr.to_vec())])
        };
        state.apply(2, &change(2, &[2, 3]));
        let p = &state.topics["t"].partitions[0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 1));
        state.apply(3, &change(2, &[2]));
        let p = &state.topics["t"].partitions[0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
    }

    #[test]
    fn members_that_leave_an_isr_below_min_isr_become_eligible_leaders_until_it_recovers() {
        let mut current = PartitionImage::new(vec![1, 2, 3]);
        current.isr = vec![1, 2];
        let shrunk = PartitionChange::new("t", 0, 1, vec![1]).with_elr(&current, 2);
        assert_eq!(
            shrunk.elr,
            vec![2],
            "ISR [1] < 2: 2 holds every record below the HW"
        );
        let mut state = ClusterState::default();
        state.apply(1, &Record::CreateTopic(topic("t", &[&[1, 2, 3]])));
        state.apply(2, &Record::ChangePartitions(vec![shrunk]));
        let now = state.topics["t"].partitions[0].clone();
        assert_eq!(now.elr, vec![2]);
        let grown = PartitionChange::new("t", 0, 1, vec![1, 3]).with_elr(&now, 2);
        assert!(grown.elr.is_empty(), "back at min ISR");
        let not_below = PartitionChange::new("t", 0, 1, vec![1, 2]).with_elr(&current, 2);
        assert!(not_below.elr.is_empty());
        // A restarted broker may have lost its tail: registering again drops it.
        register(&mut state, 3, 3, 7);
        assert_eq!(
            state.topics["t"].partitions[0].elr,
            vec![2],
            "another broker"
        );
        register(&mut state, 4, 2, 8);
        assert!(state.topics["t"].partitions[0].elr.is_empty());
    }

    #[test]
    fn a_partition_left_without_a_leader_remembers_the_last_one() {
        let mut current = PartitionImage::new(vec![1, 2, 3]);
        current.isr = vec![1];
        let offline = PartitionChange::new("t", 0, NO_LEADER, vec![]).with_elr(&current, 2);
        assert_eq!(
            (offline.elr.clone(), offline.last_known_elr.clone()),
            (vec![1], vec![1])
        );
        let mut now = current.clone();
        (now.leader, now.isr, now.elr) = (NO_LEADER, vec![], vec![1]);
        now.last_known_elr = vec![1];
        let still = PartitionChange::new("t", 0, NO_LEADER, vec![]).with_elr(&now, 2);
        assert_eq!(still.last_known_elr, vec![1], "kept while offline");
        let elected = PartitionChange::new("t", 0, 2, vec![2]).with_elr(&now, 2);
        assert!(
            elected.last_known_elr.is_empty(),
            "forgotten once a leader is elected"
        );
    }

    #[test]
    fn only_a_restart_after_a_clean_shutdown_of_the_known_registration_stays_eligible() {
        let mut state = ClusterState::default();
        state.apply(1, &Record::CreateTopic(topic("t", &[&[1, 2, 3]])));
        register(&mut state, 2, 2, 1);
        let mut change = PartitionChange::new("t", 0, 1, vec![1]);
        change.elr = vec![2];
        state.apply(3, &Record::ChangePartitions(vec![change]));
        let elr = |state: &ClusterState| state.topics["t"].partitions[0].elr.clone();
        register_after(&mut state, (4, 2, 2), 2);
        assert_eq!(elr(&state), vec![2], "clean shutdown of epoch 2");
        register_after(&mut state, (5, 2, 3), 2);
        assert!(
            elr(&state).is_empty(),
            "epoch 4 is known: 2 names an older one"
        );
    }

    #[test]
    fn producer_id_blocks_never_overlap() {
        let mut state = ClusterState::default();
        let a = state.apply(1, &Record::AllocateProducerIds { node_id: 1 });
        let b = state.apply(2, &Record::AllocateProducerIds { node_id: 1 });
        assert_eq!(a, RecordResult::ProducerIds { first: 0 });
        assert_eq!(
            b,
            RecordResult::ProducerIds {
                first: PRODUCER_ID_BLOCK_SIZE
            }
        );
    }

    #[test]
    fn finalized_feature_levels_reach_the_image_and_survive_a_snapshot() {
        let mut state = ClusterState::default();
        let tv = features::TRANSACTION_VERSION;
        let default = features::feature(tv).map(|f| f.default_level);
        assert_eq!(state.image(1, 1).features.get(tv).copied(), default);
        let record = Record::FinalizeFeatures {
            levels: vec![(tv.to_string(), 0)],
        };
        assert_eq!(state.apply(2, &record), RecordResult::Applied);
        assert_eq!(state.image(2, 1).feature_level(tv), 0);
        let snapshot = serde_json::to_string(&state).expect("encode");
        let restored: ClusterState = serde_json::from_str(&snapshot).expect("decode");
        assert_eq!(restored.image(2, 1).feature_level(tv), 0);
        let mut old: serde_json::Value = serde_json::from_str(&snapshot).expect("json");
        old.as_object_mut().expect("object").remove("features");
        let old: ClusterState =
            serde_json::from_value(old).expect("a snapshot from before features");
        assert_eq!(old.image(2, 1).features.get(tv).copied(), default);
    }
}
