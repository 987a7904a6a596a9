//! KIP-890 part 1: before a partition leader appends the first transactional batch of a
//! producer's transaction, it asks the transaction coordinator whether the partition is
//! in that producer's open transaction (AddPartitionsToTxn v4+ with `verify_only`), so a
//! late or stray write can never start a transaction nobody will end ("hanging"
//! transactions). Batches of a transaction already open here need no question.
//! `transaction.partition.verification.enable` turns it off.
//!
//! KIP-890 part 2: a transaction version 2 client (Produce v12+, TxnOffsetCommit v5+)
//! sends no AddPartitionsToTxn (nor AddOffsetsToTxn); the leader asks the coordinator to
//! add the partition instead (`verify_only` false), which starts the transaction if none
//! is open. This cannot be turned off: such a client's transaction depends on it.

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProduceRequest, ProducerId, TransactionalId,
};

use super::errors::{unverified_offsets_error, unverified_produce_error};
use super::{topic_name, Broker};
use crate::log::batch::BatchHeader;
use crate::txn::state::EPOCH_PER_TRANSACTION_VERSION;
use crate::txn::TRANSACTION_TOPIC;

/// The AddPartitionsToTxn version brokers send (batched; v5 knows TRANSACTION_ABORTABLE).
const BROKER_VERSION: i16 = 5;
/// The first Produce version of transaction version 2 clients.
const PRODUCE_ADDS_VERSION: i16 = 12;
/// The first TxnOffsetCommit version of transaction version 2 clients.
pub const TXN_OFFSET_COMMIT_ADDS_VERSION: i16 = 5;

/// What the coordinator is asked: whether the partitions are in the open transaction
/// (part 1), or to add them to it (part 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Verify,
    Add,
}
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
    version: i16,
    topics: &[String],
) -> HashMap<Target, ResponseError> {
    let Some(id) = body.transactional_id.as_ref().filter(|id| !id.is_empty()) else {
        return HashMap::new();
    };
    let ask = match version >= PRODUCE_ADDS_VERSION {
        true => Ask::Add,
        false => Ask::Verify,
    };
    let enabled = broker
        .replicas
        .live_config()
        .parse::<bool>("transaction.partition.verification.enable")
        .unwrap_or(true);
    if ask == Ask::Verify && !enabled {
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
    let outcome = ask_coordinator(broker, id, producer, &unverified, ask).await;
    unverified
        .into_iter()
        .filter_map(|tp| {
            let error = match &outcome {
                Ok(errors) => unverified_produce_error(Some(*errors.get(&tp)?)),
                Err(()) => unverified_produce_error(None),
            };
            tracing::debug!(transactional_id = %id.0, topic = %tp.0, partition = tp.1, ?error,
                "transactional batch not verified by the coordinator");
            Some((tp, error))
        })
        .collect()
}

/// The coordinator's answer per partition (absent: verified or added, as asked), or Err
/// when it could not be asked.
pub async fn ask_coordinator(
    broker: &Broker,
    id: &TransactionalId,
    producer: (i64, i16),
    partitions: &[Target],
    ask: Ask,
) -> Result<HashMap<Target, ResponseError>, ()> {
    let image = broker.image();
    let coordinator = image
        .topic(TRANSACTION_TOPIC)
        .and_then(|t| t.partition(broker.transactions.partition_for(&id.0)))
        .map(|p| p.leader)
        .ok_or(())?;
    if coordinator == broker.config.node_id {
        let answer = match ask {
            Ask::Verify => super::transactions::verify(broker, &id.0, producer, partitions),
            Ask::Add => {
                let added = partitions.to_vec();
                let version = EPOCH_PER_TRANSACTION_VERSION;
                super::transactions::add_partitions(broker, &id.0, producer, added, version).await
            }
        };
        return Ok(match answer {
            Ok(()) => HashMap::new(),
            Err(error) => {
                let error = super::errors::txn_error(&error);
                partitions.iter().map(|tp| (tp.clone(), error)).collect()
            }
        });
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
        .with_verify_only(ask == Ask::Verify)
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
    let outbound = broker.outbound();
    let response = super::broker_client::call(&address, &outbound, &request, BROKER_VERSION, VERIFY_TIMEOUT)
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
                errors.insert((result.name.0.to_string(), p.partition_index), error);
            }
        }
    }
    Ok(errors)
}

/// KIP-890 part 2 for TxnOffsetCommit v5+: the group's `__consumer_offsets` partition is
/// added to the transaction (what AddOffsetsToTxn did), or the error the commit gets: a
/// fenced producer INVALID_PRODUCER_EPOCH, a transaction in the wrong state
/// INVALID_TXN_STATE, anything passing COORDINATOR_NOT_AVAILABLE (as Kafka's group
/// coordinator answers; clients find the coordinator again and retry).
pub async fn add_offsets_partition(
    broker: &Broker,
    id: &TransactionalId,
    producer: (i64, i16),
    partition: Target,
) -> Result<(), ResponseError> {
    let asked = [partition];
    let outcome = ask_coordinator(broker, id, producer, &asked, Ask::Add).await;
    let [partition] = asked;
    let error = match outcome {
        Ok(errors) => match errors.get(&partition) {
            None => return Ok(()),
            Some(error) => unverified_offsets_error(Some(*error)),
        },
        Err(()) => unverified_offsets_error(None),
    };
    tracing::debug!(transactional_id = %id.0, partition = partition.1, ?error,
        "the offsets partition could not join the transaction");
    Err(error)
}
