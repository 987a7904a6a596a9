//! Request handlers, one file per API family. Each decodes its request, calls the layers
//! below and encodes the response; error codes are chosen only in [`errors`].
//!
//! [`Broker`] is the state every handler reads: configuration, controller and replicas.

pub mod acls;
pub mod alter_configs;
pub mod api_versions;
pub mod authorization;
mod authorized_operations;
pub mod broker_client;
pub mod client_quotas;
pub mod consumer_groups;
pub mod delegation_tokens;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod errors;
pub mod fetch;
pub mod fetch_sessions;
pub mod find_coordinator;
pub mod groups;
pub mod init_producer_id;
pub mod injected;
mod isr_changes;
pub mod list_offsets;
pub mod log_dirs;
pub mod metadata;
mod mutation_quota;
pub mod offline_replicas;
pub mod offset_for_leader_epoch;
pub mod offsets;
pub mod produce;
pub mod reassignments;
pub mod refusal;
pub mod response;
pub mod scram_credentials;
pub mod throttle;
pub mod topics;
pub mod transactions;
pub mod txn_markers;
pub mod txn_verification;
pub mod update_features;
pub mod versions;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::controller::{Controller, ControllerError};
use crate::faults::Faults;
use crate::group::{GroupConfig, GroupCoordinator};
use crate::metadata::MetadataImage;
use crate::metrics::Metrics;
use crate::peer::Outbound;
use crate::replica::{Partition, ReplicaError, ReplicaManager};
use crate::txn::{TransactionCoordinator, TxnConfig};
use fetch_sessions::FetchSessions;
use kafka_protocol::error::ResponseError;
pub use response::ResponseFrame;
use throttle::ThrottleTime;

/// Everything a handler needs, shared by all connections.
#[derive(Debug)]
pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub controller: Arc<Controller>,
    pub replicas: ReplicaManager,
    pub groups: GroupCoordinator,
    pub transactions: TransactionCoordinator,
    /// Counters and histograms for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Faults a test injected (none in production).
    pub faults: Faults,
    /// How connections to other brokers are secured.
    peers: crate::peer::PeerConnector,
    /// How connections to controllers are secured.
    controllers: crate::peer::PeerConnector,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: FetchSessions,
    /// Kafka's StandardAuthorizer when `authorizer.class.name` names it (`authorization`).
    pub authorizer: Option<crate::acl::Authorizer>,
    /// Client quota usage (`crate::quota`).
    pub quotas: crate::quota::Quotas,
    /// ISR changes waiting for the next AlterPartition (`isr_changes`).
    isr_queue: isr_changes::IsrQueue,
}

impl Broker {
    /// Starts this node's part of the metadata quorum, waits for the cluster's metadata,
    /// opens every partition hosted here, then (for the broker role) registers with the
    /// active controller and waits until it is unfenced, as a Kafka broker does before it
    /// opens its listeners.
    pub async fn open(config: Arc<BrokerConfig>) -> Result<Self, StartupError> {
        Broker::open_with(config, Clock::system(), Faults::default()).await
    }

    /// [`Broker::open`] on `clock` (the simulator's, moved by hand) instead of the system's,
    /// with the `faults` a test sets (`testkit`, `highwater dev`).
    pub async fn open_with(
        config: Arc<BrokerConfig>,
        clock: Clock,
        faults: Faults,
    ) -> Result<Self, StartupError> {
        let peers = crate::peer::PeerConnector::new(&config.inter_broker_client)?;
        let controllers = crate::peer::PeerConnector::tls(config.controller_tls.as_ref())?;
        let outbound = Outbound {
            from: config.node_id,
            faults: faults.clone(),
            peers: peers.clone(),
            controllers: controllers.clone(),
        };
        let controller =
            Controller::open(Arc::clone(&config), clock.clone(), outbound.clone()).await?;
        let metrics = Arc::new(Metrics::new());
        let replicas =
            ReplicaManager::open(Arc::clone(&config), clock, Arc::clone(&metrics), outbound)
                .map_err(|source| ControllerError::Storage { source })?;
        let cluster_id = controller.wait_for_cluster_id().await;
        // A first meta.properties is written (two fsyncs) while the broker registers.
        let meta_properties = crate::replica::checkpoints::check_meta_properties(
            &config.metadata_log_dir,
            config.node_id,
            &cluster_id,
        )?
        .map(|write| tokio::task::spawn_blocking(move || write.write()));
        let fetch_sessions =
            FetchSessions::new(config.parse("max.incremental.fetch.session.cache.slots")?);
        let group_config = GroupConfig::from_broker(&config)?;
        let groups = GroupCoordinator::new(group_config, config.node_id);
        let transactions =
            TransactionCoordinator::new(TxnConfig::from_broker(&config)?, config.node_id);
        if config.roles.broker {
            // Nothing is led or followed from the local, possibly stale, metadata: the
            // partitions take their roles from the first image that shows this process
            // registered and unfenced.
            controller
                .start_broker(replicas.previous_broker_epoch())
                .await?;
            replicas.apply_image(&controller.image())?;
            groups.on_image(&controller.image());
            transactions.on_image(&controller.image());
        }
        if let Some(written) = meta_properties {
            written
                .await
                .map_err(|e| ReplicaError::InconsistentLogDir {
                    path: config.metadata_log_dir.clone(),
                    reason: format!("writing meta.properties failed: {e}"),
                })??;
        }
        Ok(Broker {
            authorizer: authorization::from_config(&config),
            config,
            controller,
            replicas,
            groups,
            transactions,
            metrics,
            faults,
            peers,
            controllers,
            fetch_sessions,
            quotas: crate::quota::Quotas::default(),
            isr_queue: isr_changes::IsrQueue::default(),
        })
    }

    /// This node's side of the test faults on its outbound links.
    pub fn outbound(&self) -> Outbound {
        Outbound {
            from: self.config.node_id,
            faults: self.faults.clone(),
            peers: self.peers.clone(),
            controllers: self.controllers.clone(),
        }
    }

    /// Whether `listener` is the controller listener (its clients get the controller's
    /// APIs only).
    pub fn is_controller_listener(&self, listener: &str) -> bool {
        self.config.controller_listener_name.as_deref() == Some(listener)
    }

    /// Every topic config of a topic with `overrides`, resolved against this broker's
    /// configuration and the dynamic broker configs in force.
    pub fn topic_configs(
        &self,
        overrides: &crate::config::ConfigMap,
    ) -> Vec<crate::config::topic::ResolvedConfig> {
        let image = self.image();
        let layers = image.broker_layers(self.config.node_id);
        crate::config::topic::resolve(&self.config, layers, overrides)
    }

    /// The current metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// Makes the partitions hosted here match the controller's latest image.
    pub fn publish(&self) -> Result<(), ReplicaError> {
        let image = self.controller.image();
        self.replicas.apply_image(&image)?;
        self.groups.on_image(&image);
        self.transactions.on_image(&image);
        Ok(())
    }

    /// Applies the metadata image, then every new one, to the hosted partitions (new
    /// topics, leader changes) and to the group coordinator (which `__consumer_offsets`
    /// partitions it leads) until the task is dropped. The current image first: one
    /// published after the broker opened and before this subscribed would otherwise count
    /// as seen, and the partitions it changed would keep their old roles until the next
    /// change (after a full restart of a cluster, followers that never fetched).
    pub async fn follow_metadata(&self) {
        let mut images = self.controller.subscribe();
        images.mark_changed();
        while images.changed().await.is_ok() {
            let image = Arc::clone(&images.borrow_and_update());
            if let Err(error) = self.replicas.apply_image(&image) {
                tracing::error!(%error, offset = image.offset, "cannot apply metadata image");
            }
            self.groups.on_image(&image);
            self.transactions.on_image(&image);
        }
    }

    /// The broker's background work: log maintenance, following the metadata, fetching
    /// as a follower, shrinking ISRs, the group coordinator's loading and timers.
    pub async fn run_background(&self) {
        if self.config.roles.broker {
            tokio::join!(
                self.replicas.run_maintenance(),
                self.follow_metadata(),
                self.replicas.run_fetchers(),
                self.shrink_isrs(),
                self.send_isr_changes(),
                self.report_offline_replicas(),
                self.groups.run(&self.replicas),
                self.run_transactions()
            );
        }
    }
}

impl Broker {
    /// Runs `f` on partition `topic`-`index` once the principal may do `operation` on the
    /// topic (else TOPIC_AUTHORIZATION_FAILED; `None`: the caller authorized the request
    /// otherwise); a missing partition or an error from `f` is
    /// logged once, with the client, API and partition (debug when it is the client's doing,
    /// error when it is the broker's), and returned as the Kafka error for the response.
    pub fn on_partition<T>(
        &self,
        request: &Request,
        (operation, topic): (Option<crate::acl::Operation>, &str),
        index: i32,
        f: impl FnOnce(&Partition) -> Result<T, ReplicaError>,
    ) -> Result<T, ResponseError> {
        let resource = (crate::acl::ResourceType::Topic, topic);
        if operation.is_some_and(|op| !self.authorize(request, op, resource)) {
            return Err(errors::refusal_error(
                refusal::Refusal::TopicAuthorizationFailed,
            ));
        }
        let result = self
            .replicas
            .leader_partition(topic, index)
            .and_then(|p| f(&p));
        result.map_err(|error| {
            let code = errors::replica_error(&error);
            let api = request.api_key;
            if errors::is_client_error(code) {
                tracing::debug!(client = %request.client, ?api, topic, partition = index, %error, "refused");
            } else {
                tracing::error!(client = %request.client, ?api, topic, partition = index, %error, "failed");
            }
            code
        })
    }
}

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("the inter-broker listener's TLS: {0}")]
    PeerTls(#[from] crate::tls::TlsError),
}

/// How a client proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Credential {
    /// It did not (PLAINTEXT, or TLS without a client certificate).
    #[default]
    None,
    /// A TLS client certificate.
    Certificate,
    /// A SASL login with its own password or token.
    Sasl,
    /// A SASL login with a delegation token.
    DelegationToken,
}

/// A decoded request header with the rest of the frame, and who sent it.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
    pub client: SocketAddr,
    /// The name of the listener the request came in on: brokers' addresses in the answer
    /// are those of this listener.
    pub listener: Arc<str>,
    /// Who sent it (`User:name`; `User:ANONYMOUS` without authentication): what the ACLs
    /// are checked against.
    pub principal: Arc<str>,
    /// How the client proved it is `principal`.
    pub credential: Credential,
    /// How long the client must back off under its quotas (`crate::quota`).
    pub throttle: throttle::Throttle,
}

impl Request {
    /// The request's API version.
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// Decodes the body as `T`.
    pub fn decode<T: Decodable>(&self) -> Result<T, HandlerError> {
        let mut body = self.body.clone();
        T::decode(&mut body, self.version()).map_err(|e| HandlerError::Decode(e.to_string()))
    }

    /// Encodes `response` as this request's answer, with the request's throttle time
    /// where its version has the field.
    pub fn respond<R: Encodable + HeaderVersion + ThrottleTime + Clone>(
        &self,
        response: &R,
    ) -> Result<Outcome, HandlerError> {
        let header_version = R::header_version(self.version());
        let throttle = self.throttle.ms();
        if throttle > 0 {
            let mut throttled = response.clone();
            throttled.set_throttle_time_ms(i32::try_from(throttle).unwrap_or(i32::MAX));
            if let Ok(frame) = response::encode(self, &throttled, header_version) {
                return Ok(Outcome::Respond(frame));
            }
        }
        let frame = response::encode(self, response, header_version)?;
        Ok(Outcome::Respond(frame))
    }

    /// The client its usage counts for under the quotas.
    pub fn quota_client(&self) -> crate::quota::Client<'_> {
        crate::quota::Client::new(&self.principal, self.header.client_id.as_deref())
    }
}

/// What a handler decided.
#[derive(Debug)]
pub enum Outcome {
    /// Send this frame.
    Respond(ResponseFrame),
    /// Send nothing (Produce with acks=0).
    NoResponse,
}

/// A request that cannot be answered: the connection is closed and the reason logged.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("cannot decode request body: {0}")]
    Decode(String),
    #[error("cannot encode response: {0}")]
    Encode(String),
    #[error("API {api_key:?} version {version} is not supported")]
    UnsupportedVersion { api_key: ApiKey, version: i16 },
}

/// Runs the handler of `request`'s API.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let on_listener = versions::on_listener(
        request.api_key,
        broker.is_controller_listener(&request.listener),
    );
    if !on_listener || !versions::is_served(request.api_key, request.version()) {
        if on_listener && request.api_key == ApiKey::ApiVersions {
            return api_versions::unsupported_version(request);
        }
        return Err(HandlerError::UnsupportedVersion {
            api_key: request.api_key,
            version: request.version(),
        });
    }
    if let Some(refusal) = broker.refusal_of_whole_request(request)? {
        return injected::answer(request, refusal.code());
    }
    match request.api_key {
        ApiKey::Produce => produce::handle(broker, request).await,
        ApiKey::Fetch => fetch::handle(broker, request).await,
        ApiKey::ListOffsets => list_offsets::handle(broker, request),
        ApiKey::FindCoordinator => find_coordinator::handle(broker, request).await,
        ApiKey::JoinGroup => groups::join_group(broker, request).await,
        ApiKey::SyncGroup => groups::sync_group(broker, request).await,
        ApiKey::Heartbeat => groups::heartbeat(broker, request),
        ApiKey::LeaveGroup => groups::leave_group(broker, request),
        ApiKey::ListGroups => groups::list_groups(broker, request),
        ApiKey::DescribeGroups => groups::describe_groups(broker, request),
        ApiKey::DeleteGroups => groups::delete_groups(broker, request),
        ApiKey::OffsetCommit => offsets::offset_commit(broker, request).await,
        ApiKey::OffsetFetch => offsets::offset_fetch(broker, request),
        ApiKey::OffsetDelete => offsets::offset_delete(broker, request).await,
        ApiKey::Metadata => metadata::handle(broker, request).await,
        ApiKey::ApiVersions => api_versions::handle(broker, request),
        ApiKey::DeleteRecords => delete_records::handle(broker, request),
        ApiKey::InitProducerId => init_producer_id::handle(broker, request).await,
        ApiKey::OffsetForLeaderEpoch => offset_for_leader_epoch::handle(broker, request),
        ApiKey::ConsumerGroupHeartbeat => consumer_groups::heartbeat(broker, request).await,
        ApiKey::ConsumerGroupDescribe => consumer_groups::describe(broker, request),
        ApiKey::AddPartitionsToTxn => transactions::add_partitions_to_txn(broker, request).await,
        ApiKey::AddOffsetsToTxn => transactions::add_offsets_to_txn(broker, request).await,
        ApiKey::EndTxn => transactions::end_txn(broker, request).await,
        ApiKey::TxnOffsetCommit => transactions::txn_offset_commit(broker, request).await,
        ApiKey::WriteTxnMarkers => txn_markers::handle(broker, request).await,
        ApiKey::DescribeTransactions => transactions::describe_transactions(broker, request),
        ApiKey::ListTransactions => transactions::list_transactions(broker, request),
        ApiKey::DescribeProducers => transactions::describe_producers(broker, request),
        ApiKey::DescribeTopicPartitions => describe_topic_partitions::handle(broker, request),
        _ => handle_admin(broker, request).await,
    }
}

/// Runs the handler of an administration API (topics, configs, the cluster, security).
async fn handle_admin(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    match request.api_key {
        ApiKey::CreateTopics => topics::create_topics(broker, request).await,
        ApiKey::DeleteTopics => topics::delete_topics(broker, request).await,
        ApiKey::CreatePartitions => topics::create_partitions(broker, request).await,
        ApiKey::DescribeConfigs => describe_configs::handle(broker, request),
        ApiKey::ListConfigResources => describe_configs::list_resources(broker, request),
        ApiKey::DescribeCluster => describe_cluster::handle(broker, request),
        ApiKey::IncrementalAlterConfigs => alter_configs::handle(broker, request).await,
        ApiKey::AlterConfigs => alter_configs::handle_legacy(broker, request).await,
        ApiKey::ElectLeaders => elect_leaders::handle(broker, request).await,
        ApiKey::UpdateFeatures => update_features::handle(broker, request).await,
        ApiKey::DescribeQuorum => describe_quorum::handle(broker, request).await,
        ApiKey::DescribeLogDirs => log_dirs::describe(broker, request),
        ApiKey::DescribeAcls => acls::describe(broker, request),
        ApiKey::CreateAcls => acls::create(broker, request).await,
        ApiKey::DeleteAcls => acls::delete(broker, request).await,
        ApiKey::AlterReplicaLogDirs => log_dirs::alter(broker, request),
        ApiKey::AlterPartitionReassignments => reassignments::alter(broker, request).await,
        ApiKey::ListPartitionReassignments => reassignments::list(broker, request),
        ApiKey::DescribeClientQuotas => client_quotas::describe(broker, request),
        ApiKey::AlterClientQuotas => client_quotas::alter(broker, request).await,
        ApiKey::DescribeUserScramCredentials => scram_credentials::describe(broker, request),
        ApiKey::AlterUserScramCredentials => scram_credentials::alter(broker, request).await,
        ApiKey::CreateDelegationToken => delegation_tokens::create(broker, request).await,
        ApiKey::RenewDelegationToken => delegation_tokens::renew(broker, request).await,
        ApiKey::ExpireDelegationToken => delegation_tokens::expire(broker, request).await,
        ApiKey::DescribeDelegationToken => delegation_tokens::describe(broker, request),
        // SaslHandshake and SaslAuthenticate are answered by the connection (`server::sasl`).
        api_key => Err(HandlerError::UnsupportedVersion {
            api_key,
            version: request.version(),
        }),
    }
}

/// The leader a NOT_LEADER_OR_FOLLOWER refusal points to (KIP-951: Produce v10+ and Fetch
/// v12+ tell the client the current leader and epoch, so it need not refresh metadata).
pub fn leader_hint(error: &ReplicaError) -> Option<(i32, i32)> {
    match error {
        ReplicaError::NotLeaderOrFollower {
            leader,
            leader_epoch,
            ..
        } if leader.0 >= 0 => Some((leader.0, leader_epoch.0)),
        _ => None,
    }
}

/// The registered brokers among `node_ids`, once each, with their address on `listener`
/// (node id, host, port), for the node endpoints that go with leader hints.
pub fn endpoints<'a>(
    image: &'a MetadataImage,
    node_ids: &[i32],
    listener: &'a str,
) -> impl Iterator<Item = (i32, &'a str, u16, Option<&'a str>)> {
    let mut ids = node_ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter().filter_map(move |id| {
        let broker = image.broker(id)?;
        let (host, port) = broker.endpoint(listener)?;
        Some((id, host, port, broker.rack.as_deref()))
    })
}

/// Builds the node endpoints (Produce's and Fetch's types differ, their fields do not) of
/// the leaders named in hints.
macro_rules! node_endpoints {
    ($endpoint:ty, $image:expr, $leaders:expr, $listener:expr) => {
        $crate::api::endpoints($image, $leaders, $listener)
            .map(|(id, host, port, rack)| {
                <$endpoint>::default()
                    .with_node_id(kafka_protocol::messages::BrokerId(id))
                    .with_host($crate::api::str_bytes(host))
                    .with_port(i32::from(port))
                    .with_rack(rack.map($crate::api::str_bytes))
            })
            .collect()
    };
}
pub(crate) use node_endpoints;

pub use crate::wire::{str_bytes, topic_name};
