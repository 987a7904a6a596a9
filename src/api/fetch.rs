//! Fetch for consumers: whole stored batches from the offset asked, read zero-copy from the
//! segment maps and capped at the high watermark (the last stable offset for
//! read_committed, with the aborted transactions among the batches returned).
//!
//! Fetch from a follower (replica id ≥ 0, in the body before v15, in ReplicaState from
//! v15): its fetch offset is its log end offset, which the partition records; it reads up
//! to the leader's log end offset, or gets the diverging epoch (v12+) to truncate to.
//!
//! Long poll (DelayedFetch in Apache Kafka): unless `max_wait_ms` <= 0, an error occurred
//! or `min_bytes` are already available, the request parks on the high-watermark channels
//! of its partitions and is re-read when one moves or when `max_wait_ms` passes. Nothing
//! polls.
//!
//! Fetch sessions (KIP-227, [`super::fetch_sessions`]): an incremental request reads every
//! partition of its session and answers only those with something new; a follower's
//! session at rest reads none while this broker's replication version stands.
//!
//! Fetch from follower (KIP-392): a consumer's Fetch v11+ may read from any replica here,
//! up to that replica's high watermark (last stable offset); with rack-aware reads
//! configured, a leader answers a consumer in another replica's rack with no records and
//! that replica as `preferred_read_replica` ([`crate::replica::read_replica`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::select_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, FetchResponse as Response, ProducerId, TopicName,
};
use kafka_protocol::protocol::HeaderVersion;
use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use super::errors::refusal_error;
use super::errors::replica_error;
use super::fetch_sessions::{Rest, SessionUse};
use super::refusal::Refusal;
use super::response::encode_with_sources;
use super::{leader_hint, node_endpoints, topic_name, Broker, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType};
use crate::ids::{self, LeaderEpoch, Offset};
use crate::log::batch::BatchIter;
use crate::metadata::MetadataImage;
use crate::replica::partition::THROTTLED_AS_LEADER;
use crate::replica::read_replica;
use crate::replica::roles::{FollowerFetch, FollowerFetchResult};
use crate::replica::{IsrChange, Partition, PartitionOffsets};

/// One partition of the request, resolved against this broker.
struct Target {
    topic_index: usize,
    request: FetchPartition,
    partition: Result<Arc<Partition>, ResponseError>,
    /// Leader and epoch when this broker does not lead the partition (KIP-951).
    leader: Option<(i32, i32)>,
}

/// Fetch v11+ carries the consumer's rack and may read from followers (KIP-392), v12+
/// leader hints, v16+ the leaders' endpoints (KIP-951).
const CLIENT_METADATA_VERSION: i16 = 11;
const LEADER_HINT_VERSION: i16 = 12;
const NODE_ENDPOINTS_VERSION: i16 = 16;

/// The answer so far, and what decides whether to send it.
struct Reading {
    topics: Vec<FetchableTopicResponse>,
    sources: Vec<Bytes>,
    bytes: usize,
    has_error: bool,
    /// ISR changes follower fetches made the leaders propose.
    isr_changes: Vec<IsrChange>,
    /// Bytes sent to throttled followers out of the ISR (the leader throttle counts them).
    throttled_bytes: usize,
    /// A consumer was sent to another replica, or a follower told where its log diverges:
    /// answered at once, as an error is.
    answer_now: bool,
    /// The (high watermark, log end offset) of each target when read, in order.
    offsets_read: Vec<(Offset, Offset)>,
    /// The replicas' roles version when read.
    roles_version: u64,
    /// This broker's replication version, read before the partitions.
    replication_version: u64,
    /// A follower's read that found every partition caught up, with nothing to send.
    at_rest: bool,
}

impl Reading {
    /// Nothing read yet of `targets`, with the versions read before them.
    fn new(
        broker: &Broker,
        request: &Request,
        (topics, targets): (&[(TopicName, Uuid)], &[Target]),
        follower: bool,
    ) -> Reading {
        Reading {
            topics: topics
                .iter()
                .map(|(name, id)| match request.version() >= 13 {
                    true => FetchableTopicResponse::default().with_topic_id(*id),
                    false => FetchableTopicResponse::default().with_topic(name.clone()),
                })
                .collect(),
            sources: Vec::new(),
            bytes: 0,
            has_error: false,
            isr_changes: Vec::new(),
            throttled_bytes: 0,
            answer_now: false,
            offsets_read: Vec::with_capacity(targets.len()),
            roles_version: broker.replicas.roles_version(),
            replication_version: broker.replicas.replication_version(),
            at_rest: follower,
        }
    }

    /// Adds the answer `data` for `target`, read with the log ending at `log_end`.
    fn add(&mut self, target: &Target, data: PartitionData, log_end: Offset) {
        self.at_rest &= data.error_code == 0
            && data.records.as_ref().is_none_or(Bytes::is_empty)
            && data.diverging_epoch.epoch < 0
            && target.request.fetch_offset == log_end.0;
        self.offsets_read
            .push((Offset(data.high_watermark), log_end));
        if let Some(records) = data.records.as_ref().filter(|r| !r.is_empty()) {
            self.bytes += records.len();
            self.sources.push(records.clone());
        }
        self.topics[target.topic_index].partitions.push(data);
    }

    /// Whether a partition's high watermark moved since this was read (a consumer's
    /// answer tells it).
    fn high_watermark_moved(&self, targets: &[Target]) -> bool {
        self.any_moved(targets, |p, read| p.high_watermark() != read.0)
    }

    /// Whether a partition's high watermark or log end offset moved since this was read,
    /// or the roles here (a follower's answer tells all three).
    fn replication_moved(&self, broker: &Broker, targets: &[Target]) -> bool {
        broker.replicas.roles_version() != self.roles_version
            || self.any_moved(targets, |p, read| {
                (p.high_watermark(), p.published_log_end_offset()) != *read
            })
    }

    fn any_moved(
        &self,
        targets: &[Target],
        moved: impl Fn(&Partition, &(Offset, Offset)) -> bool,
    ) -> bool {
        let partitions = targets.iter().map(|t| t.partition.as_ref().ok());
        partitions
            .zip(&self.offsets_read)
            .any(|(p, read)| p.is_some_and(|p| moved(p, read)))
    }
}

/// What a consumer's fetch brings to the read of each partition.
struct ConsumerFetch<'a> {
    isolation_level: i8,
    /// Fetch v11+: any replica here may serve it, not only a leader.
    any_replica: bool,
    /// The consumer's rack when leaders here send consumers to their rack's replica.
    rack: Option<&'a str>,
    image: &'a MetadataImage,
    listener: &'a str,
}

/// The fetching replica's id (from v15 in ReplicaState), -1 for consumers.
fn replica_id(request: &Request, body: &FetchRequest) -> i32 {
    match request.version() >= 15 {
        true => body.replica_state.replica_id.0,
        false => body.replica_id.0,
    }
}

fn resolve(
    broker: &Broker,
    request: &Request,
    read: &[FetchTopic],
    follower: bool,
) -> (Vec<(TopicName, Uuid)>, Vec<Target>) {
    let image = broker.image();
    let mut topics = Vec::new();
    let mut targets = Vec::new();
    // Kafka's checks: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on
    // each topic; either refusal is TOPIC_AUTHORIZATION_FAILED per partition.
    let follower_allowed = follower && broker.authorize_cluster(request, Operation::ClusterAction);
    for topic in read {
        let by_id = request.version() >= 13;
        let found = if by_id {
            image.topic_by_id(topic.topic_id)
        } else {
            image.topic(&topic.topic.0)
        };
        let name = found.map_or_else(|| topic.topic.clone(), |t| topic_name(&t.name));
        topics.push((name, topic.topic_id));
        let allowed = match (follower, found) {
            (true, _) => follower_allowed,
            (false, None) => true,
            (false, Some(t)) => {
                broker.authorize(request, Operation::Read, (ResourceType::Topic, &t.name))
            }
        };
        for p in &topic.partitions {
            // By name, the hosted partition decides (the image names topics for ids).
            let name = found.map_or(topic.topic.0.as_str(), |t| t.name.as_str());
            let mut leader = None;
            let partition = match found {
                _ if !allowed => Err(refusal_error(Refusal::TopicAuthorizationFailed)),
                None if by_id => Err(refusal_error(Refusal::UnknownTopicId)),
                _ if !follower && request.version() >= CLIENT_METADATA_VERSION => {
                    broker.replicas.partition(name, p.partition).map_err(|e| {
                        leader = leader_hint(&e);
                        replica_error(&e)
                    })
                }
                _ => broker
                    .replicas
                    .leader_partition(name, p.partition)
                    .map_err(|e| {
                        leader = leader_hint(&e);
                        replica_error(&e)
                    }),
            };
            targets.push(Target {
                topic_index: topics.len() - 1,
                request: p.clone(),
                partition,
                leader,
            });
        }
    }
    (topics, targets)
}

fn error_data(index: i32, error: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Bytes::new()))
}

/// A follower's read of one partition. Kafka's shouldLeaderThrottle: a throttled follower
/// out of the ISR gets no records while the leader quota is `throttle_exceeded` (its fetch
/// offset still counts), and what it gets counts against the quota.
fn read_for_follower(
    partition: &Partition,
    fetch: &FetchPartition,
    (replica_id, max_bytes, throttle_exceeded): (i32, usize, bool),
    rested_until_ms: Option<i64>,
    reading: &mut Reading,
) -> Result<PartitionData, ResponseError> {
    let replica_id = ids::BrokerId(replica_id);
    let throttled = partition.is_throttled(THROTTLED_AS_LEADER) && !partition.in_isr(replica_id);
    let max_bytes = match throttled && throttle_exceeded {
        true => 0,
        false => max_bytes,
    };
    let request = FollowerFetch {
        replica_id,
        fetch_offset: Offset(fetch.fetch_offset),
        last_fetched_epoch: LeaderEpoch(fetch.last_fetched_epoch),
        current_leader_epoch: LeaderEpoch(fetch.current_leader_epoch),
        max_bytes,
        rested_until_ms,
    };
    let (result, change) = partition
        .fetch_for_follower(request)
        .map_err(|e| replica_error(&e))?;
    reading.isr_changes.extend(change);
    if let (true, FollowerFetchResult::Records { records, .. }) = (throttled, &result) {
        reading.throttled_bytes += records.len();
    }
    let data = PartitionData::default().with_partition_index(fetch.partition);
    Ok(match result {
        FollowerFetchResult::Records {
            records,
            high_watermark,
            log_start_offset,
            ..
        } => data
            .with_high_watermark(high_watermark.0)
            .with_last_stable_offset(high_watermark.0)
            .with_log_start_offset(log_start_offset.0)
            .with_records(Some(records)),
        FollowerFetchResult::Diverging { epoch, end_offset } => {
            reading.answer_now = true;
            with_offsets(data, partition.offsets())
                .with_diverging_epoch(
                    kafka_protocol::messages::fetch_response::EpochEndOffset::default()
                        .with_epoch(epoch.0)
                        .with_end_offset(end_offset.0),
                )
                .with_records(Some(Bytes::new()))
        }
    })
}

/// `isolation_level` of a read_committed consumer.
const READ_COMMITTED: i8 = 1;

/// The follower a consumer should read `fetch` from instead of this leader, if any.
fn preferred_read_replica(
    partition: &Partition,
    fetch: &FetchPartition,
    consumer: &ConsumerFetch<'_>,
) -> Option<ids::BrokerId> {
    let rack = consumer.rack?;
    let rack_of = |id: ids::BrokerId| {
        let broker = consumer.image.broker(id.0)?;
        let reachable = !broker.fenced && broker.endpoint(consumer.listener).is_some();
        reachable.then(|| broker.rack.clone()).flatten()
    };
    partition.preferred_read_replica(Offset(fetch.fetch_offset), |leader, followers| {
        read_replica::rack_aware(rack, leader, followers, rack_of)
    })
}

fn read_partition(
    partition: &Partition,
    fetch: &FetchPartition,
    (max_bytes, min_one): (usize, bool),
    consumer: &ConsumerFetch<'_>,
) -> Result<PartitionData, ResponseError> {
    if !consumer.any_replica && !partition.is_leader() {
        return Err(refusal_error(Refusal::NotLeader));
    }
    partition
        .check_leader_epoch(LeaderEpoch(fetch.current_leader_epoch))
        .map_err(|e| replica_error(&e))?;
    let offsets = partition.offsets();
    let data = PartitionData::default().with_partition_index(fetch.partition);
    if let Some(replica) = preferred_read_replica(partition, fetch, consumer) {
        return Ok(with_offsets(data, offsets)
            .with_preferred_read_replica(BrokerId(replica.0))
            .with_records(Some(Bytes::new())));
    }
    let read_committed = consumer.isolation_level == READ_COMMITTED;
    let upper = match read_committed {
        true => offsets.last_stable_offset,
        false => offsets.high_watermark,
    };
    let log = partition.log();
    let records = log
        .read(Offset(fetch.fetch_offset), upper, max_bytes, min_one)
        .map_err(|e| replica_error(&partition.log_error(e)))?;
    // The aborted transactions among the batches returned, whose records the consumer
    // drops (it reads whole batches, so the range ends after the last one returned).
    let aborted = match read_committed {
        true => {
            let end = BatchIter::new(&records)
                .last()
                .map_or(fetch.fetch_offset, |(_, h)| h.last_offset() + 1);
            let found = log.producers().aborted_between(fetch.fetch_offset, end);
            Some(
                found
                    .into_iter()
                    .map(|a| {
                        AbortedTransaction::default()
                            .with_producer_id(ProducerId(a.producer_id))
                            .with_first_offset(a.first_offset)
                    })
                    .collect(),
            )
        }
        false => None,
    };
    drop(log);
    Ok(with_offsets(data, offsets)
        .with_aborted_transactions(aborted)
        .with_records(Some(records)))
}

/// A partition's answer with its offsets filled in.
fn with_offsets(data: PartitionData, offsets: PartitionOffsets) -> PartitionData {
    data.with_high_watermark(offsets.high_watermark.0)
        .with_last_stable_offset(offsets.last_stable_offset.0)
        .with_log_start_offset(offsets.log_start_offset.0)
}

/// The most a response may carry: what the request asks, and for a consumer no more than
/// its byte-rate quota lets through at once.
fn response_max_bytes(
    broker: &Broker,
    request: &Request,
    body: &FetchRequest,
    follower: bool,
) -> usize {
    let asked = body.max_bytes.max(0) as usize;
    if follower {
        return asked;
    }
    let quotas = &broker.image().client_quotas;
    let quota = broker
        .quotas
        .fetch
        .max_value_in_window(quotas, request.quota_client());
    quota.map_or(asked, |q| asked.min(q as usize))
}

/// A partition's answer to an error, with the leader hint when the version has one.
fn failed_data(request: &Request, target: &Target, error: ResponseError) -> PartitionData {
    let index = target.request.partition;
    tracing::debug!(client = %request.client, api = "Fetch", partition = index,
        offset = target.request.fetch_offset, error = ?error, "fetch partition error");
    let failed = error_data(index, error);
    match target
        .leader
        .filter(|_| request.version() >= LEADER_HINT_VERSION)
    {
        Some((leader, leader_epoch)) => failed.with_current_leader(
            LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(leader_epoch),
        ),
        None => failed,
    }
}

fn read_all(
    broker: &Broker,
    request: &Request,
    body: &FetchRequest,
    (topics, targets): (&[(TopicName, Uuid)], &[Target]),
    rested_until_ms: Option<i64>,
) -> Reading {
    let follower = replica_id(request, body);
    let mut reading = Reading::new(broker, request, (topics, targets), follower >= 0);
    let image = broker.image();
    let any_replica = request.version() >= CLIENT_METADATA_VERSION;
    let consumer = ConsumerFetch {
        isolation_level: body.isolation_level,
        any_replica,
        rack: (any_replica && broker.config.rack_aware_reads).then_some(body.rack_id.as_str()),
        image: &image,
        listener: &request.listener,
    };
    let response_max_bytes = response_max_bytes(broker, request, body, follower >= 0);
    let throttle_exceeded = follower >= 0 && broker.replicas.throttle_exceeded(THROTTLED_AS_LEADER);
    for target in targets {
        let remaining = response_max_bytes.saturating_sub(reading.bytes);
        let max_bytes = (target.request.partition_max_bytes.max(0) as usize).min(remaining);
        // Before the read: an append racing it then shows as a move, never as read.
        let log_end = target
            .partition
            .as_ref()
            .map_or(Offset::UNKNOWN, |p| p.published_log_end_offset());
        let data = target.partition.clone().and_then(|p| match follower >= 0 {
            true => read_for_follower(
                &p,
                &target.request,
                (follower, max_bytes, throttle_exceeded),
                rested_until_ms,
                &mut reading,
            ),
            false => read_partition(
                &p,
                &target.request,
                (max_bytes, reading.bytes == 0),
                &consumer,
            ),
        });
        reading.answer_now |= data.as_ref().is_ok_and(|d| d.preferred_read_replica.0 >= 0);
        let data = data.unwrap_or_else(|error| {
            reading.has_error = true;
            failed_data(request, target, error)
        });
        reading.add(target, data, log_end);
    }
    if follower >= 0 {
        let read = &broker.metrics.replica_fetch_partitions_read;
        read.inc_by(targets.len() as u64);
    }
    let now_ms = broker.replicas.clock().now_ms();
    let quota = &broker.replicas.replication_quotas().leader;
    quota.record(reading.throttled_bytes, now_ms);
    reading
}

/// What a parked fetch waits for: a consumer's, the high watermarks of its partitions; a
/// follower's, a move of any log end offset on this broker.
enum Waiting {
    HighWatermarks(Vec<watch::Receiver<Offset>>),
    LogEnds(watch::Receiver<u64>),
}

impl Waiting {
    fn new(broker: &Broker, targets: &[Target], follower: bool) -> Waiting {
        if follower {
            return Waiting::LogEnds(broker.replicas.subscribe_log_ends());
        }
        let partitions = targets.iter().filter_map(|t| t.partition.as_ref().ok());
        Waiting::HighWatermarks(partitions.map(|p| p.subscribe()).collect())
    }

    /// Forgets the moves seen so far (called before each read).
    fn mark_read(&mut self) {
        match self {
            Waiting::HighWatermarks(receivers) => {
                receivers
                    .iter_mut()
                    .for_each(watch::Receiver::mark_unchanged);
            }
            Waiting::LogEnds(receiver) => receiver.mark_unchanged(),
        }
    }

    /// Waits until something moved (true) or `deadline` passes (false).
    async fn wait(&mut self, deadline: Instant) -> bool {
        match self {
            Waiting::HighWatermarks(receivers) if receivers.is_empty() => {
                tokio::time::sleep_until(deadline).await;
                false
            }
            Waiting::HighWatermarks(receivers) => {
                let changed = select_all(receivers.iter_mut().map(|r| Box::pin(r.changed())));
                tokio::time::timeout_at(deadline, changed).await.is_ok()
            }
            Waiting::LogEnds(receiver) => {
                let changed = tokio::time::timeout_at(deadline, receiver.changed()).await;
                matches!(changed, Ok(Ok(())))
            }
        }
    }
}

/// Reads the targets and, unless that is to be answered at once, parks until something
/// read moved (then reads again) or `max_wait_ms` passes.
async fn read_when_ready(
    broker: &Broker,
    request: &Request,
    body: &FetchRequest,
    (topics, targets): (&[(TopicName, Uuid)], &[Target]),
    (follower, rested_until_ms): (bool, Option<i64>),
) -> Reading {
    let deadline = Instant::now() + Duration::from_millis(body.max_wait_ms.max(0) as u64);
    let mut waiting = Waiting::new(broker, targets, follower);
    loop {
        waiting.mark_read();
        let reading = read_all(broker, request, body, (topics, targets), rested_until_ms);
        broker.propose_isr_changes(&reading.isr_changes);
        let enough = reading.bytes >= body.min_bytes.max(0) as usize;
        let now = enough || reading.has_error || reading.answer_now || targets.is_empty();
        if now || Instant::now() >= deadline {
            return reading;
        }
        // A consumer reads again when woken (by one of its partitions). A follower is
        // woken by any partition here, so reads again only when what it read moved. A wait
        // that ended without news answers what was read before it unless a high watermark
        // moved meanwhile (an idle follower of thousands of partitions read them all twice
        // per fetch).
        loop {
            let woken = waiting.wait(deadline).await;
            waiting.mark_read();
            let moved = match follower {
                true => reading.replication_moved(broker, targets),
                false => woken || reading.high_watermark_moved(targets),
            };
            if moved {
                break;
            }
            if !woken {
                return reading;
            }
        }
    }
}

/// Counts a consumer's fetched bytes against its byte-rate quota; when that throttles it,
/// takes them back (Kafka sends a throttled consumer nothing) and says so.
fn over_quota(broker: &Broker, request: &Request, reading: &Reading) -> bool {
    let image = broker.image();
    let (quotas, client) = (&image.client_quotas, request.quota_client());
    let fetched = reading.bytes as f64;
    let throttle = broker.quotas.fetch.record(quotas, client, fetched);
    if throttle == 0 {
        return false;
    }
    broker.quotas.fetch.unrecord(quotas, client, fetched);
    request.throttle.raise(throttle);
    true
}

/// Waits while this broker's replication version stays at `rest.version` (a follower's
/// session at rest), at most `max_wait_ms`: `Ok` with the time it was last seen unchanged
/// when it stayed so, `Err` with that time once it moved.
async fn rest(broker: &Broker, body: &FetchRequest, rest: Rest) -> Result<i64, i64> {
    let deadline = Instant::now() + Duration::from_millis(body.max_wait_ms.max(0) as u64);
    let mut woken_by = broker.replicas.subscribe_log_ends();
    let clock = broker.replicas.clock();
    let mut seen_ms = rest.seen_ms;
    loop {
        if broker.replicas.replication_version() != rest.version {
            return Err(seen_ms);
        }
        seen_ms = clock.now_ms();
        if Instant::now() >= deadline {
            // Not even a timer for a deadline passed (`max_wait_ms` 0): one costs a tick.
            return Ok(seen_ms);
        }
        let woken = tokio::time::timeout_at(deadline, woken_by.changed()).await;
        if !matches!(woken, Ok(Ok(()))) {
            return match broker.replicas.replication_version() == rest.version {
                true => Ok(clock.now_ms()),
                false => Err(seen_ms),
            };
        }
    }
}

/// The session a Fetch uses, once a session at rest has rested as long as it may: `None`
/// when it stayed at rest (answered without reading).
async fn session_use(
    broker: &Broker,
    body: &FetchRequest,
    session: SessionUse,
) -> Result<Option<SessionUse>, Refusal> {
    let SessionUse::Resting { id, rest: at } = session else {
        return Ok(Some(session));
    };
    match rest(broker, body, at).await {
        Ok(seen_ms) => {
            broker.fetch_sessions.rested(id, seen_ms);
            Ok(None)
        }
        Err(seen_ms) => broker.fetch_sessions.wake(id, seen_ms).map(Some),
    }
}

/// Answers Fetch, parking it until data, an error or the deadline.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: FetchRequest = request.decode()?;
    let begun = broker.fetch_sessions.begin(&body, request.version());
    let session = match begun {
        Ok(session) => session_use(broker, &body, session).await,
        Err(error) => Err(error),
    };
    let session = match session {
        Ok(Some(session)) => session,
        Ok(None) => {
            let response = FetchResponse::default().with_session_id(body.session_id);
            return request.respond(&response);
        }
        Err(error) => {
            tracing::debug!(client = %request.client, api = "Fetch",
                session_id = body.session_id, session_epoch = body.session_epoch,
                %error, "fetch session refused");
            let code = refusal_error(error).code();
            let response = FetchResponse::default().with_error_code(code);
            return request.respond(&response);
        }
    };
    let follower = replica_id(request, &body) >= 0;
    let (topics, targets) = resolve(broker, request, session.topics(&body), follower);
    let waited = (follower, session.rested_until_ms());
    let mut reading = read_when_ready(broker, request, &body, (&topics, &targets), waited).await;
    if !follower && over_quota(broker, request, &reading) {
        let id = session.id_sending_nothing();
        return request.respond(&FetchResponse::default().with_session_id(id));
    }
    for ((name, _), topic) in topics.iter().zip(&reading.topics) {
        let records = topic.partitions.iter().filter_map(|p| p.records.as_ref());
        broker
            .metrics
            .sent(name, records.map(Bytes::len).sum(), follower);
    }
    let rest = reading.at_rest.then(|| Rest {
        version: reading.replication_version,
        seen_ms: broker.replicas.clock().now_ms(),
    });
    let session_id = broker.fetch_sessions.finish(
        session,
        &body,
        &mut reading.topics,
        (request.version(), follower),
        rest,
    );
    let mut response = FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(reading.topics);
    if request.version() >= NODE_ENDPOINTS_VERSION {
        let leaders: Vec<i32> = targets
            .iter()
            .filter_map(|t| t.leader.map(|l| l.0))
            .collect();
        response.node_endpoints =
            node_endpoints!(NodeEndpoint, &broker.image(), &leaders, &request.listener);
    }
    response.throttle_time_ms = i32::try_from(request.throttle.ms()).unwrap_or(i32::MAX);
    let header_version = Response::header_version(request.version());
    let frame = encode_with_sources(request, &response, header_version, reading.sources)?;
    Ok(Outcome::Respond(frame))
}
