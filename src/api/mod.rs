//! Request handlers, one file per API family. Each decodes its request, calls the layers
//! below and encodes the response; error codes are chosen only in [`errors`].
//!
//! [`Broker`] is the state every handler reads: configuration, controller and replicas.

pub mod api_versions;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_configs;
pub mod errors;
pub mod fetch;
pub mod find_coordinator;
pub mod groups;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod offsets;
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
use crate::group::{GroupConfig, GroupCoordinator};
use crate::metadata::MetadataImage;
use crate::replica::{Partition, ReplicaError, ReplicaManager};
use kafka_protocol::error::ResponseError;
pub use response::ResponseFrame;

/// Everything a handler needs, shared by all connections.
#[derive(Debug)]
pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub controller: Controller,
    pub replicas: ReplicaManager,
    pub groups: GroupCoordinator,
}

impl Broker {
    /// Opens the controller's metadata and every partition it lists.
    pub fn open(config: Arc<BrokerConfig>) -> Result<Self, StartupError> {
        let controller = Controller::open(Arc::clone(&config))?;
        let replicas = ReplicaManager::open(Arc::clone(&config))
            .map_err(|source| ControllerError::Storage { source })?;
        let image = controller.image();
        crate::replica::checkpoints::ensure_meta_properties(
            &config.log_dir,
            config.node_id,
            &image.cluster_id,
        )?;
        replicas.apply_image(&image)?;
        let group_config = GroupConfig::from_broker(&config)?;
        let groups = GroupCoordinator::new(group_config, config.node_id);
        groups.on_image(&image);
        Ok(Broker {
            config,
            controller,
            replicas,
            groups,
        })
    }

    /// Runs the background work of the partitions and the group coordinator (retention,
    /// flushes, checkpoints; group loading and timers) until the process ends.
    pub async fn run_background(&self) {
        tokio::join!(
            self.replicas.run_maintenance(),
            self.groups.run(&self.replicas)
        );
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
        Ok(())
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
        let result = self.replicas.partition(topic, index).and_then(|p| f(&p));
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
        ApiKey::FindCoordinator => find_coordinator::handle(broker, request),
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
        ApiKey::Metadata => metadata::handle(broker, request),
        ApiKey::ApiVersions => api_versions::handle(request),
        ApiKey::CreateTopics => topics::create_topics(broker, request),
        ApiKey::DeleteTopics => topics::delete_topics(broker, request),
        ApiKey::DeleteRecords => delete_records::handle(broker, request),
        ApiKey::CreatePartitions => topics::create_partitions(broker, request),
        ApiKey::InitProducerId => init_producer_id::handle(broker, request),
        ApiKey::OffsetForLeaderEpoch => offset_for_leader_epoch::handle(broker, request),
        ApiKey::DescribeConfigs => describe_configs::handle(broker, request),
        ApiKey::DescribeCluster => describe_cluster::handle(broker, request),
        api_key => Err(HandlerError::UnsupportedVersion {
            api_key,
            version: request.version(),
        }),
    }
}

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
