//! Request handlers, one file per API family. Each decodes its request, calls the layers
//! below and encodes the response; error codes are chosen only in [`errors`].
//!
//! [`Broker`] is the state every handler reads: configuration, controller and replicas.

pub mod alter_configs;
pub mod api_versions;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_configs;
pub mod elect_leaders;
pub mod errors;
pub mod fetch;
pub mod find_coordinator;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod response;
pub mod topics;
pub mod versions;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::config::BrokerConfig;
use crate::controller::{Controller, ControllerError};
use crate::metadata::MetadataImage;
use crate::replica::{Partition, ReplicaError, ReplicaManager};
use kafka_protocol::error::ResponseError;
pub use response::ResponseFrame;

/// Everything a handler needs, shared by all connections.
#[derive(Debug)]
pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub controller: Arc<Controller>,
    pub replicas: ReplicaManager,
}

impl Broker {
    /// Starts this node's part of the metadata quorum, waits for the cluster's metadata,
    /// opens every partition hosted here, then (for the broker role) registers with the
    /// active controller and waits until it is unfenced, as a Kafka broker does before it
    /// opens its listeners.
    pub async fn open(config: Arc<BrokerConfig>) -> Result<Self, StartupError> {
        let controller = Controller::open(Arc::clone(&config)).await?;
        let replicas = ReplicaManager::open(Arc::clone(&config))
            .map_err(|source| ControllerError::Storage { source })?;
        let cluster_id = controller.wait_for_cluster_id().await;
        crate::replica::checkpoints::ensure_meta_properties(
            &config.log_dir,
            config.node_id,
            &cluster_id,
        )?;
        if config.roles.broker {
            replicas.apply_image(&controller.image())?;
            controller.start_broker().await?;
            replicas.apply_image(&controller.image())?;
        }
        Ok(Broker {
            config,
            controller,
            replicas,
        })
    }

    /// The current metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// Makes the partitions hosted here match the controller's latest image.
    pub fn publish(&self) -> Result<(), ReplicaError> {
        self.replicas.apply_image(&self.controller.image())
    }

    /// Applies every new metadata image to the hosted partitions (new topics, leader
    /// changes) until the task is dropped.
    pub async fn follow_metadata(&self) {
        let mut images = self.controller.subscribe();
        while images.changed().await.is_ok() {
            let image = Arc::clone(&images.borrow_and_update());
            if let Err(error) = self.replicas.apply_image(&image) {
                tracing::error!(%error, offset = image.offset, "cannot apply metadata image");
            }
        }
    }

    /// The broker's background work: log maintenance and following the metadata.
    pub async fn run_background(&self) {
        if self.config.roles.broker {
            tokio::join!(self.replicas.run_maintenance(), self.follow_metadata());
        }
    }
}

impl Broker {
    /// Runs `f` on partition `topic`-`index`; a missing partition or an error from `f` is
    /// logged once, with the client, API and partition (debug when it is the client's doing,
    /// error when it is the broker's), and returned as the Kafka error for the response.
    pub fn on_partition<T>(
        &self,
        request: &Request,
        topic: &str,
        index: i32,
        f: impl FnOnce(&Partition) -> Result<T, ReplicaError>,
    ) -> Result<T, ResponseError> {
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
}

/// A decoded request header with the rest of the frame, and who sent it.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
    pub client: SocketAddr,
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

    /// Encodes `response` as this request's answer.
    pub fn respond<R: Encodable + HeaderVersion>(
        &self,
        response: &R,
    ) -> Result<Outcome, HandlerError> {
        let frame = response::encode(self, response, R::header_version(self.version()))?;
        Ok(Outcome::Respond(frame))
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
    if !versions::is_served(request.api_key, request.version()) {
        if request.api_key == ApiKey::ApiVersions {
            return api_versions::unsupported_version(request);
        }
        return Err(HandlerError::UnsupportedVersion {
            api_key: request.api_key,
            version: request.version(),
        });
    }
    match request.api_key {
        ApiKey::Produce => produce::handle(broker, request),
        ApiKey::Fetch => fetch::handle(broker, request).await,
        ApiKey::ListOffsets => list_offsets::handle(broker, request),
        ApiKey::FindCoordinator => find_coordinator::handle(request),
        ApiKey::Metadata => metadata::handle(broker, request).await,
        ApiKey::ApiVersions => api_versions::handle(request),
        ApiKey::CreateTopics => topics::create_topics(broker, request).await,
        ApiKey::DeleteTopics => topics::delete_topics(broker, request).await,
        ApiKey::DeleteRecords => delete_records::handle(broker, request),
        ApiKey::CreatePartitions => topics::create_partitions(broker, request).await,
        ApiKey::InitProducerId => init_producer_id::handle(broker, request).await,
        ApiKey::OffsetForLeaderEpoch => offset_for_leader_epoch::handle(broker, request),
        ApiKey::DescribeConfigs => describe_configs::handle(broker, request),
        ApiKey::DescribeCluster => describe_cluster::handle(broker, request),
        ApiKey::IncrementalAlterConfigs => alter_configs::handle(broker, request).await,
        ApiKey::ElectLeaders => elect_leaders::handle(broker, request).await,
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
        } if *leader >= 0 => Some((*leader, *leader_epoch)),
        _ => None,
    }
}

/// The registered brokers among `node_ids`, once each, for the node endpoints that go
/// with leader hints.
pub fn endpoints<'a>(
    image: &'a MetadataImage,
    node_ids: &[i32],
) -> impl Iterator<Item = &'a crate::metadata::BrokerImage> {
    let mut ids = node_ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter().filter_map(|id| image.broker(id))
}

/// Builds the node endpoints (Produce's and Fetch's types differ, their fields do not) of
/// the leaders named in hints.
macro_rules! node_endpoints {
    ($endpoint:ty, $image:expr, $leaders:expr) => {
        $crate::api::endpoints($image, $leaders)
            .map(|b| {
                <$endpoint>::default()
                    .with_node_id(kafka_protocol::messages::BrokerId(b.node_id))
                    .with_host($crate::api::str_bytes(&b.host))
                    .with_port(i32::from(b.port))
            })
            .collect()
    };
}
pub(crate) use node_endpoints;

/// A wire topic name from a string.
pub fn topic_name(name: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_string(
        name.to_string(),
    ))
}

/// A wire string from a string.
pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}
