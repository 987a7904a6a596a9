//! The controller: the one place where cluster metadata changes (brokers, topics,
//! partitions and their leaders, configs, producer id blocks), and the metadata image every
//! broker answers from.
//!
//! Changes are records in a Raft log replicated by openraft among the controllers of
//! `controller.quorum.voters` (KIP-500, KIP-595, KIP-631): [`quorum`] holds the log, the
//! state machine and the network; [`active`] is what the leader does with requests;
//! [`state`] is the replicated state and its records. [`Controller`] is the broker's side:
//! it routes requests to the active controller (here, or over the controller listener),
//! keeps this broker registered and heartbeating, and publishes images. A combined node
//! reads its own state machine; a broker-only node follows a controller's state.
//!
//! The single-node default is a combined node whose quorum is itself alone: no controller
//! listener, and every record commits at its own fsync.

pub mod active;
pub mod error;
mod lifecycle;
pub mod placement;
pub mod publisher;
pub mod quorum;
pub mod raft_types;
pub mod reassignment;
pub mod reply;
pub mod rpc;
pub mod state;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::clock::Clock;
use crate::config::{BrokerConfig, ConfigMap};
use crate::log::checkpoint::read_properties;
use crate::log::LogError;
use crate::metadata::uuid_text::base64url;
use crate::metadata::{MetadataImage, PartitionImage, TopicImage};
use crate::peer::Outbound;
use active::ActiveController;
pub use active::{
    AclOutcome, AlterPartition, ControllerReply, ControllerRequest, CredentialOutcome,
    ElectionResults, IsrOutcome, PartitionIsr, QuotaAlteration, QuotaOutcome, Reassignment,
    ReassignmentOutcome, ScramUpsertion, TokenOutcome, TokenRequest, PARTITIONS_PER_TOPIC_MAX,
};
pub use error::{ControllerError, ErrorKind};
pub use placement::ElectionOutcome;
use publisher::Publisher;
use quorum::Quorum;
pub use quorum::QuorumDescription;
pub use reply::{ProducerIdBlock, Registration, ReplyKind};
use rpc::{RpcClient, RpcRequest, RpcResponse};
use state::Record;
pub use state::PRODUCER_ID_BLOCK_SIZE;

/// The pre-Raft metadata snapshot, imported into the log when a cluster starts.
pub const LEGACY_SNAPSHOT_FILE: &str = "highwater-metadata.json";
/// How long a request may wait for an active controller to answer it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call to a remote controller may take.
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time a heartbeat or registration gives one controller to answer.
const LIFECYCLE_RPC_TIMEOUT_MIN: Duration = Duration::from_millis(500);
/// The longest pause between two attempts to reach the active controller.
const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// Idle connections kept per remote controller.
const IDLE_CONNECTIONS_MAX: usize = 4;

/// Where one request has tried to reach the active controller.
#[derive(Debug)]
struct Route {
    /// Turns taken through the remote controllers.
    rotation: usize,
    /// The controller that last failed to answer (-1: none).
    failed: i32,
}

impl Default for Route {
    fn default() -> Self {
        Route {
            rotation: 0,
            failed: -1,
        }
    }
}

/// A topic to create, as requested.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTopic {
    pub name: String,
    /// -1 for the broker default.
    pub partitions: i32,
    /// -1 for the broker default.
    pub replication_factor: i32,
    /// Explicit replica assignment per partition, if the client gave one.
    pub assignments: Vec<Vec<i32>>,
    pub configs: ConfigMap,
}

/// Stops the process because the metadata log directory `dir` failed (`cause`): as a Kafka
/// node halts then, since it can neither follow the metadata nor take part in the quorum;
/// an orchestrator restarts it once the disk is back.
pub fn halt_on_metadata_dir_failure(dir: &std::path::Path, cause: &str) -> ! {
    tracing::error!(dir = %dir.display(), cause,
        "the metadata log directory failed; the process exits");
    std::process::exit(1)
}

/// A voter's view of the metadata quorum.
#[derive(Debug, Clone, Copy)]
pub struct QuorumStatus {
    /// The leader it knows (itself only while a quorum confirms it), if any.
    pub leader: Option<i32>,
    /// The Raft term (Kafka's epoch).
    pub term: u64,
    /// The index of the last record applied.
    pub applied: u64,
}

/// The broker's handle on the metadata quorum. See the module docs.
pub struct Controller {
    config: Arc<BrokerConfig>,
    publisher: Arc<Publisher>,
    active: Option<Arc<ActiveController>>,
    /// Remote controllers: node id and address.
    remotes: Vec<(i32, String)>,
    /// This node's side of the test faults on links to the controllers.
    outbound: Outbound,
    idle: Mutex<HashMap<String, Vec<RpcClient>>>,
    leader_hint: AtomicI32,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The next producer id to hand out and the end of the reserved block.
    producer_ids: tokio::sync::Mutex<(i64, i64)>,
    incarnation_id: Uuid,
    broker_epoch: AtomicI64,
    /// The epoch this process's clean-shutdown markers named at start (-1: a crash).
    previous_broker_epoch: AtomicI64,
    shutting_down: AtomicBool,
    /// Where Kafka clients on the controller listener go, once the node serves them.
    kafka_connections: Arc<rpc::KafkaConnections>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("node_id", &self.config.node_id)
            .field("incarnation_id", &self.incarnation_id)
            .finish_non_exhaustive()
    }
}

fn storage(source: LogError) -> ControllerError {
    ControllerError::Storage { source }
}

/// What a metadata snapshot of the single-node controller before Raft held.
#[derive(Debug, Default, Deserialize)]
struct LegacySnapshot {
    cluster_id: String,
    topics: BTreeMap<String, LegacyTopic>,
    producer_id_block_end: i64,
}

#[derive(Debug, Deserialize)]
struct LegacyTopic {
    name: String,
    topic_id: Uuid,
    replicas: Vec<i32>,
    leader_epoch: i32,
    configs: ConfigMap,
}

/// The first record of a new cluster: the cluster id (from `meta.properties` when the
/// directory has one, else from a pre-Raft snapshot, else new) and the pre-Raft topics.
fn initial_record(config: &BrokerConfig) -> Result<Record, ControllerError> {
    let path = config.metadata_log_dir.join(LEGACY_SNAPSHOT_FILE);
    let legacy: LegacySnapshot = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            storage(LogError::CorruptFile {
                path: path.clone(),
                reason: e.to_string(),
            })
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => LegacySnapshot::default(),
        Err(e) => return Err(storage(LogError::io(&path, e))),
    };
    let properties =
        read_properties(&config.metadata_log_dir.join("meta.properties")).map_err(storage)?;
    let cluster_id = properties
        .and_then(|p| p.get("cluster.id").cloned())
        .filter(|id| !id.is_empty())
        .or(Some(legacy.cluster_id).filter(|id| !id.is_empty()))
        .unwrap_or_else(|| base64url(Uuid::new_v4()));
    let topics = legacy
        .topics
        .into_values()
        .map(|t| TopicImage {
            name: t.name,
            topic_id: t.topic_id,
            partitions: t
                .replicas
                .iter()
                .map(|r| PartitionImage {
                    leader_epoch: t.leader_epoch,
                    ..PartitionImage::new(vec![*r])
                })
                .collect(),
            configs: t.configs,
        })
        .collect();
    Ok(Record::InitCluster {
        cluster_id,
        topics,
        next_producer_id: legacy.producer_id_block_end,
        scram_credentials: bootstrap_scram_credentials(config)?,
    })
}

/// The SCRAM users of `scram.bootstrap.credentials`, each with a fresh salt.
fn bootstrap_scram_credentials(
    config: &BrokerConfig,
) -> Result<crate::metadata::ScramCredentials, ControllerError> {
    let mut credentials = crate::metadata::ScramCredentials::new();
    let wanted = crate::config::sasl::bootstrap_credentials(&config.values).map_err(|e| {
        ControllerError::Quorum {
            reason: e.to_string(),
        }
    })?;
    for user in wanted {
        let Some(mechanism) = crate::sasl::ScramMechanism::from_name(&user.mechanism) else {
            continue;
        };
        let credential =
            crate::sasl::ScramCredential::from_password(mechanism, &user.password, user.iterations)
                .map_err(|e| ControllerError::Quorum {
                    reason: e.to_string(),
                })?;
        credentials
            .entry(user.user)
            .or_default()
            .insert(user.mechanism, credential);
    }
    Ok(credentials)
}

impl Controller {
    /// Starts this node's part of the quorum: for a controller, its Raft node, leader duties
    /// and controller listener; for a broker-only node, a follower of the controllers'
    /// metadata. Returns once started; the image fills in as the log is replayed.
    pub async fn open(
        config: Arc<BrokerConfig>,
        clock: Clock,
        outbound: Outbound,
    ) -> Result<Arc<Self>, ControllerError> {
        let publisher = Arc::new(Publisher::default());
        let mut tasks = Vec::new();
        let kafka_connections = Arc::new(rpc::KafkaConnections::new());
        let active = if config.roles.controller {
            let quorum = Quorum::start(
                &config,
                &config.metadata_log_dir,
                Arc::clone(&publisher),
                outbound.clone(),
            )
            .await?;
            let init = initial_record(&config)?;
            let active = Arc::new(ActiveController::new(
                Arc::clone(&config),
                quorum,
                Arc::clone(&publisher),
                init,
                clock,
            ));
            tasks.push(tokio::spawn(Arc::clone(&active).run()));
            if let Some(address) = config.controller_listener {
                let serving = serve_listener(&config, address, &active, &kafka_connections);
                tasks.push(serving.await?);
            }
            Some(active)
        } else {
            None
        };
        let remotes: Vec<(i32, String)> = config
            .voters
            .iter()
            .filter(|v| v.node_id != config.node_id)
            .map(|v| (v.node_id, format!("{}:{}", v.host, v.port)))
            .collect();
        if active.is_none() {
            let addresses = remotes.iter().map(|(_, a)| a.clone()).collect();
            tasks.push(tokio::spawn(lifecycle::follow_metadata(
                Arc::clone(&publisher),
                addresses,
                outbound.clone(),
            )));
        }
        Ok(Arc::new(Controller {
            config,
            publisher,
            active,
            remotes,
            outbound,
            idle: Mutex::new(HashMap::new()),
            leader_hint: AtomicI32::new(-1),
            tasks: Mutex::new(tasks),
            producer_ids: tokio::sync::Mutex::new((0, 0)),
            incarnation_id: Uuid::new_v4(),
            broker_epoch: AtomicI64::new(-1),
            previous_broker_epoch: AtomicI64::new(-1),
            shutting_down: AtomicBool::new(false),
            kafka_connections,
        }))
    }

    /// Hands connections of Kafka clients on the controller listener (admin tools with
    /// `--bootstrap-controller`) to `serve` from now on.
    pub fn serve_kafka_clients(&self, serve: impl Fn(rpc::KafkaClient) + Send + Sync + 'static) {
        if self.kafka_connections.set(Box::new(serve)).is_err() {
            tracing::warn!("Kafka clients on the controller listener were already served");
        }
    }

    /// The current metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.image()
    }

    /// A receiver of every later image.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<MetadataImage>> {
        self.publisher.subscribe()
    }

    /// This node's view of the metadata quorum, if it is a voter: the leader it knows
    /// (confirmed within the lease), the Raft term, and the last applied log index.
    pub fn quorum_status(&self) -> Option<QuorumStatus> {
        let active = self.active.as_ref()?;
        let metrics = active.quorum.raft.metrics().borrow().clone();
        Some(QuorumStatus {
            leader: active.quorum.leader(),
            term: metrics.current_term,
            applied: metrics.last_applied.map_or(0, |l| l.index),
        })
    }

    /// The broker's own configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Waits until the metadata has a cluster id (the cluster's first record is applied).
    pub async fn wait_for_cluster_id(&self) -> String {
        let mut images = self.publisher.subscribe();
        let found = images.wait_for(|image| !image.cluster_id.is_empty()).await;
        found.map_or_else(|_| String::new(), |image| image.cluster_id.clone())
    }

    /// [`Controller::request`], answered with the reply of kind `T`; a reply of another kind
    /// (a controller of another version) is logged and refused as
    /// [`ControllerError::UnexpectedReply`].
    pub async fn ask<T: ReplyKind>(
        &self,
        request: ControllerRequest,
    ) -> Result<T, ControllerError> {
        let name = request.name();
        T::take(self.request(request).await?).map_err(|other| {
            tracing::error!(request = name, reply = ?other, "unexpected controller reply");
            ControllerError::UnexpectedReply {
                request: name,
                reply: format!("{other:?}"),
            }
        })
    }

    /// Sends `request` to the active controller, wherever it is, retrying while none is
    /// known for up to [`REQUEST_TIMEOUT`].
    ///
    /// As Kafka's NodeToControllerChannelManager does, a controller that does not answer in
    /// time (paused, cut off) is given up on at once and the active one found again: the
    /// quorum's own view of its leader first (a controller node knows it from Raft), then
    /// the last NOT_CONTROLLER hint, then the other controllers in turn. A broker's
    /// heartbeats and registration give one controller at most a heartbeat interval, so
    /// that a stale controller cannot hold them back past the broker's session.
    pub async fn request(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerReply, ControllerError> {
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let attempt_timeout = self.attempt_timeout(&request);
        let mut backoff = Duration::from_millis(2);
        let mut route = Route::default();
        loop {
            let attempt = async {
                match &self.active {
                    Some(active) if active.quorum.is_leader() => {
                        active.handle(request.clone()).await
                    }
                    _ => {
                        self.call_remote(&request, &mut route, attempt_timeout)
                            .await
                    }
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let result = tokio::time::timeout(left, attempt).await;
            match result {
                Ok(Err(ControllerError::NotController { leader })) => {
                    self.leader_hint
                        .store(leader.unwrap_or(-1), Ordering::Relaxed);
                }
                Ok(other) => return other,
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(ControllerError::ControllerUnavailable {
                    timeout_ms: REQUEST_TIMEOUT.as_millis() as u64,
                });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }

    /// How long one remote controller may take to answer `request`.
    fn attempt_timeout(&self, request: &ControllerRequest) -> Duration {
        match request {
            ControllerRequest::BrokerHeartbeat { .. }
            | ControllerRequest::RegisterBroker { .. } => {
                let interval = Duration::from_millis(self.config.broker_heartbeat_interval_ms);
                interval.clamp(LIFECYCLE_RPC_TIMEOUT_MIN, RPC_TIMEOUT)
            }
            _ => RPC_TIMEOUT,
        }
    }

    /// The remote controller to try next: the active one the local quorum (or the followed
    /// metadata) knows, else the last hint, else the next in turn, never the one that just
    /// failed to answer.
    fn next_controller(&self, route: &mut Route) -> (i32, String) {
        // A broker-only node learns the active controller with the metadata it follows.
        let known = match &self.active {
            Some(active) => active.quorum.leader(),
            None => Some(self.publisher.image().controller_id).filter(|id| *id >= 0),
        };
        let hint = known.unwrap_or_else(|| self.leader_hint.load(Ordering::Relaxed));
        if hint != route.failed {
            if let Some(found) = self.remotes.iter().find(|(id, _)| *id == hint) {
                return found.clone();
            }
        }
        for _ in 0..self.remotes.len() {
            route.rotation += 1;
            let candidate = &self.remotes[route.rotation % self.remotes.len()];
            if candidate.0 != route.failed || self.remotes.len() == 1 {
                return candidate.clone();
            }
        }
        self.remotes[route.rotation % self.remotes.len()].clone()
    }

    async fn call_remote(
        &self,
        request: &ControllerRequest,
        route: &mut Route,
        timeout: Duration,
    ) -> Result<ControllerReply, ControllerError> {
        if self.remotes.is_empty() {
            return Err(ControllerError::NotController { leader: None });
        }
        let (target_id, target) = self.next_controller(route);
        let mut client = self.take_client(&target);
        let call = RpcRequest::Controller(request.clone());
        match client.call(&call, timeout).await {
            Ok(RpcResponse::Controller(result)) => {
                self.return_client(client);
                route.failed = -1;
                result.map_err(ControllerError::from)
            }
            Ok(_) => Err(ControllerError::NotController { leader: None }),
            Err(error) => {
                tracing::debug!(controller = %target, %error,
                    "controller did not answer; finding the active one again");
                route.failed = target_id;
                self.leader_hint.store(-1, Ordering::Relaxed);
                Err(ControllerError::NotController { leader: None })
            }
        }
    }

    fn take_client(&self, address: &str) -> RpcClient {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.get_mut(address)
            .and_then(Vec::pop)
            .unwrap_or_else(|| RpcClient::new(address.to_string(), self.outbound.clone()))
    }

    fn return_client(&self, client: RpcClient) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let pool = idle.entry(client.addr.clone()).or_default();
        if pool.len() < IDLE_CONNECTIONS_MAX {
            pool.push(client);
        }
    }

    /// Validates (and unless `validate_only`, creates) a topic.
    pub async fn create_topic(
        &self,
        topic: &NewTopic,
        validate_only: bool,
    ) -> Result<TopicImage, ControllerError> {
        let request = ControllerRequest::CreateTopic {
            topic: topic.clone(),
            validate_only,
        };
        self.ask(request).await
    }

    /// Deletes a topic by name.
    pub async fn delete_topic(&self, name: &str) -> Result<TopicImage, ControllerError> {
        let request = ControllerRequest::DeleteTopic {
            name: name.to_string(),
        };
        self.ask(request).await
    }

    /// Grows a topic to `count` partitions.
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let request = ControllerRequest::CreatePartitions {
            name: name.to_string(),
            count,
            validate_only,
        };
        self.request(request).await.map(|_| ())
    }

    /// Hands out a new producer id, reserving a new block through the quorum when the
    /// current one runs out (so ids are never reused, whatever restarts).
    pub async fn allocate_producer_id(&self) -> Result<i64, ControllerError> {
        let mut ids = self.producer_ids.lock().await;
        if ids.0 >= ids.1 {
            let request = ControllerRequest::AllocateProducerIds {
                node_id: self.config.node_id,
            };
            let block: ProducerIdBlock = self.ask(request).await?;
            *ids = (block.first, block.first + block.count);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }

    /// Stops every task of this node's quorum part and the Raft node (a clean stop after
    /// [`Controller::controlled_shutdown`], or the end of a test).
    pub async fn shutdown(&self) {
        self.abort_tasks();
        if let Some(active) = &self.active {
            if let Err(error) = active.quorum.raft.shutdown().await {
                tracing::warn!(%error, "metadata quorum did not stop cleanly");
            }
        }
    }

    fn abort_tasks(&self) {
        if let Some(active) = &self.active {
            active.stopping.store(true, Ordering::SeqCst);
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            task.abort();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.abort_tasks();
    }
}

/// Binds the controller listener at `address` and serves it (over TLS when it is SSL):
/// Raft and broker requests to `active`, Kafka clients to `kafka_connections`.
async fn serve_listener(
    config: &BrokerConfig,
    address: std::net::SocketAddr,
    active: &Arc<ActiveController>,
    kafka_connections: &Arc<rpc::KafkaConnections>,
) -> Result<tokio::task::JoinHandle<()>, ControllerError> {
    let listener =
        tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| ControllerError::Quorum {
                reason: format!("cannot listen on {address}: {e}"),
            })?;
    let tls = config
        .controller_tls
        .as_ref()
        .map(crate::tls::listener_tls)
        .transpose()
        .map_err(|e| ControllerError::Quorum {
            reason: format!("the controller listener's TLS: {e}"),
        })?;
    Ok(tokio::spawn(rpc::serve(
        listener,
        Arc::clone(active),
        Arc::clone(kafka_connections),
        tls,
    )))
}
