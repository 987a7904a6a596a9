//! The active controller: the Raft leader of the metadata quorum turns requests (topic
//! changes, broker registrations and heartbeats, ISR changes) into records, after checking
//! them against the current state, and watches broker sessions (fencing a broker whose
//! heartbeats stop, and moving its leaderships away), as Kafka's QuorumController and
//! ReplicationControlManager do (KIP-631).
//!
//! One change at a time: the write lock is held from validation until the records are
//! applied, so no two requests validate against the same state. Broker sessions live in
//! memory on the leader only; a new leader starts every session afresh.
//!
//! This file holds the requests, the dispatch and the leader's duties; `topics` the topic
//! changes, `brokers` registrations, heartbeats, fencing, ISR changes and elections,
//! `features` feature levels.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ControllerError;
use super::placement::ElectionOutcome;
use super::publisher::Publisher;
use super::quorum::{leadership, Quorum, QuorumDescription};
use super::reassignment;
use super::rpc::{RpcHandler, RpcRequest, RpcResponse};
use super::state::{ClusterState, PartitionChange, Record, RecordResult, PRODUCER_ID_BLOCK_SIZE};
use super::NewTopic;
use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::metadata::features::UpgradeType;
use crate::metadata::TopicImage;
use crate::sasl::delegation_token::TokenChange;

mod acls;
mod brokers;
mod client_quotas;
mod configs;
mod delegation_tokens;
mod features;
mod reassignments;
mod scram;
mod sessions;
mod topics;

use sessions::Sessions;

pub use acls::AclOutcome;
pub use brokers::{AlterPartition, IsrOutcome, PartitionIsr};
pub use client_quotas::{QuotaAlteration, QuotaOutcome};
pub use delegation_tokens::{TokenOutcome, TokenRequest};
pub use reassignments::{Reassignment, ReassignmentOutcome};
pub use scram::{CredentialOutcome, ScramUpsertion};
pub use topics::PARTITIONS_PER_TOPIC_MAX;
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
    /// Sets (`Some`) or removes (`None`) configs of a broker, of every broker, or of a group.
    AlterConfigs {
        resource: super::state::ConfigResource,
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
        #[serde(default)]
        endpoints: Vec<crate::metadata::Endpoint>,
        #[serde(default)]
        rack: Option<String>,
        /// See [`crate::controller::state::Record::RegisterBroker`].
        #[serde(default = "crate::controller::state::no_epoch")]
        previous_broker_epoch: i64,
    },
    BrokerHeartbeat {
        node_id: i32,
        broker_epoch: i64,
        /// The offset of the broker's metadata image (it is caught up once this reaches its
        /// registration).
        metadata_offset: u64,
        want_shut_down: bool,
    },
    /// ISR changes from a partition leader (KIP-497's AlterPartition).
    AlterPartition(AlterPartition),
    /// The broker's replicas of these partitions went offline with a failed log directory
    /// (KIP-112; Kafka's brokers report the directory in their heartbeats, KIP-858).
    ReplicasOffline {
        node_id: i32,
        broker_epoch: i64,
        partitions: Vec<(String, i32)>,
    },
    /// Elects leaders of the given partitions (all when `None`): preferred, or unclean.
    ElectLeaders {
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
    },
    /// Finalizes feature levels (UpdateFeatures): every update or none.
    UpdateFeatures {
        updates: Vec<(String, i16, UpgradeType)>,
        validate_only: bool,
    },
    /// The quorum as its leader sees it (DescribeQuorum).
    DescribeQuorum,
    /// Sets and deletes users' SCRAM credentials (AlterUserScramCredentials).
    AlterScramCredentials {
        deletions: Vec<(String, i8)>,
        upsertions: Vec<ScramUpsertion>,
    },
    /// Sets and removes client quotas (AlterClientQuotas).
    AlterClientQuotas {
        alterations: Vec<QuotaAlteration>,
        validate_only: bool,
    },
    /// Adds ACL bindings (CreateAcls).
    CreateAcls {
        bindings: Vec<crate::acl::AclBinding>,
    },
    /// Removes the ACL bindings each filter matches (DeleteAcls).
    DeleteAcls {
        filters: Vec<crate::acl::AclFilter>,
    },
    /// Starts or cancels partition reassignments (AlterPartitionReassignments).
    AlterReassignments {
        reassignments: Vec<Reassignment>,
        allow_replication_factor_change: bool,
    },
    /// Creates, renews or expires a delegation token.
    DelegationToken(TokenRequest),
}

impl ControllerRequest {
    /// The request's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            ControllerRequest::CreateTopic { .. } => "CreateTopic",
            ControllerRequest::DeleteTopic { .. } => "DeleteTopic",
            ControllerRequest::CreatePartitions { .. } => "CreatePartitions",
            ControllerRequest::AlterTopicConfigs { .. } => "AlterTopicConfigs",
            ControllerRequest::AlterConfigs { .. } => "AlterConfigs",
            ControllerRequest::AllocateProducerIds { .. } => "AllocateProducerIds",
            ControllerRequest::RegisterBroker { .. } => "RegisterBroker",
            ControllerRequest::BrokerHeartbeat { .. } => "BrokerHeartbeat",
            ControllerRequest::AlterPartition(_) => "AlterPartition",
            ControllerRequest::ReplicasOffline { .. } => "ReplicasOffline",
            ControllerRequest::ElectLeaders { .. } => "ElectLeaders",
            ControllerRequest::UpdateFeatures { .. } => "UpdateFeatures",
            ControllerRequest::DescribeQuorum => "DescribeQuorum",
            ControllerRequest::AlterScramCredentials { .. } => "AlterScramCredentials",
            ControllerRequest::AlterClientQuotas { .. } => "AlterClientQuotas",
            ControllerRequest::CreateAcls { .. } => "CreateAcls",
            ControllerRequest::DeleteAcls { .. } => "DeleteAcls",
            ControllerRequest::AlterReassignments { .. } => "AlterReassignments",
            ControllerRequest::DelegationToken(TokenRequest::Create { .. }) => {
                "CreateDelegationToken"
            }
            ControllerRequest::DelegationToken(TokenRequest::Change { change, .. }) => match change
            {
                TokenChange::Renew => "RenewDelegationToken",
                TokenChange::Expire => "ExpireDelegationToken",
            },
        }
    }
}

/// Per partition: its topic, index and election outcome.
pub type ElectionResults = Vec<(String, i32, ElectionOutcome)>;

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
    /// Per partition of an AlterPartition, in order.
    Partitions(Vec<IsrOutcome>),
    /// Per partition asked for (or, when all were, per partition elected).
    Elections(ElectionResults),
    Quorum(QuorumDescription),
    /// Per partition asked for: reassigned (or cancelled), or why not.
    Reassignments(Vec<ReassignmentOutcome>),
    /// Per user asked for: its credentials changed, or why not.
    Credentials(Vec<CredentialOutcome>),
    /// Per entity asked for: its quotas changed, or why not.
    ClientQuotas(Vec<QuotaOutcome>),
    /// Per binding asked for: created, or why not.
    AclsCreated(Vec<AclOutcome>),
    /// Per filter: the bindings it removed.
    AclsDeleted(Vec<Vec<crate::acl::AclBinding>>),
    /// A delegation token as created, renewed or expired, or why not.
    Token(TokenOutcome),
}

/// The active-controller logic of one controller node (acting only while it leads).
pub struct ActiveController {
    config: Arc<BrokerConfig>,
    pub quorum: Quorum,
    publisher: Arc<Publisher>,
    write: tokio::sync::Mutex<()>,
    sessions: Mutex<Sessions>,
    /// The time sessions are measured in.
    clock: Clock,
    /// What a new cluster starts from: its id and a pre-Raft snapshot's topics, if any.
    init: Record,
    /// Set before this process stops the Raft node itself (shutdown, or a test dropping
    /// the broker): only a Raft node that stops otherwise is fatal.
    pub(crate) stopping: std::sync::atomic::AtomicBool,
}

fn conflict(result: RecordResult) -> Result<RecordResult, ControllerError> {
    match result {
        RecordResult::Rejected { reason } => Err(ControllerError::Conflict { reason }),
        other => Ok(other),
    }
}

impl ActiveController {
    /// The active-controller logic over `quorum`; `init` is proposed when this node first
    /// leads a cluster that has no id yet.
    pub fn new(
        config: Arc<BrokerConfig>,
        quorum: Quorum,
        publisher: Arc<Publisher>,
        init: Record,
        clock: Clock,
    ) -> Self {
        ActiveController {
            config,
            quorum,
            publisher,
            write: tokio::sync::Mutex::new(()),
            sessions: Mutex::new(Sessions::new(clock.monotonic_ms())),
            init,
            clock,
            stopping: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn state<T>(&self, f: impl FnOnce(&ClusterState) -> T) -> T {
        self.quorum.state_machine.with_state(f)
    }

    /// The broker-level value of `key` the controller applies: the cluster-wide dynamic
    /// default when set, else this node's static value.
    fn broker_default(&self, state: &ClusterState, key: &str) -> Option<String> {
        state
            .broker_configs
            .get("")
            .and_then(|c| c.get(key))
            .or_else(|| self.config.values.get(key))
            .cloned()
    }

    /// `min.insync.replicas` of `topic` (the broker default unless the topic sets it).
    fn min_isr(&self, state: &ClusterState, topic: &crate::metadata::TopicImage) -> usize {
        topic
            .configs
            .get("min.insync.replicas")
            .cloned()
            .or_else(|| self.broker_default(state, "min.insync.replicas"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1)
            .max(1)
    }

    fn unclean_default(&self) -> bool {
        self.state(|s| self.broker_default(s, "unclean.leader.election.enable"))
            .is_some_and(|v| v.trim() == "true")
    }

    fn touch(&self, node_id: i32) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.touch(node_id, self.clock.monotonic_ms());
    }

    /// Whether this leader heard from `node_id` within a session timeout (a broker it never
    /// heard from does not block a new registration of the same id).
    fn session_alive(&self, node_id: i32) -> bool {
        let timeout_ms = self.config.broker_session_timeout_ms as i64;
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.alive(node_id, self.clock.monotonic_ms(), timeout_ms)
    }

    async fn propose(&self, record: Record) -> Result<RecordResult, ControllerError> {
        self.quorum.propose(record).await
    }

    /// Proposes partition changes, each settled here, the one place every change passes:
    /// a reassignment it lets complete is completed (with a new leader if the old one
    /// left), and it carries the eligible leader replicas it leaves.
    async fn propose_changes(&self, changes: Vec<PartitionChange>) -> Result<(), ControllerError> {
        if changes.is_empty() {
            return Ok(());
        }
        let changes: Vec<PartitionChange> = self.state(|s| {
            changes
                .into_iter()
                .map(|change| {
                    let topic = s.topics.get(&change.topic);
                    let current = topic.and_then(|t| t.partition(change.partition));
                    match (topic, current) {
                        (Some(topic), Some(current)) => {
                            let (name, index) = (&topic.name, change.partition);
                            let usable = |b: i32| {
                                s.brokers
                                    .get(&b)
                                    .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
                                    && !s.replica_offline(b, name, index)
                            };
                            let change = reassignment::settle(current, change, &usable);
                            change.with_elr(current, self.min_isr(s, topic))
                        }
                        _ => change,
                    }
                })
                .collect()
        });
        for change in &changes {
            tracing::info!(topic = %change.topic, partition = change.partition,
                leader = change.leader, isr = ?change.isr, elr = ?change.elr, "partition change");
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
            ControllerRequest::AlterConfigs {
                resource,
                changes,
                validate_only,
            } => {
                self.alter_resource_configs(resource, &changes, validate_only)
                    .await
            }
            ControllerRequest::AlterScramCredentials {
                deletions,
                upsertions,
            } => self.alter_scram_credentials(deletions, upsertions).await,
            ControllerRequest::AlterReassignments {
                reassignments,
                allow_replication_factor_change,
            } => {
                self.alter_reassignments(reassignments, allow_replication_factor_change)
                    .await
            }
            ControllerRequest::AlterClientQuotas {
                alterations,
                validate_only,
            } => self.alter_client_quotas(alterations, validate_only).await,
            ControllerRequest::CreateAcls { bindings } => self.create_acls(bindings).await,
            ControllerRequest::DeleteAcls { filters } => self.delete_acls(filters).await,
            ControllerRequest::DelegationToken(request) => self.change_token(request).await,
            other => self.handle_topic_or_cluster_request(other).await,
        }
    }

    /// Topic changes, producer ids, elections, features and the quorum's description.
    async fn handle_topic_or_cluster_request(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerReply, ControllerError> {
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
            ControllerRequest::UpdateFeatures {
                updates,
                validate_only,
            } => self.update_features(&updates, validate_only).await,
            ControllerRequest::DescribeQuorum => match self.quorum.describe() {
                Some(description) => Ok(ControllerReply::Quorum(description)),
                None => Err(ControllerError::NotController {
                    leader: self.quorum.leader(),
                }),
            },
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
                endpoints,
                rack,
                previous_broker_epoch,
            } => {
                let address = (host, port, endpoints, rack);
                self.register(node_id, incarnation_id, address, previous_broker_epoch)
                    .await
            }
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
            ControllerRequest::ReplicasOffline {
                node_id,
                broker_epoch,
                partitions,
            } => {
                self.replicas_offline(node_id, broker_epoch, partitions)
                    .await
            }
            other => Err(ControllerError::Conflict {
                reason: format!("not a broker request: {other:?}"),
            }),
        }
    }

    /// Runs the leader's duties until the task is dropped: the cluster's first record when
    /// it has none, fencing of brokers whose session expired, and periodic preferred-leader
    /// election (`auto.leader.rebalance.enable`).
    pub async fn run(self: Arc<Self>) {
        tokio::join!(self.quorum.keep_confirming(), self.duties());
    }

    async fn duties(&self) {
        let mut metrics = self.quorum.raft.metrics();
        let rebalance_every_ms = 1_000
            * self
                .config
                .get("leader.imbalance.check.interval.seconds")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(300);
        let rebalance = self.config.get("auto.leader.rebalance.enable") != Some("false");
        let mut last_rebalance = self.clock.monotonic_ms();
        let sweep_every_ms = self.token_settings().check_interval_ms;
        let mut last_sweep = self.clock.monotonic_ms();
        let mut last_leader = None;
        loop {
            let seen = leadership(&metrics.borrow_and_update());
            let leader = self.quorum.leader();
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
                let now = self.clock.monotonic_ms();
                if rebalance && now - last_rebalance >= rebalance_every_ms {
                    last_rebalance = now;
                    let _write = self.write.lock().await;
                    if let Err(error) = self.elect_preferred().await {
                        tracing::warn!(%error, "preferred leader election failed");
                    }
                }
                if now - last_sweep >= sweep_every_ms {
                    last_sweep = now;
                    if let Err(error) = self.sweep_expired_tokens().await {
                        tracing::warn!(%error, "removing expired delegation tokens failed");
                    }
                }
            }
            let wait = SESSION_CHECK_INTERVAL;
            if !self
                .quorum
                .leadership_change(&mut metrics, seen, wait)
                .await
            {
                return self.raft_stopped();
            }
        }
    }

    /// The Raft node stopped. When it stopped on an error (openraft stops on a storage
    /// error: the metadata log directory failed), the process halts, like a Kafka node
    /// whose metadata log directory fails: it can neither follow the metadata nor take part
    /// in the quorum, and an orchestrator restarts it once the disk is back. A shutdown,
    /// and a Raft core dropped with its runtime (the process ending, a test killing the
    /// node), are no failure: halting then would end a test's whole process.
    fn raft_stopped(&self) {
        if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        match self.quorum.failure() {
            Some(cause) => super::halt_on_metadata_dir_failure(
                &self.config.metadata_log_dir,
                &format!("the metadata quorum stopped on an error: {cause}"),
            ),
            None => tracing::info!("the metadata quorum stopped with its runtime"),
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
        let unfenced: Vec<(i32, i64)> = brokers
            .iter()
            .filter(|(_, _, fenced)| !fenced)
            .map(|(id, epoch, _)| (*id, *epoch))
            .collect();
        let timeout_ms = self.config.broker_session_timeout_ms as i64;
        let now = self.clock.monotonic_ms();
        let expired = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .expired(term, now, timeout_ms, &unfenced);
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

impl std::fmt::Debug for ActiveController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActiveController")
            .field("node_id", &self.quorum.node_id)
            .finish_non_exhaustive()
    }
}
