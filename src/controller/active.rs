//! The active controller: the Raft leader of the metadata quorum turns requests (topic
//! changes, broker registrations and heartbeats, ISR changes) into records, after checking
//! them against the current state, and watches broker sessions (fencing a broker whose
//! heartbeats stop, and moving its leaderships away), as Kafka's QuorumController and
//! ReplicationControlManager do (KIP-631).
//!
//! One change at a time: the write lock is held from validation until the records are
//! applied, so no two requests validate against the same state. Broker sessions live in
//! memory on the leader only; a new leader starts every session afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ControllerError;
use super::placement::{
    assign_replicas, elect_leaders, elect_requested, move_away_from, Election, ElectionOutcome,
};
use super::publisher::Publisher;
use super::quorum::Quorum;
use super::rpc::{RpcHandler, RpcRequest, RpcResponse};
use super::state::{ClusterState, PartitionChange, Record, RecordResult, PRODUCER_ID_BLOCK_SIZE};
use super::NewTopic;
use crate::config::{topic, BrokerConfig, ConfigMap};
use crate::metadata::{validate_topic_name, PartitionImage, TopicImage};

/// The most partitions one topic may have (a bound on what one request can make us create).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;
/// How often the leader checks broker sessions.
const SESSION_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// How long a FetchMetadata long poll waits for a new offset.
const FETCH_METADATA_WAIT: Duration = Duration::from_millis(500);

/// A request to the active controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerRequest {
    CreateTopic {
        topic: NewTopic,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        count: i32,
        validate_only: bool,
    },
    /// Sets (`Some`) or removes (`None`) topic config overrides.
    AlterTopicConfigs {
        name: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    AllocateProducerIds {
        node_id: i32,
    },
    RegisterBroker {
        node_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
    },
    BrokerHeartbeat {
        node_id: i32,
        broker_epoch: i64,
        /// The offset of the broker's metadata image (it is caught up once this reaches its
        /// registration).
        metadata_offset: u64,
        want_shut_down: bool,
    },
    /// An ISR change from a partition leader (KIP-497's AlterPartition).
    AlterPartition(AlterPartition),
    /// Elects leaders of the given partitions (all when `None`): preferred, or unclean.
    ElectLeaders {
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
    },
}

/// The active controller's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerReply {
    Done,
    Topic(TopicImage),
    ProducerIds {
        first: i64,
        count: i64,
    },
    Registered {
        broker_epoch: i64,
    },
    Heartbeat {
        fenced: bool,
        should_shut_down: bool,
    },
    Partition(PartitionImage),
    /// Per partition asked for (or, when all were, per partition elected).
    Elections(Vec<(String, i32, ElectionOutcome)>),
}

#[derive(Debug)]
struct Sessions {
    /// The Raft term in which these sessions were started.
    term: u64,
    /// When this node started leading in `term`: a broker not heard from since expires one
    /// session timeout after it.
    leading_since: Instant,
    /// The last registration or heartbeat of each broker received in `term`.
    last_seen: HashMap<i32, Instant>,
}

/// The active-controller logic of one controller node (acting only while it leads).
pub struct ActiveController {
    config: Arc<BrokerConfig>,
    pub quorum: Quorum,
    publisher: Arc<Publisher>,
    write: tokio::sync::Mutex<()>,
    sessions: Mutex<Sessions>,
    /// What a new cluster starts from: its id and a pre-Raft snapshot's topics, if any.
    init: Record,
}

fn conflict(result: RecordResult) -> Result<RecordResult, ControllerError> {
    match result {
        RecordResult::Rejected { reason } => Err(ControllerError::Conflict { reason }),
        other => Ok(other),
    }
}

fn check_partition_count(topic: &str, count: i32) -> Result<(), ControllerError> {
    let reason = if count <= 0 {
        "must be greater than 0"
    } else if count > PARTITIONS_PER_TOPIC_MAX {
        "exceeds the limit of 10000 partitions per topic"
    } else {
        return Ok(());
    };
    Err(ControllerError::InvalidPartitions {
        topic: topic.to_string(),
        count,
        reason,
    })
}

fn check_assignments(
    topic: &str,
    assignments: &[Vec<i32>],
    brokers: &[i32],
) -> Result<(), ControllerError> {
    let invalid = |reason| ControllerError::InvalidReplicaAssignment {
        topic: topic.into(),
        reason,
    };
    for replicas in assignments {
        if replicas.is_empty() {
            return Err(invalid("a partition has no replicas"));
        }
        if replicas.iter().any(|r| !brokers.contains(r)) {
            return Err(invalid("a replica is not a registered broker"));
        }
        if (1..replicas.len()).any(|i| replicas[..i].contains(&replicas[i])) {
            return Err(invalid("a partition lists a broker twice"));
        }
    }
    Ok(())
}

/// The unfenced brokers, sorted: where new replicas may go.
fn usable_brokers(state: &ClusterState) -> Vec<i32> {
    state
        .brokers
        .values()
        .filter(|b| !b.fenced && !b.in_controlled_shutdown)
        .map(|b| b.node_id)
        .collect()
}

/// A start on the broker ring that varies by topic, as Kafka's random start does.
fn ring_start(topic_id: Uuid) -> usize {
    topic_id.as_bytes()[0] as usize
}

impl ActiveController {
    /// The active-controller logic over `quorum`; `init` is proposed when this node first
    /// leads a cluster that has no id yet.
    pub fn new(
        config: Arc<BrokerConfig>,
        quorum: Quorum,
        publisher: Arc<Publisher>,
        init: Record,
    ) -> Self {
        ActiveController {
            config,
            quorum,
            publisher,
            write: tokio::sync::Mutex::new(()),
            sessions: Mutex::new(Sessions {
                term: 0,
                leading_since: Instant::now(),
                last_seen: HashMap::new(),
            }),
            init,
        }
    }

    fn state<T>(&self, f: impl FnOnce(&ClusterState) -> T) -> T {
        self.quorum.state_machine.with_state(f)
    }

    fn unclean_default(&self) -> bool {
        self.config.get("unclean.leader.election.enable") == Some("true")
    }

    fn touch(&self, node_id: i32) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.last_seen.insert(node_id, Instant::now());
    }

    /// Whether this leader heard from `node_id` within a session timeout (a broker it never
    /// heard from does not block a new registration of the same id).
    fn session_alive(&self, node_id: i32) -> bool {
        let timeout = Duration::from_millis(self.config.broker_session_timeout_ms);
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions
            .last_seen
            .get(&node_id)
            .is_some_and(|seen| seen.elapsed() < timeout)
    }

    async fn propose(&self, record: Record) -> Result<RecordResult, ControllerError> {
        self.quorum.propose(record).await
    }

    async fn propose_changes(&self, changes: Vec<PartitionChange>) -> Result<(), ControllerError> {
        if changes.is_empty() {
            return Ok(());
        }
        for change in &changes {
            tracing::info!(topic = %change.topic, partition = change.partition,
                leader = change.leader, isr = ?change.isr, "partition change");
        }
        conflict(self.propose(Record::ChangePartitions(changes)).await?).map(|_| ())
    }

    /// Serves one request; only the leader can (others get NotController).
    pub async fn handle(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerReply, ControllerError> {
        if !self.quorum.is_leader() {
            return Err(ControllerError::NotController {
                leader: self.quorum.leader(),
            });
        }
        let _write = self.write.lock().await;
        match request {
            ControllerRequest::CreateTopic {
                topic,
                validate_only,
            } => self.create_topic(&topic, validate_only).await,
            ControllerRequest::DeleteTopic { name } => self.delete_topic(&name).await,
            ControllerRequest::CreatePartitions {
                name,
                count,
                validate_only,
            } => self.create_partitions(&name, count, validate_only).await,
            ControllerRequest::AlterTopicConfigs {
                name,
                changes,
                validate_only,
            } => self.alter_configs(&name, &changes, validate_only).await,
            ControllerRequest::AllocateProducerIds { node_id } => {
                match conflict(
                    self.propose(Record::AllocateProducerIds { node_id })
                        .await?,
                )? {
                    RecordResult::ProducerIds { first } => Ok(ControllerReply::ProducerIds {
                        first,
                        count: PRODUCER_ID_BLOCK_SIZE,
                    }),
                    other => Err(ControllerError::Conflict {
                        reason: format!("unexpected result {other:?}"),
                    }),
                }
            }
            ControllerRequest::ElectLeaders {
                unclean,
                partitions,
            } => self.elect_requested(unclean, partitions).await,
            broker_request => self.handle_broker_request(broker_request).await,
        }
    }

    /// Registrations, heartbeats and ISR changes: what brokers themselves send.
    async fn handle_broker_request(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerReply, ControllerError> {
        match request {
            ControllerRequest::RegisterBroker {
                node_id,
                incarnation_id,
                host,
                port,
            } => self.register(node_id, incarnation_id, host, port).await,
            ControllerRequest::BrokerHeartbeat {
                node_id,
                broker_epoch,
                metadata_offset,
                want_shut_down,
            } => {
                self.heartbeat(node_id, broker_epoch, metadata_offset, want_shut_down)
                    .await
            }
            ControllerRequest::AlterPartition(wanted) => self.alter_partition(wanted).await,
            other => Err(ControllerError::Conflict {
                reason: format!("not a broker request: {other:?}"),
            }),
        }
    }

    fn validate_new_topic(&self, topic: &NewTopic) -> Result<TopicImage, ControllerError> {
        let name = topic.name.clone();
        validate_topic_name(&name).map_err(|reason| ControllerError::InvalidTopic {
            topic: name.clone(),
            reason,
        })?;
        let (exists, usable, registered) = self.state(|s| {
            let registered: Vec<i32> = s.brokers.keys().copied().collect();
            (s.topics.contains_key(&name), usable_brokers(s), registered)
        });
        if exists {
            return Err(ControllerError::TopicAlreadyExists { topic: name });
        }
        let topic_id = Uuid::new_v4();
        let replicas = if topic.assignments.is_empty() {
            let partitions = match topic.partitions {
                -1 => self.config.num_partitions,
                n => n,
            };
            let factor = match topic.replication_factor {
                -1 => self.config.default_replication_factor,
                n => n,
            };
            if factor <= 0 || factor as usize > usable.len() {
                return Err(ControllerError::InvalidReplicationFactor {
                    topic: name,
                    factor,
                    brokers: usable.len(),
                });
            }
            // Checked before sizing the replica lists by a count read from the wire.
            check_partition_count(&name, partitions)?;
            assign_replicas(
                &usable,
                0,
                partitions,
                factor as usize,
                ring_start(topic_id),
            )
        } else {
            check_partition_count(&name, topic.assignments.len() as i32)?;
            check_assignments(&name, &topic.assignments, &registered)?;
            topic.assignments.clone()
        };
        topic::validate(&topic.configs).map_err(|source| ControllerError::InvalidConfig {
            topic: name.clone(),
            source: Box::new(source),
        })?;
        Ok(TopicImage {
            name,
            topic_id,
            partitions: replicas.into_iter().map(PartitionImage::new).collect(),
            configs: topic.configs.clone(),
        })
    }

    async fn create_topic(
        &self,
        topic: &NewTopic,
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let image = self.validate_new_topic(topic)?;
        if !validate_only {
            match self.propose(Record::CreateTopic(image.clone())).await? {
                RecordResult::Rejected { .. } => {
                    return Err(ControllerError::TopicAlreadyExists { topic: image.name })
                }
                _ => tracing::info!(topic = %image.name,
                    partitions = image.partitions.len(), "created topic"),
            }
        }
        Ok(ControllerReply::Topic(image))
    }

    async fn delete_topic(&self, name: &str) -> Result<ControllerReply, ControllerError> {
        let found = self.state(|s| s.topics.get(name).cloned());
        let topic = found.ok_or_else(|| ControllerError::UnknownTopic {
            topic: name.to_string(),
        })?;
        let record = Record::DeleteTopic {
            name: name.to_string(),
            topic_id: topic.topic_id,
        };
        conflict(self.propose(record).await?)?;
        tracing::info!(topic = %name, "deleted topic");
        Ok(ControllerReply::Topic(topic))
    }

    async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let found = self.state(|s| {
            s.topics.get(name).map(|t| {
                (
                    t.partition_count(),
                    t.partitions.first().map_or(1, |p| p.replicas.len()),
                    t.topic_id,
                    usable_brokers(s),
                )
            })
        });
        let (current, factor, topic_id, usable) =
            found.ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?;
        if count <= current {
            let reason = "the new count must be greater than the current count";
            return Err(ControllerError::InvalidPartitions {
                topic: name.to_string(),
                count,
                reason,
            });
        }
        check_partition_count(name, count)?;
        if factor > usable.len() {
            return Err(ControllerError::InvalidReplicationFactor {
                topic: name.to_string(),
                factor: factor as i32,
                brokers: usable.len(),
            });
        }
        if validate_only {
            return Ok(ControllerReply::Done);
        }
        let replicas = assign_replicas(
            &usable,
            current,
            count - current,
            factor,
            ring_start(topic_id),
        );
        let record = Record::CreatePartitions {
            name: name.to_string(),
            replicas,
        };
        conflict(self.propose(record).await?)?;
        tracing::info!(topic = %name, partitions = count, "added partitions");
        Ok(ControllerReply::Done)
    }

    async fn alter_configs(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let found = self.state(|s| s.topics.get(name).map(|t| t.configs.clone()));
        let mut configs: ConfigMap = found.ok_or_else(|| ControllerError::UnknownTopic {
            topic: name.to_string(),
        })?;
        for (key, value) in changes {
            match value {
                Some(value) => configs.insert(key.clone(), value.clone()),
                None => configs.remove(key),
            };
        }
        topic::validate(&configs).map_err(|source| ControllerError::InvalidConfig {
            topic: name.to_string(),
            source: Box::new(source),
        })?;
        if !validate_only {
            let record = Record::AlterTopicConfigs {
                name: name.to_string(),
                configs,
            };
            conflict(self.propose(record).await?)?;
        }
        Ok(ControllerReply::Done)
    }

    async fn register(
        &self,
        node_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
    ) -> Result<ControllerReply, ControllerError> {
        let (existing, stale) = self.state(|s| {
            let stale = s
                .past_incarnations
                .get(&node_id)
                .is_some_and(|past| past.contains(&incarnation_id));
            (s.brokers.get(&node_id).cloned(), stale)
        });
        if stale {
            return Err(ControllerError::StaleBroker {
                node_id,
                reason: format!("incarnation {incarnation_id} was replaced by a newer one"),
            });
        }
        if let Some(old) = &existing {
            if old.incarnation_id != incarnation_id && !old.fenced && self.session_alive(node_id) {
                return Err(ControllerError::DuplicateBrokerRegistration {
                    node_id,
                    incarnation_id: old.incarnation_id,
                });
            }
        }
        let record = Record::RegisterBroker {
            node_id,
            incarnation_id,
            host,
            port,
        };
        match self.propose(record).await? {
            RecordResult::Registered { broker_epoch } => {
                self.touch(node_id);
                tracing::info!(node_id, broker_epoch, %incarnation_id, "broker registered");
                Ok(ControllerReply::Registered { broker_epoch })
            }
            other => Err(ControllerError::StaleBroker {
                node_id,
                reason: format!("registration refused: {other:?}"),
            }),
        }
    }

    fn check_epoch(&self, node_id: i32, broker_epoch: i64) -> Result<bool, ControllerError> {
        let broker = self.state(|s| s.brokers.get(&node_id).cloned());
        match broker {
            None => Err(ControllerError::StaleBroker {
                node_id,
                reason: "not registered".into(),
            }),
            Some(b) if b.broker_epoch != broker_epoch => Err(ControllerError::StaleBroker {
                node_id,
                reason: format!("epoch {broker_epoch} is not the current {}", b.broker_epoch),
            }),
            Some(b) => Ok(b.fenced),
        }
    }

    async fn heartbeat(
        &self,
        node_id: i32,
        broker_epoch: i64,
        metadata_offset: u64,
        want_shut_down: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let fenced = self.check_epoch(node_id, broker_epoch)?;
        self.touch(node_id);
        if want_shut_down {
            if !fenced {
                tracing::info!(node_id, "controlled shutdown: moving leaderships away");
                self.fence(node_id, broker_epoch).await?;
            }
            return Ok(ControllerReply::Heartbeat {
                fenced: true,
                should_shut_down: true,
            });
        }
        if fenced && metadata_offset >= broker_epoch as u64 {
            let record = Record::UnfenceBroker {
                node_id,
                broker_epoch,
            };
            conflict(self.propose(record).await?)?;
            tracing::info!(node_id, broker_epoch, "broker unfenced");
            let election = Election {
                preferred: false,
                unclean_default: self.unclean_default(),
            };
            let changes = self.state(|s| {
                let usable = |b: i32| s.brokers.get(&b).is_some_and(|b| !b.fenced);
                elect_leaders(s, &usable, election)
            });
            self.propose_changes(changes).await?;
            return Ok(ControllerReply::Heartbeat {
                fenced: false,
                should_shut_down: false,
            });
        }
        Ok(ControllerReply::Heartbeat {
            fenced,
            should_shut_down: false,
        })
    }

    /// Moves leadership and ISR membership away from `node_id`, then fences it.
    async fn fence(&self, node_id: i32, broker_epoch: i64) -> Result<(), ControllerError> {
        let unclean = self.unclean_default();
        let changes = self.state(|s| {
            let usable = |b: i32| {
                b != node_id
                    && s.brokers
                        .get(&b)
                        .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
            };
            move_away_from(s, node_id, &usable, unclean)
        });
        self.propose_changes(changes).await?;
        let record = Record::FenceBroker {
            node_id,
            broker_epoch,
        };
        conflict(self.propose(record).await?)?;
        tracing::info!(node_id, broker_epoch, "broker fenced");
        Ok(())
    }

    async fn alter_partition(
        &self,
        wanted: AlterPartition,
    ) -> Result<ControllerReply, ControllerError> {
        self.check_epoch(wanted.node_id, wanted.broker_epoch)?;
        let (current, fenced_members) = self.state(|s| {
            let partition = s
                .topics
                .get(&wanted.topic)
                .and_then(|t| t.partition(wanted.partition))
                .cloned();
            let fenced = wanted
                .isr
                .iter()
                .any(|r| s.brokers.get(r).is_none_or(|b| b.fenced));
            (partition, fenced)
        });
        let current = current.ok_or_else(|| ControllerError::UnknownTopic {
            topic: wanted.topic.clone(),
        })?;
        wanted.check(&current, fenced_members)?;
        let change = PartitionChange {
            topic: wanted.topic.clone(),
            partition: wanted.partition,
            leader: current.leader,
            isr: wanted.isr.clone(),
        };
        self.propose_changes(vec![change]).await?;
        let updated = self.state(|s| {
            s.topics
                .get(&wanted.topic)
                .and_then(|t| t.partition(wanted.partition))
                .cloned()
        });
        updated
            .map(ControllerReply::Partition)
            .ok_or(ControllerError::UnknownTopic {
                topic: wanted.topic,
            })
    }

    async fn elect_preferred(&self) -> Result<(), ControllerError> {
        let election = Election {
            preferred: true,
            unclean_default: self.unclean_default(),
        };
        let changes = self.state(|s| {
            let usable = |b: i32| {
                s.brokers
                    .get(&b)
                    .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
            };
            elect_leaders(s, &usable, election)
        });
        self.propose_changes(changes).await
    }

    async fn elect_requested(
        &self,
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<ControllerReply, ControllerError> {
        let all = partitions.is_none();
        let (outcomes, changes) = self.state(|s| {
            let usable = |b: i32| {
                s.brokers
                    .get(&b)
                    .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
            };
            let wanted = partitions.unwrap_or_else(|| {
                let each = s
                    .topics
                    .values()
                    .flat_map(|t| (0..t.partition_count()).map(|i| (t.name.clone(), i)));
                each.collect()
            });
            let mut outcomes = Vec::with_capacity(wanted.len());
            let mut changes = Vec::new();
            for (topic, partition) in wanted {
                let found = s.topics.get(&topic).and_then(|t| t.partition(partition));
                let (outcome, change) = match found {
                    Some(p) => elect_requested(p, &usable, unclean),
                    None => (ElectionOutcome::UnknownPartition, None),
                };
                if let Some((leader, isr)) = change {
                    let topic = topic.clone();
                    changes.push(PartitionChange {
                        topic,
                        partition,
                        leader,
                        isr,
                    });
                }
                if !all || outcome == ElectionOutcome::Elected {
                    outcomes.push((topic, partition, outcome));
                }
            }
            (outcomes, changes)
        });
        self.propose_changes(changes).await?;
        Ok(ControllerReply::Elections(outcomes))
    }

    /// Runs the leader's duties until the task is dropped: the cluster's first record when
    /// it has none, fencing of brokers whose session expired, and periodic preferred-leader
    /// election (`auto.leader.rebalance.enable`).
    pub async fn run(self: Arc<Self>) {
        let mut metrics = self.quorum.raft.metrics();
        let rebalance_every = Duration::from_secs(
            self.config
                .get("leader.imbalance.check.interval.seconds")
                .and_then(|v| v.parse().ok())
                .unwrap_or(300),
        );
        let rebalance = self.config.get("auto.leader.rebalance.enable") != Some("false");
        let mut last_rebalance = Instant::now();
        let mut last_leader = None;
        loop {
            let leader = metrics.borrow_and_update().current_leader.map(|l| l as i32);
            if leader != last_leader {
                match leader {
                    Some(id) => tracing::info!(controller_id = id, "active controller elected"),
                    None => tracing::warn!("no active controller; election under way"),
                }
                last_leader = leader;
            }
            self.publisher.publish_controller(leader.unwrap_or(-1));
            if self.quorum.is_leader() {
                if let Err(error) = self.lead_once().await {
                    tracing::warn!(%error, "controller duty failed; retrying");
                }
                if rebalance && last_rebalance.elapsed() >= rebalance_every {
                    last_rebalance = Instant::now();
                    let _write = self.write.lock().await;
                    if let Err(error) = self.elect_preferred().await {
                        tracing::warn!(%error, "preferred leader election failed");
                    }
                }
            }
            let _ = tokio::time::timeout(SESSION_CHECK_INTERVAL, metrics.changed()).await;
        }
    }

    async fn lead_once(&self) -> Result<(), ControllerError> {
        let term = self.quorum.raft.metrics().borrow().current_term;
        let (uninitialized, brokers) = self.state(|s| {
            let brokers: Vec<(i32, i64, bool)> = s
                .brokers
                .values()
                .map(|b| (b.node_id, b.broker_epoch, b.fenced))
                .collect();
            (s.cluster_id.is_empty(), brokers)
        });
        let _write = self.write.lock().await;
        if uninitialized {
            conflict(self.propose(self.init.clone()).await?)?;
            tracing::info!("cluster metadata initialized");
        }
        let expired: Vec<(i32, i64)> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            if sessions.term != term {
                sessions.term = term;
                sessions.leading_since = now;
                sessions.last_seen.clear();
            }
            let timeout = Duration::from_millis(self.config.broker_session_timeout_ms);
            brokers
                .iter()
                .filter(|(_, _, fenced)| !fenced)
                .filter(|(id, _, _)| {
                    let seen = sessions
                        .last_seen
                        .get(id)
                        .copied()
                        .unwrap_or(sessions.leading_since);
                    now.duration_since(seen) >= timeout
                })
                .map(|(id, epoch, _)| (*id, *epoch))
                .collect()
        };
        for (node_id, broker_epoch) in expired {
            tracing::warn!(node_id, "broker session expired; fencing it");
            self.fence(node_id, broker_epoch).await?;
        }
        Ok(())
    }

    async fn fetch_metadata(&self, after: u64) -> RpcResponse {
        let mut images = self.publisher.subscribe();
        let wait = images.wait_for(|image| image.offset > after);
        let _ = tokio::time::timeout(FETCH_METADATA_WAIT, wait).await;
        let (state, offset) = self.quorum.state_machine.state_and_offset();
        RpcResponse::Metadata {
            offset,
            controller_id: self.quorum.leader().unwrap_or(-1),
            state: Box::new(state),
        }
    }
}

/// An AlterPartition request from the leader of a partition, checked against the
/// partition as Kafka's controller does: the sender must lead it at `leader_epoch`, and
/// `partition_epoch` must be the current one (a stale one is INVALID_UPDATE_VERSION).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlterPartition {
    pub node_id: i32,
    pub broker_epoch: i64,
    pub topic: String,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
}

impl AlterPartition {
    fn check(&self, current: &PartitionImage, fenced_members: bool) -> Result<(), ControllerError> {
        let (topic, partition) = (self.topic.clone(), self.partition);
        if current.leader != self.node_id || current.leader_epoch != self.leader_epoch {
            return Err(ControllerError::NotPartitionLeader {
                topic,
                partition,
                node_id: self.node_id,
                leader_epoch: self.leader_epoch,
            });
        }
        if current.partition_epoch != self.partition_epoch {
            return Err(ControllerError::StalePartitionEpoch {
                topic,
                partition,
                requested: self.partition_epoch,
                current: current.partition_epoch,
            });
        }
        let invalid = |reason| ControllerError::InvalidIsr {
            topic: self.topic.clone(),
            partition,
            reason,
        };
        if !self.isr.contains(&self.node_id) {
            return Err(invalid("the ISR must hold the leader"));
        }
        if self.isr.iter().any(|r| !current.replicas.contains(r)) {
            return Err(invalid("the ISR must be a subset of the replicas"));
        }
        if fenced_members {
            return Err(invalid("a fenced broker cannot join the ISR"));
        }
        Ok(())
    }
}

impl RpcHandler for ActiveController {
    async fn handle(&self, request: RpcRequest) -> RpcResponse {
        let raft = &self.quorum.raft;
        match request {
            RpcRequest::AppendEntries(rpc) => {
                RpcResponse::AppendEntries(raft.append_entries(rpc).await)
            }
            RpcRequest::Vote(rpc) => RpcResponse::Vote(raft.vote(rpc).await),
            RpcRequest::InstallSnapshot(rpc) => {
                RpcResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
            RpcRequest::Controller(request) => RpcResponse::Controller(
                ActiveController::handle(self, request)
                    .await
                    .map_err(|e| e.to_remote()),
            ),
            RpcRequest::FetchMetadata { after } => self.fetch_metadata(after).await,
        }
    }
}
