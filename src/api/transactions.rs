//! The transaction coordinator's APIs (KIP-98, KIP-447, KIP-890): InitProducerId with a
//! transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit (on the
//! group coordinator), DescribeTransactions, ListTransactions and DescribeProducers. Every
//! state change is replicated in `__transaction_state` before the answer. Transaction
//! version 2 clients (EndTxn v5, TxnOffsetCommit v5) get a new epoch with every EndTxn
//! and have their partitions added by the leaders they write to (`txn_verification`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{self, TopicData};
use kafka_protocol::messages::list_transactions_response;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeProducersRequest, DescribeProducersResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    InitProducerIdResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use super::errors::refusal_error;
use super::errors::{controller_error, group_error, txn_error, txn_error_at};
use super::refusal::Refusal;
use super::txn_verification::{add_offsets_partition, TXN_OFFSET_COMMIT_ADDS_VERSION};
use super::{str_bytes, topic_name, Broker, HandlerError, Outcome, Request};
use crate::acl::Operation;
use crate::acl::ResourceType::{Topic, TransactionalId};
use crate::clock::system_now_ms as now_ms;
use crate::group::{Committer, OffsetCommit, OFFSETS_TOPIC};
use crate::replica::journal::TxnProducer;
use crate::txn::state::EPOCH_PER_TRANSACTION_VERSION;
use crate::txn::{EndPlan, InitPlan, TransactionMetadata, TxnError, TxnPartition};

/// AddPartitionsToTxn v4+ batches transactions (sent by brokers, KIP-890).
pub const ADD_PARTITIONS_BATCHED_VERSION: i16 = 4;

/// The code of a refusal at this request's API and version.
fn txn_code(request: &Request, error: &TxnError) -> ResponseError {
    txn_error_at(error, request.api_key, request.version())
}

fn log_refusal(request: &Request, api: &str, id: &str, error: &TxnError) {
    let code = txn_error(error);
    match super::errors::is_client_error(code) {
        true => {
            tracing::debug!(client = %request.client, api, transactional_id = id, %error, "refused")
        }
        false => {
            tracing::warn!(client = %request.client, api, transactional_id = id, %error, "failed")
        }
    }
}

/// InitProducerId for a transactional id: the id's producer id at a new epoch, fencing
/// any older instance (its open transaction is aborted first: CONCURRENT_TRANSACTIONS
/// until then, which the client retries).
pub async fn init_producer_id(
    broker: &Broker,
    request: &Request,
    transactional_id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> InitProducerIdResponse {
    let failed = |code: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(code.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let max_ms = broker.transactions.config.max_timeout_ms;
    if timeout_ms <= 0 || timeout_ms > max_ms {
        let error = TxnError::InvalidTransactionTimeout {
            transactional_id: transactional_id.to_string(),
            timeout_ms,
            max_ms,
        };
        log_refusal(request, "InitProducerId", transactional_id, &error);
        return failed(txn_code(request, &error));
    }
    match init(broker, transactional_id, timeout_ms, expected).await {
        Ok(metadata) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(metadata.producer_id))
            .with_producer_epoch(metadata.producer_epoch),
        Err(InitFailure::Txn(error)) => {
            log_refusal(request, "InitProducerId", transactional_id, &error);
            failed(txn_code(request, &error))
        }
        Err(InitFailure::Code(code)) => failed(code),
    }
}

/// Why InitProducerId failed: a transaction error, or a code chosen already.
enum InitFailure {
    Txn(TxnError),
    Code(ResponseError),
}

async fn init(
    broker: &Broker,
    id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<TransactionMetadata, InitFailure> {
    let now = now_ms();
    let (current, _) = broker.transactions.get(id).map_err(InitFailure::Txn)?;
    let needs_id = match &current {
        None => true,
        Some(m) => matches!(
            m.init_producer_id(expected, timeout_ms, now),
            Ok(InitPlan::NewProducerId)
        ),
    };
    let new_id = match needs_id {
        true => Some(broker.controller.allocate_producer_id().await.map_err(|e| {
            tracing::error!(transactional_id = id, error = %e, "cannot allocate a producer id");
            InitFailure::Code(controller_error(&e))
        })?),
        false => None,
    };
    let concurrent = || TxnError::ConcurrentTransactions {
        transactional_id: id.to_string(),
        state: "changing",
    };
    let (fenced, transition) = broker
        .transactions
        .transition(&broker.replicas, id, |current| match current {
            None => {
                let producer_id = new_id.ok_or_else(concurrent)?;
                let mut fresh = TransactionMetadata::new(id, producer_id, timeout_ms);
                fresh.last_update_ms = now;
                Ok((false, Some(fresh)))
            }
            Some(m) => match m.init_producer_id(expected, timeout_ms, now)? {
                InitPlan::Write(next) => Ok((false, Some(next))),
                InitPlan::FenceOngoing(next) => Ok((true, Some(next))),
                InitPlan::NewProducerId => {
                    let mut next =
                        TransactionMetadata::new(id, new_id.ok_or_else(concurrent)?, timeout_ms);
                    next.last_update_ms = now;
                    Ok((false, Some(next)))
                }
            },
        })
        .await
        .map_err(InitFailure::Txn)?;
    let Some(transition) = transition else {
        return Err(InitFailure::Txn(concurrent()));
    };
    if fenced {
        tracing::info!(
            transactional_id = id,
            epoch = transition.next.producer_epoch,
            "a new instance fences the open transaction of the old one: aborting it"
        );
        drop(broker.transactions.finish(transition));
        return Err(InitFailure::Txn(concurrent()));
    }
    Ok(transition.next)
}

/// Adds `partitions` to the open transaction of `id` (starting one if none is open), for a
/// client of transaction version `client_version`.
pub async fn add_partitions(
    broker: &Broker,
    id: &str,
    producer: (i64, i16),
    partitions: Vec<TxnPartition>,
    client_version: i16,
) -> Result<(), TxnError> {
    let now = now_ms();
    let not_found = || TxnError::InvalidProducerIdMapping {
        transactional_id: id.to_string(),
        producer_id: producer.0,
    };
    broker
        .transactions
        .transition(&broker.replicas, id, |current| {
            let m = current.ok_or_else(not_found)?;
            Ok((
                (),
                m.add_partitions(producer, &partitions, client_version, now)?,
            ))
        })
        .await
        .map(|_| ())
}

/// Whether `topic-partition` exists (a transaction may only hold partitions that do).
fn partition_exists(broker: &Broker, topic: &str, partition: i32) -> bool {
    broker
        .image()
        .topic(topic)
        .is_some_and(|t| partition >= 0 && partition < t.partition_count())
}

/// Why some of `wanted` cannot join a transaction (a topic a client may not write to, an
/// unknown partition), with OPERATION_NOT_ATTEMPTED for the others; `None` if all can.
fn refused_partitions(
    broker: &Broker,
    request: &Request,
    wanted: &[(TopicName, i32)],
) -> Option<Vec<ResponseError>> {
    let from_client = request.version() < ADD_PARTITIONS_BATCHED_VERSION;
    let refused: Vec<Option<Refusal>> = wanted
        .iter()
        .map(|(t, p)| {
            let may_write = || {
                !crate::metadata::is_internal_topic(t)
                    && broker.authorize(request, Operation::Write, (Topic, t))
            };
            match () {
                _ if from_client && !may_write() => Some(Refusal::TopicAuthorizationFailed),
                _ if !partition_exists(broker, t, *p) => Some(Refusal::UnknownTopic),
                _ => None,
            }
        })
        .collect();
    refused.iter().any(Option::is_some).then(|| {
        refused
            .into_iter()
            .map(|r| refusal_error(r.unwrap_or(Refusal::NotAttempted)))
            .collect()
    })
}

/// The per-partition answer of one transaction's AddPartitionsToTxn.
async fn add_partitions_result(
    broker: &Broker,
    request: &Request,
    id: &str,
    producer: (i64, i16),
    topics: &[kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let wanted: Vec<(TopicName, i32)> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.clone(), *p)))
        .collect();
    // Clients (v0-3) need WRITE on the transactional id and on each topic (never an
    // internal one); brokers (v4+) were authorized for the whole request.
    let from_client = request.version() < ADD_PARTITIONS_BATCHED_VERSION;
    let codes: Vec<ResponseError> =
        if from_client && !broker.authorize(request, Operation::Write, (TransactionalId, id)) {
            let code = refusal_error(Refusal::TransactionalIdAuthorizationFailed);
            vec![code; wanted.len()]
        } else if let Some(refused) = refused_partitions(broker, request, &wanted) {
            // One refused partition fails the whole transaction's request (Kafka).
            refused
        } else {
            let partitions: Vec<TxnPartition> =
                wanted.iter().map(|(t, p)| (t.0.to_string(), *p)).collect();
            let result = match verify_only {
                true => verify(broker, id, producer, &partitions),
                // A broker adding partitions (v4+, not verify-only) does so for a transaction
                // version 2 client (KIP-890 part 2); clients (v0-3) add them themselves.
                false => {
                    let client_version = match request.version() >= ADD_PARTITIONS_BATCHED_VERSION {
                        true => EPOCH_PER_TRANSACTION_VERSION,
                        false => 0,
                    };
                    add_partitions(broker, id, producer, partitions.clone(), client_version).await
                }
            };
            match result {
                Ok(()) => Vec::new(),
                Err(error) => {
                    log_refusal(request, "AddPartitionsToTxn", id, &error);
                    vec![txn_code(request, &error); partitions.len()]
                }
            }
        };
    let mut by_topic: BTreeMap<String, Vec<AddPartitionsToTxnPartitionResult>> = BTreeMap::new();
    for (i, (topic, partition)) in wanted.iter().enumerate() {
        let code = codes.get(i).map_or(0, |c| c.code());
        by_topic.entry(topic.0.to_string()).or_default().push(
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(*partition)
                .with_partition_error_code(code),
        );
    }
    by_topic
        .into_iter()
        .map(|(topic, results)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic_name(&topic))
                .with_results_by_partition(results)
        })
        .collect()
}

/// KIP-890's verification (AddPartitionsToTxn v4+ `verify_only`): whether the partitions
/// are in the open transaction of that producer.
pub fn verify(
    broker: &Broker,
    id: &str,
    producer: (i64, i16),
    partitions: &[TxnPartition],
) -> Result<(), TxnError> {
    let (current, _) = broker.transactions.get(id)?;
    match current {
        Some(m) => m.verify(producer.0, producer.1, partitions),
        None => Err(TxnError::InvalidProducerIdMapping {
            transactional_id: id.to_string(),
            producer_id: producer.0,
        }),
    }
}

/// Answers AddPartitionsToTxn (v0–3 from clients, v4+ batched).
pub async fn add_partitions_to_txn(
    broker: &Broker,
    request: &Request,
) -> Result<Outcome, HandlerError> {
    let body: AddPartitionsToTxnRequest = request.decode()?;
    if request.version() < ADD_PARTITIONS_BATCHED_VERSION {
        let id = body.v3_and_below_transactional_id.0.to_string();
        let producer = (
            body.v3_and_below_producer_id.0,
            body.v3_and_below_producer_epoch,
        );
        let results = add_partitions_result(
            broker,
            request,
            &id,
            producer,
            &body.v3_and_below_topics,
            false,
        )
        .await;
        return request.respond(
            &AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
        );
    }
    let mut results = Vec::with_capacity(body.transactions.len());
    for txn in &body.transactions {
        let id = txn.transactional_id.0.to_string();
        let producer = (txn.producer_id.0, txn.producer_epoch);
        let topics =
            add_partitions_result(broker, request, &id, producer, &txn.topics, txn.verify_only)
                .await;
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id.clone())
                .with_topic_results(topics),
        );
    }
    request.respond(&AddPartitionsToTxnResponse::default().with_results_by_transaction(results))
}

/// Answers AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the
/// transaction, so that its TxnOffsetCommit is settled by the transaction's marker.
pub async fn add_offsets_to_txn(
    broker: &Broker,
    request: &Request,
) -> Result<Outcome, HandlerError> {
    let body: AddOffsetsToTxnRequest = request.decode()?;
    let id = body.transactional_id.0.to_string();
    let partition = (
        OFFSETS_TOPIC.to_string(),
        broker.groups.partition_for(&body.group_id.0),
    );
    let producer = (body.producer_id.0, body.producer_epoch);
    let code = match add_partitions(broker, &id, producer, vec![partition], 0).await {
        Ok(()) => 0,
        Err(error) => {
            log_refusal(request, "AddOffsetsToTxn", &id, &error);
            txn_code(request, &error).code()
        }
    };
    request.respond(&AddOffsetsToTxnResponse::default().with_error_code(code))
}

/// The EndTxn version of transaction version 2 clients (an epoch per transaction).
const END_TXN_EPOCH_BUMP_VERSION: i16 = 5;

/// What an EndTxn decided: a transition to write markers for, or a retry of a decided
/// one; with the producer id and epoch the client goes on with.
type Decided = (Option<crate::txn::Transition>, (i64, i16));

/// Decides an EndTxn of `id`; `next_producer_id` once one was allocated for it.
async fn decide_end(
    broker: &Broker,
    id: &str,
    body: &EndTxnRequest,
    client_version: i16,
    next_producer_id: Option<i64>,
) -> Result<Result<Decided, ()>, TxnError> {
    let producer = (body.producer_id.0, body.producer_epoch);
    let now = now_ms();
    let not_found = || TxnError::InvalidProducerIdMapping {
        transactional_id: id.to_string(),
        producer_id: producer.0,
    };
    let end = (client_version, next_producer_id);
    let (plan, transition) = broker
        .transactions
        .transition(&broker.replicas, id, |current| {
            let m = current.ok_or_else(not_found)?;
            match m.end(producer, body.committed, end, now)? {
                EndPlan::AlreadyDone => Ok((Ok(m.producer_for_client()), None)),
                EndPlan::NewProducerId => Ok((Err(()), None)),
                EndPlan::Prepare(next) => Ok((Ok(next.producer_for_client()), Some(next))),
            }
        })
        .await?;
    Ok(plan.map(|client| (transition, client)))
}

/// Answers EndTxn: the decision is replicated, then the markers are written (the answer
/// waits for them up to the write timeout; they go on being retried after it). From v5
/// the transaction ends at a new epoch, which the answer hands the client.
pub async fn end_txn(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: EndTxnRequest = request.decode()?;
    let id = body.transactional_id.0.to_string();
    let client_version = match request.version() >= END_TXN_EPOCH_BUMP_VERSION {
        true => EPOCH_PER_TRANSACTION_VERSION,
        false => 0,
    };
    let mut decided = decide_end(broker, &id, &body, client_version, None).await;
    if let Ok(Err(())) = decided {
        decided = match broker.controller.allocate_producer_id().await {
            Ok(next) => decide_end(broker, &id, &body, client_version, Some(next)).await,
            Err(error) => {
                tracing::error!(transactional_id = %id, %error, "cannot allocate a producer id");
                let code = controller_error(&error).code();
                return request.respond(&end_txn_failed(code));
            }
        };
    }
    let response = match decided {
        Ok(Ok((transition, (producer_id, producer_epoch)))) => {
            if let Some(transition) = transition {
                let done = broker.transactions.finish(transition);
                let wait = broker.transactions.config.write_timeout;
                if tokio::time::timeout(wait, done).await.is_err() {
                    tracing::warn!(transactional_id = %id, "transaction markers still being written");
                }
            }
            EndTxnResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch)
        }
        Ok(Err(())) => {
            let error = TxnError::ConcurrentTransactions {
                transactional_id: id.clone(),
                state: "changing",
            };
            end_txn_failed(txn_code(request, &error).code())
        }
        Err(error) => {
            log_refusal(request, "EndTxn", &id, &error);
            end_txn_failed(txn_code(request, &error).code())
        }
    };
    request.respond(&response)
}

fn end_txn_failed(code: i16) -> EndTxnResponse {
    EndTxnResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

/// The offsets a TxnOffsetCommit asks to commit.
fn offset_commits(body: &TxnOffsetCommitRequest) -> impl Iterator<Item = OffsetCommit> + '_ {
    body.topics.iter().flat_map(|t| {
        t.partitions.iter().map(move |p| OffsetCommit {
            topic: t.name.0.to_string(),
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
        })
    })
}

/// Answers TxnOffsetCommit (group coordinator, KIP-447): offsets written in the
/// producer's transaction, checked against the group's generation and member like a
/// commit, and pending until the transaction's marker.
pub async fn txn_offset_commit(
    broker: &Broker,
    request: &Request,
) -> Result<Outcome, HandlerError> {
    let body: TxnOffsetCommitRequest = request.decode()?;
    let group = body.group_id.0.to_string();
    let committer = Committer {
        member_id: body.member_id.to_string(),
        group_instance_id: body.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: body.generation_id,
        api_version: request.version(),
        transactional: true,
    };
    // The transactional id and the group were authorized for the whole request; each
    // topic needs READ (Kafka), and its refusal is the answer of its partitions.
    let (commits, refused): (Vec<OffsetCommit>, Vec<OffsetCommit>) = offset_commits(&body)
        .partition(|c| broker.authorize(request, Operation::Read, (Topic, &c.topic)));
    let refused_code = refusal_error(Refusal::TopicAuthorizationFailed).code();
    let refused = refused
        .into_iter()
        .map(|c| (c.topic, c.partition, refused_code));
    let producer = TxnProducer {
        producer_id: crate::ids::ProducerId(body.producer_id.0),
        producer_epoch: crate::ids::ProducerEpoch(body.producer_epoch),
    };
    if request.version() >= TXN_OFFSET_COMMIT_ADDS_VERSION {
        let partition = (
            OFFSETS_TOPIC.to_string(),
            broker.groups.partition_for(&group),
        );
        let owner = (producer.producer_id.0, producer.producer_epoch.0);
        let id = &body.transactional_id;
        if let Err(code) = add_offsets_partition(broker, id, owner, partition).await {
            let codes = commits
                .into_iter()
                .map(|c| (c.topic, c.partition, code.code()));
            return request.respond(&txn_offset_commit_response(codes.chain(refused).collect()));
        }
    }
    let outcome = broker
        .groups
        .commit_offsets_as(
            &broker.replicas,
            &group,
            &committer,
            commits.clone(),
            Some(producer),
        )
        .await;
    let mut codes: Vec<(String, i32, i16)> = match outcome {
        Ok(results) => results
            .into_iter()
            .map(|(t, p, r)| (t, p, r.err().map_or(0, |e| group_error(&e).code())))
            .collect(),
        Err(error) => {
            tracing::debug!(client = %request.client, api = "TxnOffsetCommit", group, %error, "refused");
            let code = group_error(&error).code();
            commits
                .into_iter()
                .map(|c| (c.topic, c.partition, code))
                .collect()
        }
    };
    codes.extend(refused);
    request.respond(&txn_offset_commit_response(codes))
}

/// The TxnOffsetCommit answer of per-partition codes.
fn txn_offset_commit_response(codes: Vec<(String, i32, i16)>) -> TxnOffsetCommitResponse {
    let mut by_topic: BTreeMap<String, Vec<TxnOffsetCommitResponsePartition>> = BTreeMap::new();
    for (topic, partition, code) in codes {
        by_topic.entry(topic).or_default().push(
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(t, partitions)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic_name(&t))
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// Answers DescribeTransactions.
pub fn describe_transactions(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeTransactionsRequest = request.decode()?;
    let states = body
        .transactional_ids
        .iter()
        .map(|id| {
            let state = describe_transactions_response::TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            if !broker.authorize(request, Operation::Describe, (TransactionalId, &id.0)) {
                let code = refusal_error(Refusal::TransactionalIdAuthorizationFailed);
                return state.with_error_code(code.code());
            }
            let found = broker.transactions.get(&id.0).and_then(|(m, _)| {
                m.ok_or_else(|| TxnError::TransactionalIdNotFound {
                    transactional_id: id.0.to_string(),
                })
            });
            match found {
                Ok(m) => {
                    // Only the topics the principal may describe are shown (Kafka).
                    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                    for (t, p) in &m.partitions {
                        if broker.permits(request, Operation::Describe, (Topic, t)) {
                            topics.entry(t).or_default().push(*p);
                        }
                    }
                    state
                        .with_transaction_state(str_bytes(m.state.name()))
                        .with_transaction_timeout_ms(m.timeout_ms)
                        .with_transaction_start_time_ms(m.start_ms)
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.producer_epoch)
                        .with_topics(
                            topics
                                .into_iter()
                                .map(|(t, ps)| {
                                    TopicData::default()
                                        .with_topic(topic_name(t))
                                        .with_partitions(ps)
                                })
                                .collect(),
                        )
                }
                Err(error) => state.with_error_code(txn_error(&error).code()),
            }
        })
        .collect();
    request.respond(&DescribeTransactionsResponse::default().with_transaction_states(states))
}

/// Answers ListTransactions: every transaction this broker coordinates, filtered by state
/// names, producer ids and (v1+) how long it has been open.
pub fn list_transactions(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ListTransactionsRequest = request.decode()?;
    const STATES: [&str; 8] = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ];
    let unknown: Vec<_> = body
        .state_filters
        .iter()
        .filter(|s| !STATES.contains(&s.as_str()))
        .cloned()
        .collect();
    let now = now_ms();
    let states = broker
        .transactions
        .all()
        .into_iter()
        .filter(|m| {
            body.state_filters.is_empty()
                || body
                    .state_filters
                    .iter()
                    .any(|s| s.as_str() == m.state.name())
        })
        .filter(|m| {
            body.producer_id_filters.is_empty()
                || body
                    .producer_id_filters
                    .contains(&ProducerId(m.producer_id))
        })
        .filter(|m| {
            body.duration_filter < 0
                || (m.start_ms >= 0 && now - m.start_ms >= body.duration_filter)
        })
        .filter(|m| {
            let id = (TransactionalId, m.transactional_id.as_str());
            broker.permits(request, Operation::Describe, id)
        })
        .map(|m| {
            list_transactions_response::TransactionState::default()
                .with_transactional_id(kafka_protocol::messages::TransactionalId(str_bytes(
                    &m.transactional_id,
                )))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(str_bytes(m.state.name()))
        })
        .collect();
    request.respond(
        &ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown)
            .with_transaction_states(states),
    )
}

/// Answers DescribeProducers (kafka-transactions describe-producers, find-hanging): the
/// producers the leader of each partition knows, with their open transactions.
pub fn describe_producers(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    use kafka_protocol::messages::describe_producers_response::{
        PartitionResponse, ProducerState, TopicResponse,
    };
    let body: DescribeProducersRequest = request.decode()?;
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|index| {
                    let found = broker.on_partition(
                        request,
                        (Some(Operation::Read), &topic.name.0),
                        *index,
                        |partition| Ok(partition.log().producers().describe()),
                    );
                    let response = PartitionResponse::default().with_partition_index(*index);
                    match found {
                        Ok(producers) => response.with_active_producers(
                            producers
                                .into_iter()
                                .map(|p| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(p.producer_id))
                                        .with_producer_epoch(i32::from(p.producer_epoch))
                                        .with_last_sequence(p.last_sequence)
                                        .with_last_timestamp(p.last_timestamp)
                                        .with_coordinator_epoch(p.coordinator_epoch)
                                        .with_current_txn_start_offset(p.current_txn_start_offset)
                                })
                                .collect(),
                        ),
                        Err(code) => response.with_error_code(code.code()),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    request.respond(&DescribeProducersResponse::default().with_topics(topics))
}
