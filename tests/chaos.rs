//! Issue #5's multi-process fault test: three combined nodes, a topic with one partition,
//! three replicas and `min.insync.replicas=2`, an idempotent acks=all producer writing a
//! counter and a read_uncommitted consumer, while the test strikes a random broker every
//! few seconds (half the faults aim at the partition's leader; at most one broker is down
//! at a time) with kill -9 and a restart, or SIGSTOP beyond the broker session and SIGCONT
//! (issue 11, item 8: a deposed leader that resumes must not acknowledge). Then everything heals, and the test asserts that:
//! 1. every acknowledged record is in the log exactly once, in order, at the offset it was
//!    acknowledged at;
//! 2. the three replicas' logs hold the same batches, byte for byte and segment by segment,
//!    up to the high watermark (read from each node's `.log` files);
//! 3. no fetch returned an offset at or above the high watermark of its own response, and
//!    everything consumed is still in the final log at the same offset and was acknowledged.
//!
//! `HIGHWATER_CHAOS_SECS` sets how long the faults go on (default 120),
//! `HIGHWATER_CHAOS_FAULTS` which ones (`kill,pause`, the default, or either alone),
//! `HIGHWATER_CHAOS_SEED=<seed>` replays the same fault choices (their timing against the
//! clients still varies; `make chaos` sets all three), `HIGHWATER_CLUSTER_LOG=1` shows the nodes' logs; otherwise a failing
//! run keeps them, with the data, in the directory it prints.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster_processes::*;
use common::counter_log::{check_log, SentBatch};
use common::seeded_rng::{seed_from_env, Rng};
use common::*;
use highwater::log::batch::{self, BatchIter};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{ApiVersionsRequest, CreateTopicsRequest, InitProducerIdRequest};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "chaos";
/// How long the kills go on unless `HIGHWATER_CHAOS_SECS` says otherwise.
const CHAOS_SECS_DEFAULT: u64 = 120;
/// How long all three brokers run between kills: a uniform draw in this range.
const UP_MS_MIN: u64 = 1500;
const UP_MS_MAX: u64 = 4000;
/// How long a killed broker stays down before its restart.
const DOWN_MS_MIN: u64 = 200;
const DOWN_MS_MAX: u64 = 3000;
/// How long a paused broker stays stopped: past its session (`SESSION_MS`), so that the
/// controller fences it and moves its leaderships while it cannot tell.
const PAUSE_MS_MIN: u64 = SESSION_MS + 500;
const PAUSE_MS_MAX: u64 = SESSION_MS + 2500;
/// Records per produced batch: 1 to this many.
const RECORDS_PER_BATCH_MAX: u64 = 5;
/// A pause between acknowledged batches, so that the log stays small.
const PRODUCE_PAUSE: Duration = Duration::from_millis(2);
/// The pause before a retry (after an error or a lost connection).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How long one batch may take to be acknowledged, retries included, before the test fails.
const BATCH_ACK_WINDOW: Duration = Duration::from_secs(60);
/// How long a kill waits for a produce request to be in flight.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(100);
/// Once a request is in flight, the kill waits up to this many microseconds.
const KILL_DELAY_US_MAX: u64 = 400;
/// How long a consumer fetch waits at the leader for new records.
const CONSUMER_WAIT_MS: i32 = 300;
/// How long the cluster may take to heal (every replica back in the ISR, consumer and
/// followers caught up) once the kills end.
const HEAL_WAIT: Duration = Duration::from_secs(60);
/// Small segments, so that the run rolls several and the comparison covers sealed ones.
const SEGMENT_BYTES: u64 = 256 * 1024;
/// A follower out of contact this long leaves the ISR (Kafka's default is 30 s; a fenced
/// broker leaves it sooner, after the session).
const REPLICA_LAG_MS: u64 = 5000;

/// Produce errors after which the same batch is sent again to the (maybe new) leader.
const RETRIABLE: [ResponseError; 8] = [
    ResponseError::NotLeaderOrFollower,
    ResponseError::LeaderNotAvailable,
    ResponseError::NotEnoughReplicas,
    ResponseError::NotEnoughReplicasAfterAppend,
    ResponseError::RequestTimedOut,
    ResponseError::UnknownTopicOrPartition,
    ResponseError::FencedLeaderEpoch,
    ResponseError::KafkaStorageError,
];

/// The partition as one node's metadata describes it.
#[derive(Debug, Clone)]
struct PartitionView {
    leader: i32,
    isr: Vec<i32>,
    leader_addr: Option<SocketAddr>,
}

/// The partition in the Metadata of the node at `addr`.
async fn partition_view(addr: SocketAddr) -> Option<PartitionView> {
    let metadata = metadata(addr).await?;
    let topic = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
    let partition = topic.partitions.iter().find(|p| p.partition_index == 0)?;
    let leader = partition.leader_id.0;
    let leader_addr = metadata
        .brokers
        .iter()
        .find(|b| b.node_id.0 == leader)
        .and_then(|b| format!("{}:{}", b.host, b.port).parse().ok());
    Some(PartitionView {
        leader,
        isr: partition.isr_nodes.iter().map(|b| b.0).collect(),
        leader_addr,
    })
}

/// A connection to the partition's leader, found through the Metadata of any node that
/// answers, and dropped after any failure so that the next use looks again.
struct LeaderConnection {
    nodes: Vec<SocketAddr>,
    probe: usize,
    leader: Option<(i32, Client)>,
}

impl LeaderConnection {
    fn new(nodes: Vec<SocketAddr>) -> Self {
        LeaderConnection {
            nodes,
            probe: 0,
            leader: None,
        }
    }

    /// The leader's id and a client connected to it, or `None` when no node names a
    /// reachable leader right now.
    async fn get(&mut self) -> Option<&mut (i32, Client)> {
        if self.leader.is_none() {
            for _ in 0..self.nodes.len() {
                let addr = self.nodes[self.probe % self.nodes.len()];
                self.probe += 1;
                let Some(view) = partition_view(addr).await else {
                    continue;
                };
                let Some(leader_addr) = view.leader_addr else {
                    continue;
                };
                if let Some(client) = Client::try_connect(leader_addr).await {
                    self.leader = Some((view.leader, client));
                    break;
                }
            }
        }
        self.leader.as_mut()
    }

    fn reset(&mut self) {
        self.leader = None;
    }
}

/// What the producer did.
#[derive(Debug, Default)]
struct ProducerReport {
    batches: Vec<SentBatch>,
    /// Retries by cause (an error name, or "connection").
    retries: BTreeMap<String, usize>,
    /// Why the producer stopped early, if it did: the test fails with it.
    failure: Option<String>,
}

/// The records of one idempotent batch: values are the counters in decimal, sequences
/// equal the counters.
fn idempotent_batch(producer_id: i64, producer_epoch: i16, first: u64, count: u64) -> Bytes {
    let values: Vec<String> = (first..first + count).map(|c| c.to_string()).collect();
    let producer = (producer_id, producer_epoch, first as i32);
    batch_of_values_from(&values, Some(producer), now_ms())
}

/// A producer id and epoch from any node (InitProducerId v4, no transactional id).
async fn init_producer_id(nodes: &[SocketAddr]) -> Option<(i64, i16)> {
    let deadline = Instant::now() + WAIT;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    for addr in nodes.iter().cycle() {
        if Instant::now() > deadline {
            return None;
        }
        let Some(mut client) = Client::try_connect(*addr).await else {
            continue;
        };
        if let Some(response) = client.try_call(&request, 4).await {
            if response.error_code == 0 {
                return Some((response.producer_id.0, response.producer_epoch));
            }
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
    None
}

/// Sends `records` to the leader until it is acknowledged, resending the same bytes (same
/// sequence) after retriable errors and lost connections; returns the acknowledged offset.
async fn send_until_acked(
    leader: &mut LeaderConnection,
    records: &Bytes,
    retries: &mut BTreeMap<String, usize>,
    in_flight: &AtomicBool,
) -> Result<i64, String> {
    let deadline = Instant::now() + BATCH_ACK_WINDOW;
    let request = produce_request(TOPIC, 0, records.clone(), -1);
    loop {
        if Instant::now() > deadline {
            return Err(format!("not acknowledged within {BATCH_ACK_WINDOW:?}"));
        }
        let response = match leader.get().await {
            Some((_, client)) => {
                in_flight.store(true, Ordering::SeqCst);
                let response = client.try_call(&request, 9).await;
                in_flight.store(false, Ordering::SeqCst);
                response
            }
            None => None,
        };
        let Some(response) = response else {
            *retries.entry("connection".into()).or_default() += 1;
            leader.reset();
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        };
        let partition = &response.responses[0].partition_responses[0];
        if partition.error_code == 0 {
            return Ok(partition.base_offset);
        }
        let error = ResponseError::try_from_code(partition.error_code);
        match error.filter(|e| RETRIABLE.contains(e)) {
            Some(error) => *retries.entry(format!("{error:?}")).or_default() += 1,
            None => return Err(format!("produce failed: {error:?} ({partition:?})")),
        }
        leader.reset();
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
}

/// Produces batches of counters until `stop`, finishing the batch in flight first;
/// `in_flight` is set while a request awaits its response, so that kills can aim at it.
async fn produce(
    nodes: Vec<SocketAddr>,
    mut rng: Rng,
    stop: Arc<AtomicBool>,
    in_flight: Arc<AtomicBool>,
) -> ProducerReport {
    let mut report = ProducerReport::default();
    let Some((producer_id, producer_epoch)) = init_producer_id(&nodes).await else {
        report.failure = Some("no producer id".into());
        return report;
    };
    let mut leader = LeaderConnection::new(nodes);
    let mut next = 0;
    while !stop.load(Ordering::SeqCst) {
        let count = rng.between(1, RECORDS_PER_BATCH_MAX);
        let records = idempotent_batch(producer_id, producer_epoch, next, count);
        let mut batch = SentBatch {
            first: next,
            count,
            acked_at: None,
        };
        next += count;
        let acked = send_until_acked(&mut leader, &records, &mut report.retries, &in_flight);
        let acked = acked.await;
        match acked {
            Ok(offset) => batch.acked_at = Some(offset),
            Err(failure) => {
                report.failure = Some(format!("counters {}..{next}: {failure}", batch.first));
                report.batches.push(batch);
                return report;
            }
        }
        report.batches.push(batch);
        tokio::time::sleep(PRODUCE_PAUSE).await;
    }
    report
}

/// One record a consumer fetch returned, with the high watermark of that response.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Consumed {
    offset: i64,
    value: String,
    high_watermark: i64,
    leader: i32,
}

/// What the consumer saw.
#[derive(Debug, Default)]
struct ConsumerReport {
    fetches: usize,
    /// Every record returned at or after the consumer's position, in order.
    consumed: Vec<Consumed>,
    /// Records returned at or above their response's high watermark, gaps, refusals that
    /// must not happen: the test fails with them.
    violations: Vec<String>,
    errors: BTreeMap<String, usize>,
}

/// Checks one fetch response's records against its high watermark and the position,
/// and adds the new ones to `report`; returns the next position.
fn take_fetched(
    report: &mut ConsumerReport,
    leader: i32,
    position: i64,
    high_watermark: i64,
    records: &[(i64, String, String)],
) -> i64 {
    let mut next = position;
    for (offset, _, value) in records {
        if *offset >= high_watermark {
            report.violations.push(format!(
                "fetch from broker {leader} at {position} returned offset {offset} ({value:?}) \
                 at or above its high watermark {high_watermark}"
            ));
        }
        if *offset < next {
            continue;
        }
        if *offset != next {
            report.violations.push(format!(
                "fetch from broker {leader} at {next} skipped to offset {offset}"
            ));
        }
        report.consumed.push(Consumed {
            offset: *offset,
            value: value.clone(),
            high_watermark,
            leader,
        });
        next = offset + 1;
    }
    next
}

/// Fetches (read_uncommitted) from the leader until `stop`, publishing its position.
async fn consume(
    nodes: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    position: Arc<AtomicI64>,
) -> ConsumerReport {
    let mut report = ConsumerReport::default();
    let mut leader = LeaderConnection::new(nodes);
    let mut next = 0;
    while !stop.load(Ordering::SeqCst) {
        let request = fetch_request(TOPIC, 0, next, CONSUMER_WAIT_MS, 1);
        let (id, response) = match leader.get().await {
            Some((id, client)) => (*id, client.try_call(&request, 12).await),
            None => (-1, None),
        };
        let Some(response) = response else {
            *report.errors.entry("connection".into()).or_default() += 1;
            leader.reset();
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        };
        report.fetches += 1;
        let data = &response.responses[0].partitions[0];
        if data.error_code != 0 {
            let error = ResponseError::try_from_code(data.error_code);
            if error == Some(ResponseError::OffsetOutOfRange) {
                report.violations.push(format!(
                    "broker {id} refused position {next} (consumed below an earlier high \
                     watermark) as out of range: {data:?}"
                ));
            }
            *report.errors.entry(format!("{error:?}")).or_default() += 1;
            leader.reset();
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        }
        let fetched = records(data.records.as_ref().unwrap_or(&Bytes::new()));
        next = take_fetched(&mut report, id, next, data.high_watermark, &fetched);
        position.store(next, Ordering::SeqCst);
    }
    report
}

/// Checks what the consumer saw against the final log and the acknowledged counters.
fn check_consumed(
    consumed: &[Consumed],
    log: &[(i64, String, String)],
    sent: &[SentBatch],
) -> Result<(), String> {
    let acked: HashSet<u64> = sent
        .iter()
        .filter(|b| b.acked_at.is_some())
        .flat_map(|b| b.first..b.first + b.count)
        .collect();
    for record in consumed {
        let stored = usize::try_from(record.offset).ok().and_then(|i| log.get(i));
        if stored.is_none_or(|(_, _, value)| *value != record.value) {
            return Err(format!(
                "consumed {record:?}, but the final log holds {stored:?} there"
            ));
        }
        let counter = record.value.parse::<u64>().ok();
        if counter.is_none_or(|c| !acked.contains(&c)) {
            return Err(format!("consumed {record:?}, which was never acknowledged"));
        }
    }
    Ok(())
}

/// One replica's log below a high watermark, read from its `.log` files: each whole batch
/// (base offset, last offset, bytes) and each segment's (base offset, batch count,
/// CRC32C of those batches).
#[derive(Debug, Default, PartialEq, Eq)]
struct ReplicaLog {
    batches: Vec<(i64, i64, Bytes)>,
    segments: Vec<(i64, usize, u32)>,
}

impl ReplicaLog {
    /// The offset after its last batch (0 when empty).
    fn end(&self) -> i64 {
        self.batches.last().map_or(0, |b| b.1 + 1)
    }

    /// Where `other` first differs from this log, if it does.
    fn first_difference(&self, other: &ReplicaLog) -> Option<String> {
        let pairs = self.batches.iter().zip(&other.batches);
        for (n, (mine, theirs)) in pairs.enumerate() {
            if mine != theirs {
                return Some(format!(
                    "batch {n} differs: offsets {}..={} ({} bytes) against {}..={} ({} bytes)",
                    mine.0,
                    mine.1,
                    mine.2.len(),
                    theirs.0,
                    theirs.1,
                    theirs.2.len()
                ));
            }
        }
        if self.batches.len() != other.batches.len() {
            return Some(format!(
                "{} batches ending at {} against {} ending at {}",
                self.batches.len(),
                self.end(),
                other.batches.len(),
                other.end()
            ));
        }
        (self.segments != other.segments).then(|| {
            format!(
                "same batches, other segments: {:?} against {:?}",
                self.segments, other.segments
            )
        })
    }
}

/// Reads the whole, valid batches below `high_watermark` of the partition in `dir`.
fn read_replica(dir: &Path, high_watermark: i64) -> Result<ReplicaLog, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    let mut replica = ReplicaLog::default();
    for file in files {
        let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let base: i64 = file
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{}: not a segment name", file.display()))?;
        let mut crc = 0u32;
        let mut count = 0;
        for (position, header) in BatchIter::new(&bytes) {
            if header.last_offset() >= high_watermark {
                break;
            }
            let whole = &bytes[position..position + header.size];
            batch::validate(whole)
                .map_err(|e| format!("{} at byte {position}: {e}", file.display()))?;
            crc = crc32c::crc32c_append(crc, whole);
            count += 1;
            let whole = Bytes::copy_from_slice(whole);
            replica
                .batches
                .push((header.base_offset, header.last_offset(), whole));
        }
        if count > 0 {
            replica.segments.push((base, count, crc));
        }
    }
    Ok(replica)
}

/// What the kills did.
#[derive(Debug, Default)]
struct ChaosReport {
    /// (seconds since the start, node, whether it led the partition, the fault).
    kills: Vec<(f64, usize, bool, Fault)>,
    /// How many kills came while a produce request was in flight.
    aimed: usize,
}

/// The leader of the partition according to any node that answers.
async fn current_view(nodes: &[SocketAddr]) -> Option<PartitionView> {
    for addr in nodes {
        if let Some(view) = partition_view(*addr).await {
            return Some(view);
        }
    }
    None
}

/// Waits until `node` answers requests again (it opens its listener once unfenced).
async fn wait_answering(addr: SocketAddr, node: usize, seed: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(mut client) = Client::try_connect(addr).await {
            let request = ApiVersionsRequest::default();
            if client.try_call(&request, 0).await.is_some() {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {node} did not come back within {WAIT:?} (seed {seed})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (briefly) until a produce request is on its way or being served, then a random
/// few hundred microseconds, so that a kill lands before, during or after the leader's
/// append and its replication; returns whether one was in flight.
async fn aim_at_request_in_flight(in_flight: &AtomicBool, delay_us: u64) -> bool {
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    while !in_flight.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    let aimed = in_flight.load(Ordering::SeqCst);
    // A blocking pause: the clients only await responses, the brokers are other processes.
    std::thread::sleep(Duration::from_micros(delay_us));
    aimed
}

/// What strikes a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// kill -9, then a restart.
    Kill,
    /// SIGSTOP past the broker session, then SIGCONT.
    Pause,
}

/// The faults of `HIGHWATER_CHAOS_FAULTS` (`kill,pause` by default).
fn chaos_faults() -> Vec<Fault> {
    let wanted = std::env::var("HIGHWATER_CHAOS_FAULTS").unwrap_or_else(|_| "kill,pause".into());
    wanted
        .split(',')
        .map(|f| match f.trim() {
            "kill" => Fault::Kill,
            "pause" => Fault::Pause,
            other => panic!("HIGHWATER_CHAOS_FAULTS: unknown fault {other:?} (kill, pause)"),
        })
        .collect()
}

/// Strikes one broker after another until `duration` has passed (at least once), with a
/// fault of `faults`: half aim at the leader, the others at any broker, each while a
/// produce request is in flight if one comes soon.
async fn run_chaos(
    cluster: &mut Cluster,
    rng: &mut Rng,
    (duration, seed): (Duration, u64),
    in_flight: &AtomicBool,
) -> ChaosReport {
    let nodes: Vec<SocketAddr> = (1..=3).map(|n| cluster.addr(n)).collect();
    let faults = chaos_faults();
    let started = Instant::now();
    let mut report = ChaosReport::default();
    loop {
        let up = Duration::from_millis(rng.between(UP_MS_MIN, UP_MS_MAX));
        let fault = faults[rng.between(0, faults.len() as u64 - 1) as usize];
        let down = match fault {
            Fault::Kill => rng.between(DOWN_MS_MIN, DOWN_MS_MAX),
            Fault::Pause => rng.between(PAUSE_MS_MIN, PAUSE_MS_MAX),
        };
        let down = Duration::from_millis(down);
        let aim_at_leader = rng.next().is_multiple_of(2);
        let any = rng.between(1, 3) as usize;
        let delay_us = rng.between(0, KILL_DELAY_US_MAX);
        tokio::time::sleep(up).await;
        let leader = current_view(&nodes).await.map_or(-1, |v| v.leader);
        let victim = match (aim_at_leader, usize::try_from(leader)) {
            (true, Ok(leader @ 1..=3)) => leader,
            _ => any,
        };
        report.aimed += usize::from(aim_at_request_in_flight(in_flight, delay_us).await);
        match fault {
            Fault::Kill => cluster.kill(victim),
            Fault::Pause => cluster.signal(victim, "-STOP"),
        }
        let at = started.elapsed().as_secs_f64();
        report
            .kills
            .push((at, victim, victim as i32 == leader, fault));
        tokio::time::sleep(down).await;
        match fault {
            Fault::Kill => cluster.spawn(victim),
            Fault::Pause => cluster.signal(victim, "-CONT"),
        }
        wait_answering(nodes[victim - 1], victim, seed).await;
        if started.elapsed() >= duration {
            return report;
        }
    }
}

/// Polls `probe` every 100 ms until it returns `Ok`, or returns its last error after
/// `wait`.
async fn within<T, F, Fut>(wait: Duration, mut probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + wait;
    loop {
        let last = probe().await;
        if last.is_ok() || Instant::now() > deadline {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The partition once its ISR holds all three brokers.
async fn healed(nodes: &[SocketAddr]) -> Result<PartitionView, String> {
    let view = current_view(nodes).await.ok_or("no node answers")?;
    let mut isr = view.isr.clone();
    isr.sort_unstable();
    match isr == [1, 2, 3] && view.leader_addr.is_some() {
        true => Ok(view),
        false => Err(format!("not healed: {view:?}")),
    }
}

/// Every replica's log below `high_watermark`, once all three equal the leader's.
fn identical_replicas(
    cluster: &Cluster,
    leader: usize,
    high_watermark: i64,
) -> Result<ReplicaLog, String> {
    let dir = |node: usize| cluster.data_dir(node).join(format!("{TOPIC}-0"));
    let reference = read_replica(&dir(leader), high_watermark)?;
    if reference.end() != high_watermark {
        return Err(format!(
            "the leader's files end at {} below the high watermark {high_watermark}",
            reference.end()
        ));
    }
    for node in (1..=3).filter(|n| *n != leader) {
        let replica = read_replica(&dir(node), high_watermark)?;
        if let Some(difference) = reference.first_difference(&replica) {
            return Err(format!("node {node} against leader {leader}: {difference}"));
        }
    }
    Ok(reference)
}

/// Creates the topic (one partition, three replicas, `min.insync.replicas=2`) and waits
/// until its ISR holds all three brokers.
async fn create_chaos_topic(cluster: &Cluster) {
    eventually("three brokers registered", || async {
        metadata(cluster.addr(1))
            .await
            .filter(|m| m.brokers.len() == 3)
    })
    .await;
    let mut client = Client::connect(cluster.addr(1)).await;
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(TOPIC))
            .with_num_partitions(1)
            .with_replication_factor(3)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str("2")))])])
        .with_timeout_ms(15_000);
    let created = client.call(&request, 7).await;
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let nodes: Vec<SocketAddr> = (1..=3).map(|n| cluster.addr(n)).collect();
    within(WAIT, || healed(&nodes))
        .await
        .expect("the new topic's ISR holds all three brokers");
}

fn chaos_duration() -> Duration {
    let secs = match std::env::var("HIGHWATER_CHAOS_SECS") {
        Ok(secs) => secs
            .parse()
            .expect("HIGHWATER_CHAOS_SECS is a number of seconds"),
        Err(_) => CHAOS_SECS_DEFAULT,
    };
    Duration::from_secs(secs)
}

fn summary(
    chaos: &ChaosReport,
    producer: &ProducerReport,
    consumer: &ConsumerReport,
    high_watermark: i64,
) -> String {
    let leader_kills = chaos.kills.iter().filter(|k| k.2).count();
    let pauses = chaos.kills.iter().filter(|k| k.3 == Fault::Pause).count();
    let acked = producer.batches.iter().filter(|b| b.acked_at.is_some());
    let kills: Vec<String> = chaos
        .kills
        .iter()
        .map(|(at, node, led, fault)| {
            let kind = if *fault == Fault::Pause { "P" } else { "" };
            format!("{at:.1}s:{node}{}{kind}", if *led { "L" } else { "" })
        })
        .collect();
    format!(
        "{} faults ({pauses} pauses, {leader_kills} of the leader, {} during a produce): {}\nproducer: {} batches acknowledged of {}, \
         {} records; retries {:?}\nconsumer: {} fetches, {} records; errors {:?}\nfinal high \
         watermark {high_watermark}",
        chaos.kills.len(),
        chaos.aimed,
        kills.join(" "),
        acked.count(),
        producer.batches.len(),
        producer.batches.iter().map(|b| b.count).sum::<u64>(),
        producer.retries,
        consumer.fetches,
        consumer.consumed.len(),
        consumer.errors,
    )
}

/// How many lines of the nodes' logs contain `needle` (none with HIGHWATER_CLUSTER_LOG,
/// when the logs go to the test's stderr).
fn node_log_lines(cluster: &Cluster, needle: &str) -> usize {
    (1..=3)
        .filter_map(|n| {
            std::fs::read_to_string(cluster.dir.path().join(format!("node-{n}.log"))).ok()
        })
        .map(|log| log.lines().filter(|l| l.contains(needle)).count())
        .sum()
}

/// The producer and consumer tasks and what stops them.
struct Clients {
    stop_producer: Arc<AtomicBool>,
    in_flight: Arc<AtomicBool>,
    stop_consumer: Arc<AtomicBool>,
    position: Arc<AtomicI64>,
    producer: tokio::task::JoinHandle<ProducerReport>,
    consumer: tokio::task::JoinHandle<ConsumerReport>,
}

impl Clients {
    fn start(nodes: &[SocketAddr], rng: &mut Rng) -> Clients {
        let stop_producer = Arc::new(AtomicBool::new(false));
        let stop_consumer = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicBool::new(false));
        let position = Arc::new(AtomicI64::new(0));
        let producer = tokio::spawn(produce(
            nodes.to_vec(),
            Rng(rng.next()),
            Arc::clone(&stop_producer),
            Arc::clone(&in_flight),
        ));
        let consumer = tokio::spawn(consume(
            nodes.to_vec(),
            Arc::clone(&stop_consumer),
            Arc::clone(&position),
        ));
        Clients {
            stop_producer,
            in_flight,
            stop_consumer,
            position,
            producer,
            consumer,
        }
    }

    /// Stops the producer (after its batch in flight), reads the final log from the
    /// leader, lets the consumer reach its end and stops it.
    async fn finish(self, nodes: &[SocketAddr]) -> (ProducerReport, ConsumerReport, Vec<Log>) {
        self.stop_producer.store(true, Ordering::SeqCst);
        let producer = self.producer.await.expect("producer task");
        let log = within(HEAL_WAIT, || final_log(nodes.to_vec())).await;
        let log = log.unwrap_or_else(|e| panic!("the final log cannot be read: {e}"));
        let end = log.len() as i64;
        let position = Arc::clone(&self.position);
        let caught_up = within(HEAL_WAIT, || async {
            let at = position.load(Ordering::SeqCst);
            (at >= end)
                .then_some(())
                .ok_or(format!("consumer at {at} of {end}"))
        });
        let caught_up = caught_up.await;
        self.stop_consumer.store(true, Ordering::SeqCst);
        let mut consumer = self.consumer.await.expect("consumer task");
        if let Err(lag) = caught_up {
            consumer.violations.push(lag);
        }
        (producer, consumer, log)
    }
}

/// The whole partition, read from its leader up to the high watermark.
async fn final_log(nodes: Vec<SocketAddr>) -> Result<Vec<Log>, String> {
    let mut leader = LeaderConnection::new(nodes);
    let mut log: Vec<Log> = Vec::new();
    loop {
        let next = log.last().map_or(0, |r| r.0 + 1);
        let request = fetch_request(TOPIC, 0, next, 0, 1);
        let (_, client) = leader.get().await.ok_or("no leader")?;
        let response = client.try_call(&request, 12).await.ok_or("no answer")?;
        let data = &response.responses[0].partitions[0];
        if data.error_code != 0 {
            return Err(format!("fetch at {next}: error {}", data.error_code));
        }
        let fetched = records(data.records.as_ref().unwrap_or(&Bytes::new()));
        let fresh: Vec<Log> = fetched.into_iter().filter(|r| r.0 >= next).collect();
        if fresh.is_empty() && next == data.high_watermark {
            return Ok(log);
        }
        if fresh.is_empty() {
            return Err(format!("nothing at {next} below {}", data.high_watermark));
        }
        log.extend(fresh);
    }
}

/// A record of the final log: (offset, key, value).
type Log = (i64, String, String);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_survive_random_kills_and_pauses_and_replicas_converge() {
    // Goal: issue #5's acceptance under real crashes: with acks=all, min.insync.replicas=2
    // and an idempotent producer, kill -9 or a pause past the session of any broker (the
    // leader included) loses no
    // acknowledged record, duplicates none, shows consumers nothing above the high
    // watermark, and the replicas end byte-identical. Method: 3 real processes, seeded
    // kills and restarts for HIGHWATER_CHAOS_SECS, raw-protocol producer and consumer,
    // checks on the final log, the consumer's observations and every node's files.
    let seed = seed_from_env("HIGHWATER_CHAOS_SEED");
    let duration = chaos_duration();
    println!("chaos seed {seed} (replay: HIGHWATER_CHAOS_SEED={seed}), {duration:?} of faults");
    let mut rng = Rng(seed);
    let mut cluster = Cluster::start_with(&[
        &format!("replica.lag.time.max.ms={REPLICA_LAG_MS}"),
        &format!("log.segment.bytes={SEGMENT_BYTES}"),
    ]);
    let nodes: Vec<SocketAddr> = (1..=3).map(|n| cluster.addr(n)).collect();
    create_chaos_topic(&cluster).await;
    let started = Instant::now();
    let clients = Clients::start(&nodes, &mut rng);
    let chaos = run_chaos(&mut cluster, &mut rng, (duration, seed), &clients.in_flight);
    let chaos = chaos.await;
    let view = within(HEAL_WAIT, || healed(&nodes)).await;
    let view = view.unwrap_or_else(|e| panic!("no full ISR after the kills (seed {seed}): {e}"));
    let (producer, consumer, log) = clients.finish(&nodes).await;
    let high_watermark = log.len() as i64;
    let report = summary(&chaos, &producer, &consumer, high_watermark);
    println!(
        "{report}\nnodes' logs: {} truncations as follower, {} leader elections; ran {:.1}s",
        node_log_lines(&cluster, "truncated as follower"),
        node_log_lines(&cluster, "became leader"),
        started.elapsed().as_secs_f64()
    );
    let context = format!("seed {seed}; {report}");
    assert_eq!(producer.failure, None, "{context}");
    let unacked_stored = check_log(&producer.batches, &log);
    unacked_stored.unwrap_or_else(|e| panic!("final log: {e}; {context}"));
    assert!(
        consumer.violations.is_empty(),
        "consumer: {:#?}; {context}",
        consumer.violations
    );
    check_consumed(&consumer.consumed, &log, &producer.batches)
        .unwrap_or_else(|e| panic!("{e}; {context}"));
    let leader = view.leader as usize;
    let replicas = within(HEAL_WAIT, || async {
        identical_replicas(&cluster, leader, high_watermark)
    });
    let replicas = replicas
        .await
        .unwrap_or_else(|e| panic!("replicas differ: {e}; {context}"));
    println!("replicas identical: {:?}", replicas.segments);
    let acked = producer.batches.iter().filter(|b| b.acked_at.is_some());
    assert!(acked.count() > chaos.kills.len(), "progress; {context}");
    assert!(
        !consumer.consumed.is_empty(),
        "the consumer read; {context}"
    );
}

#[test]
fn the_checks_catch_lost_duplicated_uncommitted_phantom_and_diverging_records() {
    // Goal: each check of the chaos test can fail. Method: hand-made histories against
    // one sent history.
    let sent = [
        SentBatch {
            first: 0,
            count: 2,
            acked_at: Some(0),
        },
        SentBatch {
            first: 2,
            count: 1,
            acked_at: Some(2),
        },
    ];
    let log = |counters: &[u64]| -> Vec<Log> {
        let entries = counters.iter().enumerate();
        entries
            .map(|(o, c)| (o as i64, String::new(), c.to_string()))
            .collect()
    };
    assert_eq!(check_log(&sent, &log(&[0, 1, 2])), Ok(0));
    for bad in [
        log(&[0, 1]),
        log(&[0, 1, 1, 2]),
        log(&[1, 0, 2]),
        log(&[0, 1, 2, 3]),
    ] {
        assert!(check_log(&sent, &bad).is_err(), "{bad:?} must fail");
    }

    let mut report = ConsumerReport::default();
    let fetched = log(&[0, 1, 2]);
    assert_eq!(take_fetched(&mut report, 1, 0, 3, &fetched), 3);
    assert!(report.violations.is_empty());
    assert_eq!(check_consumed(&report.consumed, &fetched, &sent), Ok(()));
    assert_eq!(take_fetched(&mut report, 1, 3, 2, &log(&[0, 1, 2])), 3);
    assert_eq!(report.violations.len(), 1, "offset 2 at high watermark 2");
    let phantom = check_consumed(&report.consumed, &log(&[0, 1, 5]), &sent);
    assert!(phantom.is_err(), "offset 2 consumed as 2, later holds 5");
    let unacked = check_consumed(&report.consumed, &fetched, &sent[..1]);
    assert!(
        unacked.is_err(),
        "counter 2 consumed but never acknowledged"
    );

    let replica = |batches: &[(i64, i64, &'static [u8])]| ReplicaLog {
        batches: batches
            .iter()
            .map(|(b, l, bytes)| (*b, *l, Bytes::from_static(bytes)))
            .collect(),
        segments: vec![(0, batches.len(), 0)],
    };
    let leader = replica(&[(0, 1, b"ab"), (2, 2, b"c")]);
    assert_eq!(
        leader.first_difference(&replica(&[(0, 1, b"ab"), (2, 2, b"c")])),
        None
    );
    assert!(leader
        .first_difference(&replica(&[(0, 1, b"ab"), (2, 2, b"x")]))
        .is_some());
    assert!(leader
        .first_difference(&replica(&[(0, 1, b"ab")]))
        .is_some());
}
