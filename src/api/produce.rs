//! Produce: each partition's batch is validated and appended by its partition leader;
//! acks=0 gets no response, acks=1 is answered after the append, acks=-1 once the high
//! watermark has passed the batch (every in-sync replica has it) or with REQUEST_TIMED_OUT
//! after the request's timeout (DelayedProduce in Kafka). acks=-1 needs
//! `min.insync.replicas` in sync before the append (NOT_ENOUGH_REPLICAS) and after it
//! (NOT_ENOUGH_REPLICAS_AFTER_APPEND).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse};

use super::errors::refusal_error;
use super::errors::{record_errors, replica_error};
use super::refusal::Refusal;
use crate::acl::{Operation, ResourceType};
use crate::ids::{LeaderEpoch, Offset};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

use super::{leader_hint, node_endpoints, Broker, HandlerError, Outcome, Request};
use crate::replica::{Partition, ReplicaError};

fn partition_error(index: i32, error: ResponseError) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error.code())
        .with_base_offset(-1)
        .with_log_start_offset(-1)
}

/// A partition's append that waits for the ISR (acks=-1): where its response sits, the
/// partition, and the offset the high watermark must pass.
struct Pending {
    topic: usize,
    partition: usize,
    target: Arc<Partition>,
    end_offset: Offset,
    /// The leader epoch of the append: the wait fails if the leadership changes first.
    leader_epoch: LeaderEpoch,
}

fn append(
    broker: &Broker,
    request: &Request,
    topic: &str,
    index: i32,
    records: &[u8],
    acks: i16,
    leaders: &mut Vec<i32>,
) -> (
    PartitionProduceResponse,
    Option<(Arc<Partition>, Offset, LeaderEpoch)>,
) {
    let result = broker
        .replicas
        .leader_partition(topic, index)
        .and_then(|p| {
            if acks == -1 {
                check_min_insync(&p, false)?;
            }
            p.append_as_leader(records).map(|info| (p, info))
        });
    match result {
        Ok((partition, info)) => {
            if !info.duplicate {
                let count = info.last_offset - info.base_offset + 1;
                broker.metrics.appended(topic, records.len(), count);
            }
            let response = PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(info.base_offset.0)
                .with_log_append_time_ms(info.log_append_time_ms)
                .with_log_start_offset(partition.offsets().log_start_offset.0);
            let wait =
                (acks == -1).then(|| (partition, info.last_offset.next(), info.leader_epoch));
            (response, wait)
        }
        Err(error) => {
            let code = replica_error(&error);
            log_failure(request, &error, code);
            broker.metrics.produce_failed(topic);
            (failed(request, index, code, &error, leaders), None)
        }
    }
}

/// The response of a refused partition; NOT_LEADER_OR_FOLLOWER names the leader (v10+,
/// KIP-951), whose endpoint goes into the response's node endpoints.
fn failed(
    request: &Request,
    index: i32,
    code: ResponseError,
    error: &ReplicaError,
    leaders: &mut Vec<i32>,
) -> PartitionProduceResponse {
    let mut failed = partition_error(index, code);
    if let Some((errors, message)) = record_errors(error).filter(|_| request.version() >= 8) {
        failed.record_errors = errors
            .into_iter()
            .map(|(batch_index, message)| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(batch_index)
                    .with_batch_index_error_message(Some(StrBytes::from_string(message)))
            })
            .collect();
        failed.error_message = Some(StrBytes::from_string(message));
    }
    match leader_hint(error).filter(|_| request.version() >= LEADER_HINT_VERSION) {
        Some((leader, leader_epoch)) => {
            leaders.push(leader);
            failed.with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(leader_epoch),
            )
        }
        None => failed,
    }
}

/// Produce v10+ carries leader hints (KIP-951).
const LEADER_HINT_VERSION: i16 = 10;

/// NOT_ENOUGH_REPLICAS before an acks=-1 append (or ..._AFTER_APPEND once it is written)
/// when fewer replicas than `min.insync.replicas` are in sync.
fn check_min_insync(partition: &Partition, after: bool) -> Result<(), ReplicaError> {
    let tp = &partition.topic_partition;
    let required = partition.min_insync_replicas();
    let isr = partition.isr_len();
    if isr >= required {
        return Ok(());
    }
    let (topic, partition) = (tp.topic.clone(), tp.partition);
    Err(match after {
        false => ReplicaError::NotEnoughReplicas {
            topic,
            partition,
            isr,
            required,
        },
        true => ReplicaError::NotEnoughReplicasAfterAppend {
            topic,
            partition,
            isr,
            required,
        },
    })
}

/// Waits until the high watermark passes every acks=-1 append, or the request's timeout;
/// a partition that times out, or whose ISR shrank below `min.insync.replicas`, gets its
/// error instead of its offset.
async fn await_replication(
    request: &Request,
    timeout_ms: i32,
    pending: Vec<Pending>,
    responses: &mut [TopicProduceResponse],
) {
    let timeout = std::time::Duration::from_millis(timeout_ms.max(0) as u64);
    let waits = pending.iter().map(|p| {
        p.target
            .wait_for_high_watermark(p.end_offset, p.leader_epoch, timeout)
    });
    let results = futures_util::future::join_all(waits).await;
    for (p, result) in pending.iter().zip(results) {
        let result = result.and_then(|()| check_min_insync(&p.target, true));
        if let Err(error) = result {
            let code = replica_error(&error);
            log_failure(request, &error, code);
            let index = p.target.topic_partition.partition;
            responses[p.topic].partition_responses[p.partition] = partition_error(index, code);
        }
    }
}

fn log_failure(request: &Request, error: &ReplicaError, code: ResponseError) {
    if super::errors::is_client_error(code) {
        tracing::debug!(client = %request.client, api = "Produce", %error, "produce refused");
    } else {
        tracing::error!(client = %request.client, api = "Produce", %error, "produce failed");
    }
}

/// Why a partition's batch is refused before it reaches the log, in Kafka's order: invalid
/// acks, a denied write, an unknown topic id, an internal topic, an unverified
/// transaction (KIP-890).
fn refused(
    request: &Request,
    (acks_valid, denied, unknown_id): (bool, Option<ResponseError>, bool),
    (topic, index): (&str, i32),
    unverified: &std::collections::HashMap<(String, i32), ResponseError>,
) -> Option<ResponseError> {
    if !acks_valid {
        return Some(refusal_error(Refusal::InvalidRequiredAcks));
    }
    if denied.is_some() {
        return denied;
    }
    if unknown_id {
        return Some(refusal_error(Refusal::UnknownTopicId));
    }
    if crate::metadata::is_internal_topic(topic) {
        tracing::debug!(client = %request.client, topic, partition = index,
            "produce to an internal topic refused");
        return Some(refusal_error(Refusal::InvalidTopic));
    }
    unverified.get(&(topic.to_string(), index)).copied()
}

/// The name of each topic of the request (by id from v13).
fn topic_names(
    request: &Request,
    body: &ProduceRequest,
    image: &crate::metadata::MetadataImage,
) -> Vec<String> {
    body.topic_data
        .iter()
        .map(|topic| match image.topic_by_id(topic.topic_id) {
            Some(found) if request.version() >= 13 => found.name.clone(),
            _ => topic.name.0.to_string(),
        })
        .collect()
}

/// Whether the request's transactional id, if it has one, may be written with.
fn transactional_write_allowed(broker: &Broker, request: &Request, body: &ProduceRequest) -> bool {
    let transactional_id = body.transactional_id.as_deref().filter(|id| !id.is_empty());
    transactional_id.is_none_or(|id| {
        let resource = (ResourceType::TransactionalId, id.as_str());
        broker.authorize(request, Operation::Write, resource)
    })
}

/// Why writing to `topic` is denied, if it is: the transactional id, else the topic.
fn denied_write(
    broker: &Broker,
    request: &Request,
    txn_allowed: bool,
    topic: &str,
) -> Option<ResponseError> {
    if !txn_allowed {
        return Some(refusal_error(Refusal::TransactionalIdAuthorizationFailed));
    }
    (!broker.authorize(request, Operation::Write, (ResourceType::Topic, topic)))
        .then(|| refusal_error(Refusal::TopicAuthorizationFailed))
}

/// Answers Produce.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ProduceRequest = request.decode()?;
    let acks_valid = matches!(body.acks, -1..=1);
    let image = broker.image();
    // The produce byte rate counts the request's size, as Kafka's does.
    let (quotas, client) = (&image.client_quotas, request.quota_client());
    let produced = request.body.len() as f64;
    (request.throttle).raise(broker.quotas.produce.record(quotas, client, produced));
    let mut responses = Vec::with_capacity(body.topic_data.len());
    let mut pending = Vec::new();
    let mut leaders = Vec::new();
    let names = topic_names(request, &body, &image);
    // Kafka's order: the transactional id (for the whole request), then each topic.
    let txn_allowed = transactional_write_allowed(broker, request, &body);
    let unverified = match txn_allowed {
        true => super::txn_verification::refused(broker, &body, request.version(), &names).await,
        false => Default::default(),
    };
    for (topic, name) in body.topic_data.iter().zip(names) {
        let topic_index = responses.len();
        let authorized = denied_write(broker, request, txn_allowed, &name);
        let partitions = topic
            .partition_data
            .iter()
            .enumerate()
            .map(|(partition_index, p)| {
                let unknown_id =
                    request.version() >= 13 && image.topic_by_id(topic.topic_id).is_none();
                let checks = (acks_valid, authorized, unknown_id);
                if let Some(error) = refused(request, checks, (&name, p.index), &unverified) {
                    return partition_error(p.index, error);
                }
                let records = p.records.as_deref().unwrap_or_default();
                let (response, wait) = append(
                    broker,
                    request,
                    &name,
                    p.index,
                    records,
                    body.acks,
                    &mut leaders,
                );
                if let Some((target, end_offset, leader_epoch)) = wait {
                    pending.push(Pending {
                        topic: topic_index,
                        partition: partition_index,
                        target,
                        end_offset,
                        leader_epoch,
                    });
                }
                response
            })
            .collect();
        let response = TopicProduceResponse::default().with_partition_responses(partitions);
        responses.push(match request.version() >= 13 {
            true => response.with_topic_id(topic.topic_id),
            false => response.with_name(topic.name.clone()),
        });
    }
    if body.acks == 0 {
        return Ok(Outcome::NoResponse);
    }
    if !pending.is_empty() {
        await_replication(request, body.timeout_ms, pending, &mut responses).await;
    }
    let node_endpoints = node_endpoints!(NodeEndpoint, &image, &leaders, &request.listener);
    let response = ProduceResponse::default()
        .with_responses(responses)
        .with_node_endpoints(node_endpoints);
    request.respond(&response)
}
