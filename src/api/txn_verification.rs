//! KIP-890 part 1: before a partition leader appends the first transactional batch of a
//! producer's transaction, it asks the transaction coordinator whether the partition is
//! in that producer's open transaction (AddPartitionsToTxn v4+ with `verify_only`), so a
//! late or stray write can never start a transaction nobody will end ("hanging"
//! transactions). Batches of a transaction already open here need no question.
//! `transaction.partition.verification.enable` turns it off.

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProduceRequest, ProducerId, TransactionalId,
};

use super::{topic_name, Broker};
use crate::log::batch::BatchHeader;
use crate::txn::TRANSACTION_TOPIC;

/// The version brokers verify with (batched, `verify_only`).
const VERIFY_VERSION: i16 = 4;
/// How long a leader waits for a remote coordinator's answer.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// A partition of the request: (topic, index).
type Target = (String, i32);

/// The partitions of `body` whose transactional batch must be refused, and with which
/// error: INVALID_TXN_STATE when the coordinator does not know the partition in the
/// producer's open transaction, NOT_ENOUGH_REPLICAS (retriable) when it cannot be asked.
pub async fn refused(
    broker: &Broker,
    body: &ProduceRequest,
    topics: &[String],
) -> HashMap<Target, ResponseError> {
    let Some(id) = body.transactional_id.as_ref().filter(|id| !id.is_empty()) else {
        return HashMap::new();
    };
    if !broker
        .config
        .parse::<bool>("transaction.partition.verification.enable")
        .unwrap_or(true)
    {
        return HashMap::new();
    }
    let mut unverified: Vec<Target> = Vec::new();
    let mut producer = None;
    for (topic, name) in body.topic_data.iter().zip(topics) {
        for p in &topic.partition_data {
            let Some(header) = p.records.as_deref().and_then(BatchHeader::parse) else {
                continue;
            };
            // Without a producer id there is no transaction to verify (Kafka appends it).
            if !header.is_transactional() || !header.has_producer_id() {
                continue;
            }
            let open = broker
                .replicas
                .leader_partition(name, p.index)
                .is_ok_and(|partition| {
                    partition
                        .log()
                        .producers()
                        .has_open_transaction(header.producer_id, header.producer_epoch)
                });
            if !open {
                producer = Some((header.producer_id, header.producer_epoch));
                unverified.push((name.clone(), p.index));
            }
        }
    }
    let Some(producer) = producer.filter(|_| !unverified.is_empty()) else {
        return HashMap::new();
    };
    let outcome = ask_coordinator(broker, id, producer, &unverified).await;
    unverified
        .into_iter()
        .filter_map(|tp| {
            let error = match &outcome {
                Ok(errors) => errors.get(&tp).copied()?,
                Err(()) => ResponseError::NotEnoughReplicas,
            };
            tracing::debug!(transactional_id = %id.0, topic = %tp.0, partition = tp.1, ?error,
                "transactional batch not verified by the coordinator");
            Some((tp, error))
        })
        .collect()
}

/// The coordinator's verdict per partition (absent: verified), or Err when it could not
/// be asked.
async fn ask_coordinator(
    broker: &Broker,
    id: &TransactionalId,
    producer: (i64, i16),
    partitions: &[Target],
) -> Result<HashMap<Target, ResponseError>, ()> {
    let image = broker.image();
    let coordinator = image
        .topic(TRANSACTION_TOPIC)
        .and_then(|t| t.partition(broker.transactions.partition_for(&id.0)))
        .map(|p| p.leader)
        .ok_or(())?;
    if coordinator == broker.config.node_id {
        return Ok(
            match super::transactions::verify(broker, &id.0, producer, partitions) {
                Ok(()) => HashMap::new(),
                Err(error) => {
                    let error = for_produce(super::errors::txn_error(&error));
                    partitions.iter().map(|tp| (tp.clone(), error)).collect()
                }
            },
        );
    }
    let address = image
        .broker(coordinator)
        .map(|b| format!("{}:{}", b.host, b.port))
        .ok_or(())?;
    let mut by_topic: HashMap<&str, Vec<i32>> = HashMap::new();
    for (topic, index) in partitions {
        by_topic.entry(topic).or_default().push(*index);
    }
    let transaction = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(id.clone())
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_verify_only(true)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![transaction]);
    let node_id = broker.config.node_id;
    let response = super::broker_client::call(&address, node_id, &request, VERIFY_VERSION, VERIFY_TIMEOUT)
        .await
        .map_err(|error| {
            tracing::warn!(transactional_id = %id.0, coordinator, %error, "cannot verify a transactional produce");
        })?;
    let mut errors = HashMap::new();
    for result in response
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
    {
        for p in &result.results_by_partition {
            if let Some(error) = ResponseError::try_from_code(p.partition_error_code) {
                errors.insert(
                    (result.name.0.to_string(), p.partition_index),
                    for_produce(error),
                );
            }
        }
    }
    Ok(errors)
}

/// The error a producer gets for a failed verification: a fenced producer
/// INVALID_PRODUCER_EPOCH (what Kafka answers Produce), a partition outside the
/// transaction INVALID_TXN_STATE, anything passing (a coordinator moving or busy)
/// NOT_ENOUGH_REPLICAS, which producers retry.
fn for_produce(error: ResponseError) -> ResponseError {
    match error {
        ResponseError::ProducerFenced
        | ResponseError::InvalidProducerEpoch
        | ResponseError::InvalidProducerIdMapping => ResponseError::InvalidProducerEpoch,
        ResponseError::InvalidTxnState => ResponseError::InvalidTxnState,
        _ => ResponseError::NotEnoughReplicas,
    }
}
