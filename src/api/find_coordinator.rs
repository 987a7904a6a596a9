//! FindCoordinator: the broker coordinating a group is the leader of the group's
//! `__consumer_offsets` partition, and that of a transactional id the leader of its
//! `__transaction_state` partition; each topic is created on the first request, as Kafka
//! does.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType};
use crate::config::ConfigMap;
use crate::controller::NewTopic;
use crate::group::OFFSETS_TOPIC;
use crate::txn::TRANSACTION_TOPIC;

/// Batched requests (v4+) carry their keys in `coordinator_keys`.
const BATCHED_VERSION_MIN: i16 = 4;
/// `key_type` of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// `key_type` of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Where a key's coordinator is (node id, host, port on the client's listener), or why it
/// cannot be told.
type Found = Result<(i32, String, u16), (ResponseError, &'static str)>;

/// An internal topic a coordinator keeps its state in.
struct InternalTopic {
    name: &'static str,
    partitions: i32,
    replication_factor: i32,
    min_isr: Option<i32>,
    segment_bytes: i64,
}

/// Creates a coordinator's internal topic when missing: compacted, replication capped by
/// the brokers there are (as Kafka does on the first FindCoordinator).
async fn ensure_topic(
    broker: &Broker,
    topic: InternalTopic,
) -> Result<(), (ResponseError, &'static str)> {
    let image = broker.image();
    if image.topic(topic.name).is_some() {
        return Ok(());
    }
    let brokers = image.unfenced_brokers().count().max(1) as i32;
    let replication_factor = topic.replication_factor.min(brokers);
    let mut configs = ConfigMap::new();
    configs.insert("cleanup.policy".into(), "compact".into());
    configs.insert("segment.bytes".into(), topic.segment_bytes.to_string());
    configs.insert("compression.type".into(), "producer".into());
    if let Some(min_isr) = topic.min_isr {
        configs.insert(
            "min.insync.replicas".into(),
            min_isr.min(replication_factor).to_string(),
        );
    }
    let new_topic = NewTopic {
        name: topic.name.to_string(),
        partitions: topic.partitions,
        replication_factor,
        assignments: Vec::new(),
        configs,
    };
    super::topics::create_if_missing(broker, &new_topic)
        .await
        .map_err(|error| {
            tracing::error!(topic = topic.name, %error, "cannot create an internal topic");
            (
                refusal_error(Refusal::NoCoordinator),
                "the coordinator's internal topic cannot be created",
            )
        })
}

/// The coordinator of `key` for the principal of `request`: DESCRIBE on the group or the
/// transactional id first (GROUP_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka checks.
async fn find_for(broker: &Broker, request: &Request, key_type: i8, key: &str) -> Found {
    let (resource, refusal) = match key_type {
        KEY_TYPE_TRANSACTION => (
            ResourceType::TransactionalId,
            Refusal::TransactionalIdAuthorizationFailed,
        ),
        _ => (ResourceType::Group, Refusal::GroupAuthorizationFailed),
    };
    if !broker.authorize(request, Operation::Describe, (resource, key)) {
        return Err((refusal_error(refusal), "not authorized"));
    }
    find(broker, &request.listener, key_type, key).await
}

async fn find(broker: &Broker, listener: &str, key_type: i8, key: &str) -> Found {
    let (topic, partition) = match key_type {
        KEY_TYPE_GROUP => {
            let config = &broker.groups.config;
            let topic = InternalTopic {
                name: OFFSETS_TOPIC,
                partitions: config.offsets_partitions,
                replication_factor: config.offsets_replication_factor,
                min_isr: None,
                segment_bytes: config.offsets_segment_bytes,
            };
            (topic, broker.groups.partition_for(key))
        }
        KEY_TYPE_TRANSACTION => {
            if key.is_empty() {
                return Err((
                    refusal_error(Refusal::InvalidRequest),
                    "the transactional id is empty",
                ));
            }
            let config = &broker.transactions.config;
            let topic = InternalTopic {
                name: TRANSACTION_TOPIC,
                partitions: config.partitions,
                replication_factor: config.replication_factor,
                min_isr: Some(config.min_isr),
                segment_bytes: config.segment_bytes,
            };
            (topic, broker.transactions.partition_for(key))
        }
        _ => {
            return Err((
                refusal_error(Refusal::InvalidRequest),
                "unknown coordinator key type",
            ))
        }
    };
    let name = topic.name;
    ensure_topic(broker, topic).await?;
    let image = broker.image();
    let leader = image
        .topic(name)
        .and_then(|t| t.partition(partition))
        .map(|p| p.leader);
    leader
        .and_then(|id| image.broker(id).filter(|b| !b.fenced))
        .and_then(|b| {
            let (host, port) = b.endpoint(listener)?;
            Some((b.node_id, host.to_string(), port))
        })
        .ok_or((
            refusal_error(Refusal::NoCoordinator),
            "the coordinator is not available",
        ))
}

fn coordinator(key: StrBytes, found: Found) -> Coordinator {
    let coordinator = Coordinator::default().with_key(key);
    match found {
        Ok((node_id, host, port)) => coordinator
            .with_node_id(BrokerId(node_id))
            .with_host(str_bytes(&host))
            .with_port(i32::from(port)),
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
            let found = find_for(broker, request, body.key_type, key).await;
            log(key, &found);
            coordinators.push(coordinator(key.clone(), found));
        }
        return request
            .respond(&FindCoordinatorResponse::default().with_coordinators(coordinators));
    }
    let found = find_for(broker, request, body.key_type, &body.key).await;
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
