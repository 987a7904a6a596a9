//! Produce: each partition's batch is validated and appended by its partition; acks=0 gets
//! no response, acks=1 and acks=-1 are answered after the append (with one replica per
//! partition the high watermark moves with the append, so acks=-1 completes at once).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::errors::replica_error;
use super::{Broker, HandlerError, Outcome, Request};
use crate::replica::ReplicaError;

fn partition_error(index: i32, error: ResponseError) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error.code())
        .with_base_offset(-1)
        .with_log_start_offset(-1)
}

fn append(
    broker: &Broker,
    request: &Request,
    topic: &str,
    index: i32,
    records: &[u8],
) -> PartitionProduceResponse {
    let result = broker
        .replicas
        .partition(topic, index)
        .and_then(|p| p.append_as_leader(records).map(|info| (p, info)));
    match result {
        Ok((partition, info)) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(info.base_offset)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(partition.offsets().log_start_offset),
        Err(error) => {
            let code = replica_error(&error);
            log_failure(request, &error, code);
            partition_error(index, code)
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

/// Answers Produce.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ProduceRequest = request.decode()?;
    let acks_valid = matches!(body.acks, -1..=1);
    let image = broker.image();
    let mut responses = Vec::with_capacity(body.topic_data.len());
    for topic in &body.topic_data {
        let name = match image.topic_by_id(topic.topic_id) {
            Some(found) if request.version() >= 13 => found.name.clone(),
            _ => topic.name.0.to_string(),
        };
        let partitions = topic
            .partition_data
            .iter()
            .map(|p| {
                if !acks_valid {
                    return partition_error(p.index, ResponseError::InvalidRequiredAcks);
                }
                if request.version() >= 13 && image.topic_by_id(topic.topic_id).is_none() {
                    return partition_error(p.index, ResponseError::UnknownTopicId);
                }
                if crate::metadata::is_internal_topic(&name) {
                    tracing::debug!(client = %request.client, topic = %name, partition = p.index,
                        "produce to an internal topic refused");
                    return partition_error(p.index, ResponseError::InvalidTopicException);
                }
                let records = p.records.as_deref().unwrap_or_default();
                append(broker, request, &name, p.index, records)
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
    request.respond(&ProduceResponse::default().with_responses(responses))
}
