//! FindCoordinator: the broker coordinating a group is the leader of the group's
//! `__consumer_offsets` partition; the topic is created on the first request, as Kafka
//! does. Transaction coordinators do not exist yet: those keys get
//! COORDINATOR_NOT_AVAILABLE (retriable), which also keeps librdkafka's LZ4 support on
//! (it enables LZ4 only when the broker lists FindCoordinator).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::config::ConfigMap;
use crate::controller::NewTopic;
use crate::group::OFFSETS_TOPIC;
use crate::metadata::BrokerImage;

/// Batched requests (v4+) carry their keys in `coordinator_keys`.
const BATCHED_VERSION_MIN: i16 = 4;
/// `key_type` of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// `key_type` of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Where a key's coordinator is, or why it cannot be told.
type Found = Result<BrokerImage, (ResponseError, &'static str)>;

/// Creates `__consumer_offsets` when missing: compacted, `offsets.topic.num.partitions`
/// partitions, replication capped by the brokers there are.
async fn ensure_offsets_topic(broker: &Broker) -> Result<(), (ResponseError, &'static str)> {
    let image = broker.image();
    if image.topic(OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let config = &broker.groups.config;
    let brokers = image.unfenced_brokers().count().max(1) as i32;
    let mut configs = ConfigMap::new();
    configs.insert("cleanup.policy".into(), "compact".into());
    configs.insert(
        "segment.bytes".into(),
        config.offsets_segment_bytes.to_string(),
    );
    configs.insert("compression.type".into(), "producer".into());
    let topic = NewTopic {
        name: OFFSETS_TOPIC.to_string(),
        partitions: config.offsets_partitions,
        replication_factor: config.offsets_replication_factor.min(brokers),
        assignments: Vec::new(),
        configs,
    };
    super::topics::create_if_missing(broker, &topic)
        .await
        .map_err(|error| {
            tracing::error!(%error, "cannot create __consumer_offsets");
            (
                ResponseError::CoordinatorNotAvailable,
                "the offsets topic cannot be created",
            )
        })
}

async fn find(broker: &Broker, key_type: i8, key: &str) -> Found {
    match key_type {
        KEY_TYPE_GROUP => {}
        // Not COORDINATOR_NOT_AVAILABLE, which clients retry until their own timeout: a
        // non-retriable error makes initTransactions fail at once (issue 12, "never a
        // hang"), as InitProducerId with a transactional id already does.
        KEY_TYPE_TRANSACTION => {
            return Err((
                ResponseError::TransactionalIdAuthorizationFailed,
                "transactions are not supported by highwater yet",
            ))
        }
        _ => {
            return Err((
                ResponseError::InvalidRequest,
                "unknown coordinator key type",
            ))
        }
    }
    ensure_offsets_topic(broker).await?;
    let image = broker.image();
    let partition = broker.groups.partition_for(key);
    let leader = image
        .topic(OFFSETS_TOPIC)
        .and_then(|t| t.partition(partition))
        .map(|p| p.leader);
    leader
        .and_then(|id| image.broker(id).filter(|b| !b.fenced).cloned())
        .ok_or((
            ResponseError::CoordinatorNotAvailable,
            "the coordinator is not available",
        ))
}

fn coordinator(key: StrBytes, found: Found) -> Coordinator {
    let coordinator = Coordinator::default().with_key(key);
    match found {
        Ok(node) => coordinator
            .with_node_id(BrokerId(node.node_id))
            .with_host(str_bytes(&node.host))
            .with_port(i32::from(node.port)),
        Err((error, message)) => coordinator
            .with_node_id(BrokerId(-1))
            .with_port(-1)
            .with_error_code(error.code())
            .with_error_message(Some(str_bytes(message))),
    }
}

/// Answers FindCoordinator.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: FindCoordinatorRequest = request.decode()?;
    let log = |key: &str, found: &Found| {
        if let Err((error, message)) = found {
            tracing::debug!(client = %request.client, api = "FindCoordinator", key,
                key_type = body.key_type, ?error, message, "no coordinator");
        }
    };
    if request.version() >= BATCHED_VERSION_MIN {
        let mut coordinators = Vec::with_capacity(body.coordinator_keys.len());
        for key in &body.coordinator_keys {
            let found = find(broker, body.key_type, key).await;
            log(key, &found);
            coordinators.push(coordinator(key.clone(), found));
        }
        return request
            .respond(&FindCoordinatorResponse::default().with_coordinators(coordinators));
    }
    let found = find(broker, body.key_type, &body.key).await;
    log(&body.key, &found);
    let c = coordinator(body.key.clone(), found);
    let response = FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port);
    let response = match request.version() >= 1 {
        true => response.with_error_message(c.error_message),
        false => response,
    };
    request.respond(&response)
}
