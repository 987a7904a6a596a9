//! Transaction markers: the coordinator's half (after a transaction is decided, a COMMIT
//! or ABORT marker on every partition of it, written here for partitions this broker
//! leads and sent as WriteTxnMarkers to the leaders of the others, retried until each is
//! written or the coordinator moved; then the transaction is complete) and the leader's
//! half (WriteTxnMarkers: each marker appended, stamped with the coordinator epoch, and
//! replicated before the answer; on `__consumer_offsets` it also settles the pending
//! transactional offset commits).

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::errors::{marker_settled, refusal_error, replica_error, txn_error};
use super::refusal::Refusal;
use super::{topic_name, Broker, HandlerError, Outcome, Request};
use crate::group::OFFSETS_TOPIC;
use crate::ids;
use crate::log::control::Marker;
use crate::replica::journal::{self, TxnProducer};
use crate::txn::{Finish, Transition, TxnPartition, TxnState};

/// The WriteTxnMarkers version brokers send (Kafka 4.x serves only v1).
const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// First and longest pause between rounds of markers that could not be written yet.
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(50);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One marker to write: whose transaction, how it ended, at which coordinator epoch.
#[derive(Debug, Clone, Copy)]
struct MarkerOrder {
    producer: TxnProducer,
    marker: Marker,
}

/// Writes a marker on a partition this broker leads and waits for its replication; a
/// marker on `__consumer_offsets` then settles the producer's pending offset commits.
async fn write_local(
    broker: &Broker,
    (topic, partition): (&str, i32),
    order: MarkerOrder,
) -> Result<(), ResponseError> {
    let target = broker
        .replicas
        .leader_partition(topic, partition)
        .map_err(|e| replica_error(&e))?;
    let written = journal::write_marker(&target, order.producer, order.marker).map_err(|e| {
        tracing::warn!(topic, partition, producer_id = %order.producer.producer_id, %e,
            "cannot write a transaction marker");
        replica_error(&e)
    })?;
    if !written
        .replicated(broker.transactions.config.write_timeout)
        .await
    {
        return Err(refusal_error(Refusal::NotReplicatedInTime));
    }
    if topic == OFFSETS_TOPIC {
        broker.groups.complete_transaction(
            partition,
            order.producer.producer_id.0,
            order.marker.commit,
        );
    }
    Ok(())
}

/// Sends the markers of `partitions` (all led by `leader`) and returns the partitions
/// still to do.
async fn write_on(
    broker: &Broker,
    leader: i32,
    partitions: Vec<TxnPartition>,
    order: MarkerOrder,
) -> Vec<TxnPartition> {
    if leader == broker.config.node_id {
        let writes = partitions
            .iter()
            .map(|(t, p)| write_local(broker, (t, *p), order));
        let results = join_all(writes).await;
        return partitions
            .into_iter()
            .zip(results)
            .filter(|(tp, result)| !is_done(tp, result.err()))
            .map(|(tp, _)| tp)
            .collect();
    }
    let Some(address) = broker
        .image()
        .broker(leader)
        .map(|b| format!("{}:{}", b.host, b.port))
    else {
        return partitions;
    };
    let request = marker_request(&partitions, order);
    let timeout = broker.transactions.config.write_timeout + Duration::from_secs(1);
    let outbound = broker.outbound();
    let response = super::broker_client::call(
        &address,
        &outbound,
        &request,
        WRITE_TXN_MARKERS_VERSION,
        timeout,
    )
    .await;
    match response {
        Ok(response) => unwritten(&response),
        Err(error) => {
            tracing::warn!(leader, %error, "cannot send transaction markers");
            partitions
        }
    }
}

/// WriteTxnMarkers for one marker on `partitions`.
fn marker_request(partitions: &[TxnPartition], order: MarkerOrder) -> WriteTxnMarkersRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        topics.entry(topic).or_default().push(*partition);
    }
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(order.producer.producer_id.0))
        .with_producer_epoch(order.producer.producer_epoch.0)
        .with_transaction_result(order.marker.commit)
        .with_coordinator_epoch(order.marker.coordinator_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, indexes)| {
                    WritableTxnMarkerTopic::default()
                        .with_name(topic_name(topic))
                        .with_partition_indexes(indexes)
                })
                .collect(),
        );
    WriteTxnMarkersRequest::default().with_markers(vec![marker])
}

/// The partitions of a WriteTxnMarkers answer whose marker must be sent again.
fn unwritten(response: &WriteTxnMarkersResponse) -> Vec<TxnPartition> {
    let mut left = Vec::new();
    for topic in response.markers.iter().flat_map(|m| &m.topics) {
        for p in &topic.partitions {
            let partition = (topic.name.0.to_string(), p.partition_index);
            if !is_done(&partition, ResponseError::try_from_code(p.error_code)) {
                left.push(partition);
            }
        }
    }
    left
}

/// Whether a marker needs no retry ([`marker_settled`]); logged when it was refused for
/// good.
fn is_done(partition: &TxnPartition, error: Option<ResponseError>) -> bool {
    let settled = marker_settled(error);
    if settled && error.is_some() {
        tracing::warn!(topic = %partition.0, partition = partition.1, ?error,
            "transaction marker not written, not retried");
    }
    settled
}

/// Writes every marker of a decided transaction (retrying what fails while this broker
/// still coordinates it), then records it complete.
async fn finish(broker: &Broker, transition: Transition) {
    let next = &transition.next;
    let order = MarkerOrder {
        producer: TxnProducer {
            producer_id: ids::ProducerId(next.producer_id),
            producer_epoch: ids::ProducerEpoch(next.producer_epoch),
        },
        marker: Marker {
            commit: next.state == TxnState::PrepareCommit,
            coordinator_epoch: transition.coordinator_epoch,
        },
    };
    let mut left: Vec<TxnPartition> = next.partitions.iter().cloned().collect();
    let mut backoff = RETRY_BACKOFF_MIN;
    while !left.is_empty() {
        if !broker.transactions.is_current(&transition) {
            tracing::info!(transactional_id = %next.transactional_id, "transaction moved on; markers left to its new coordinator");
            return;
        }
        let image = broker.image();
        let mut by_leader: BTreeMap<i32, Vec<TxnPartition>> = BTreeMap::new();
        for tp in left.drain(..) {
            let leader = image
                .topic(&tp.0)
                .and_then(|t| t.partition(tp.1))
                .map(|p| p.leader);
            match leader {
                None => {
                    tracing::warn!(partition = ?tp, "partition of a transaction is gone: no marker")
                }
                Some(leader) => by_leader.entry(leader).or_default().push(tp),
            }
        }
        let rounds = by_leader
            .into_iter()
            .map(|(leader, partitions)| write_on(broker, leader, partitions, order));
        left = join_all(rounds).await.into_iter().flatten().collect();
        if !left.is_empty() {
            tracing::debug!(transactional_id = %next.transactional_id, left = left.len(), "retrying transaction markers");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }
    let id = next.transactional_id.clone();
    let now_ms = crate::clock::system_now_ms();
    let completed = broker
        .transactions
        .transition(&broker.replicas, &id, |current| {
            let still = current.is_some_and(|m| {
                m.state == next.state
                    && m.producer_epoch == next.producer_epoch
                    && m.pending.is_none()
            });
            Ok(((), current.filter(|_| still).map(|m| m.completed(now_ms))))
        })
        .await;
    if let Err(error) = completed {
        tracing::warn!(transactional_id = %id, %error, code = ?txn_error(&error), "cannot record the transaction complete");
    }
}

impl Broker {
    /// The transaction coordinator's background work: loads `__transaction_state`
    /// partitions led here (finishing the transactions they were deciding), finishes
    /// decided transactions, and aborts those open past their timeout.
    pub async fn run_transactions(&self) {
        let (Some(mut loads), Some(mut finishes)) = (
            self.transactions.take_loads(),
            self.transactions.take_finishes(),
        ) else {
            tracing::error!("transaction coordinator background task started twice");
            return;
        };
        let mut running = FuturesUnordered::new();
        let mut timeouts = tokio::time::interval(self.transactions.config.abort_check_interval);
        let mut expiry = tokio::time::interval(self.transactions.config.expiration_check_interval);
        loop {
            tokio::select! {
                Some(partition) = loads.recv() => {
                    for transition in self.transactions.load(&self.replicas, partition).await {
                        running.push(self.finish_one(Finish { transition, done: None }));
                    }
                }
                Some(order) = finishes.recv() => running.push(self.finish_one(order)),
                Some(()) = running.next() => {}
                _ = timeouts.tick() => self.abort_timed_out().await,
                _ = expiry.tick() => self.expire_transactional_ids().await,
            }
        }
    }

    async fn finish_one(&self, order: Finish) {
        finish(self, order.transition).await;
        if let Some(done) = order.done {
            let _ = done.send(());
        }
    }

    /// Forgets transactional ids idle past `transactional.id.expiration.ms` (tombstones).
    async fn expire_transactional_ids(&self) {
        let now_ms = crate::clock::system_now_ms();
        let expiration_ms = self.transactions.config.id_expiration_ms;
        for id in self.transactions.expired(now_ms) {
            let removed = self
                .transactions
                .transition(&self.replicas, &id, |current| {
                    Ok(((), current.and_then(|m| m.expired(now_ms, expiration_ms))))
                })
                .await;
            match removed {
                Ok(((), Some(_))) => {
                    tracing::info!(transactional_id = %id, "transactional id expired")
                }
                Ok(((), None)) => {}
                Err(error) => {
                    tracing::warn!(transactional_id = %id, %error, "cannot expire a transactional id")
                }
            }
        }
    }

    /// Aborts every transaction open past its timeout, at a bumped epoch.
    async fn abort_timed_out(&self) {
        let now_ms = crate::clock::system_now_ms();
        for id in self.transactions.timed_out(now_ms) {
            let aborted = self
                .transactions
                .transition(&self.replicas, &id, |current| {
                    Ok(((), current.and_then(|m| m.timed_out(now_ms))))
                })
                .await;
            match aborted {
                Ok(((), Some(transition))) => {
                    tracing::info!(transactional_id = %id, producer_id = transition.next.producer_id,
                        "transaction timed out: aborting it");
                    drop(self.transactions.finish(transition));
                }
                Ok(((), None)) => {}
                Err(error) => {
                    tracing::warn!(transactional_id = %id, %error, "cannot abort a timed-out transaction")
                }
            }
        }
    }
}

/// Answers WriteTxnMarkers (from a transaction coordinator): each marker on each
/// partition, written and replicated.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: WriteTxnMarkersRequest = request.decode()?;
    let mut markers = Vec::with_capacity(body.markers.len());
    for marker in &body.markers {
        let order = MarkerOrder {
            producer: TxnProducer {
                producer_id: ids::ProducerId(marker.producer_id.0),
                producer_epoch: ids::ProducerEpoch(marker.producer_epoch),
            },
            marker: Marker {
                commit: marker.transaction_result,
                coordinator_epoch: marker.coordinator_epoch,
            },
        };
        let mut topics = Vec::with_capacity(marker.topics.len());
        for topic in &marker.topics {
            let writes = topic
                .partition_indexes
                .iter()
                .map(|p| write_local(broker, (&topic.name.0, *p), order));
            let results = join_all(writes).await;
            let partitions = topic
                .partition_indexes
                .iter()
                .zip(results)
                .map(|(p, result)| {
                    let code = result.err().map_or(0, |e| e.code());
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(*p)
                        .with_error_code(code)
                })
                .collect();
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics),
        );
    }
    request.respond(&WriteTxnMarkersResponse::default().with_markers(markers))
}
