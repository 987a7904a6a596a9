//! The broker's counters and histograms, updated where things happen (requests, appends,
//! fetches, ISR changes, flushes) and rendered in Prometheus' text format by the HTTP
//! listener beside the gauges it reads from the broker's state at scrape time.
//!
//! Names are Kafka's JMX metrics as the Prometheus JMX exporter's Kafka rules render them
//! (`lowercaseOutputName`, `PerSec` dropped from counters), so that dashboards and alerts
//! written for Apache Kafka carry over: `kafka.server:type=BrokerTopicMetrics,
//! name=BytesInPerSec,topic=t` is `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

/// Bucket bounds of the latency histograms, in milliseconds.
const LATENCY_BUCKETS_MS: [f64; 14] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 5_000.0,
];

/// Milliseconds (fractional) since `started`, as the latency histograms take them.
pub fn millis_since(started: std::time::Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1_000.0
}

/// Registers instruments in one registry.
struct Register(Registry);

impl Register {
    fn add<C: prometheus::core::Collector + Clone + 'static>(&self, collector: C) -> C {
        self.0
            .register(Box::new(collector.clone()))
            .expect("unique name");
        collector
    }

    fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), labels).expect("valid name"))
    }

    fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.add(IntCounter::new(name, help).expect("valid name"))
    }

    fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help).expect("valid name"))
    }

    fn latency(&self, name: &str, help: &str) -> HistogramOpts {
        HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS_MS.to_vec())
    }
}

/// Traffic per topic (Kafka's BrokerTopicMetrics).
#[derive(Debug)]
pub struct TopicMetrics {
    /// Bytes of record batches appended by producers.
    pub bytes_in: IntCounterVec,
    /// Records appended by producers.
    pub messages_in: IntCounterVec,
    /// Bytes of record batches handed to consumers.
    pub bytes_out: IntCounterVec,
    /// Bytes of record batches handed to follower replicas.
    pub replication_bytes_out: IntCounterVec,
    /// Produce requests refused (any partition error).
    pub failed_produce: IntCounterVec,
}

impl TopicMetrics {
    fn new(r: &Register) -> TopicMetrics {
        let topic = &["topic"];
        let name = |n: &str| format!("kafka_server_brokertopicmetrics_{n}_total");
        let help = |n: &str| format!("BrokerTopicMetrics {n}PerSec, per topic");
        let counters = |n: &str, kafka: &str| r.counters(&name(n), &help(kafka), topic);
        TopicMetrics {
            bytes_in: counters("bytesin", "BytesIn"),
            messages_in: counters("messagesin", "MessagesIn"),
            bytes_out: counters("bytesout", "BytesOut"),
            replication_bytes_out: counters("replicationbytesout", "ReplicationBytesOut"),
            failed_produce: counters("failedproducerequests", "FailedProduceRequests"),
        }
    }
}

/// The instruments of one broker (a process may hold several: the in-process tests).
pub struct Metrics {
    registry: Registry,
    pub topics: TopicMetrics,
    /// Requests answered, per API and version.
    pub requests: IntCounterVec,
    /// Time from a request's frame being read to its answer being written, per API.
    pub request_time_ms: HistogramVec,
    /// Frames read and not yet answered, over every connection.
    pub request_queue_size: IntGauge,
    /// Open client connections.
    pub connections: IntGauge,
    /// Connections accepted since start.
    pub connections_accepted: IntCounter,
    /// ISR shrinks and expands the controller accepted from this broker's leaders.
    pub isr_shrinks: IntCounter,
    pub isr_expands: IntCounter,
    /// Time of one flush of a partition's log to disk.
    pub log_flush_ms: Histogram,
    /// Partitions read to answer followers' fetches (none for a session at rest).
    pub replica_fetch_partitions_read: IntCounter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let r = Register(Registry::new());
        let latency = r.latency(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request read to its answer written, in ms (RequestMetrics TotalTimeMs)",
        );
        let flush = r.latency(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Time of one log flush, in ms (LogFlushStats LogFlushRateAndTimeMs)",
        );
        Metrics {
            topics: TopicMetrics::new(&r),
            requests: r.counters(
                "kafka_network_requestmetrics_requests_total",
                "Requests answered (RequestMetrics RequestsPerSec)",
                &["request", "version"],
            ),
            request_time_ms: r.add(HistogramVec::new(latency, &["request"]).expect("valid")),
            request_queue_size: r.gauge(
                "kafka_network_requestchannel_requestqueuesize",
                "Requests read and not yet answered (RequestChannel RequestQueueSize)",
            ),
            connections: r.gauge(
                "kafka_server_socketservermetrics_connection_count",
                "Open client connections (socket-server-metrics connection-count)",
            ),
            connections_accepted: r.counter(
                "kafka_server_socketservermetrics_connection_creation_total",
                "Client connections accepted (socket-server-metrics connection-creation-total)",
            ),
            isr_shrinks: r.counter(
                "kafka_server_replicamanager_isrshrinks_total",
                "ISR shrinks of partitions led here (ReplicaManager IsrShrinksPerSec)",
            ),
            isr_expands: r.counter(
                "kafka_server_replicamanager_isrexpands_total",
                "ISR expands of partitions led here (ReplicaManager IsrExpandsPerSec)",
            ),
            log_flush_ms: r.add(Histogram::with_opts(flush).expect("valid")),
            replica_fetch_partitions_read: r.counter(
                "highwater_replica_fetch_partitions_read_total",
                "Partitions read to answer follower fetches (an idle follower's fetch session \
                 at rest is answered without reading any)",
            ),
            registry: r.0,
        }
    }

    /// A producer's batch of `records` records (`bytes` long) appended to `topic`.
    pub fn appended(&self, topic: &str, bytes: usize, records: i64) {
        self.topics
            .bytes_in
            .with_label_values(&[topic])
            .inc_by(bytes as u64);
        self.topics
            .messages_in
            .with_label_values(&[topic])
            .inc_by(records.max(0) as u64);
    }

    /// `bytes` of `topic`'s batches sent in a fetch answer, to a follower replica or not.
    pub fn sent(&self, topic: &str, bytes: usize, to_replica: bool) {
        if bytes == 0 {
            return;
        }
        let counter = match to_replica {
            true => &self.topics.replication_bytes_out,
            false => &self.topics.bytes_out,
        };
        counter.with_label_values(&[topic]).inc_by(bytes as u64);
    }

    /// A request answered (or, for acks=0, handled), `read_at` when its frame was read.
    pub fn answered(&self, api: &str, version: i16, read_at: std::time::Instant) {
        let version = version.to_string();
        self.requests.with_label_values(&[api, &version]).inc();
        self.request_time_ms
            .with_label_values(&[api])
            .observe(millis_since(read_at));
    }

    /// A produce to `topic` refused.
    pub fn produce_failed(&self, topic: &str) {
        self.topics.failed_produce.with_label_values(&[topic]).inc();
    }

    /// Every instrument, in Prometheus' text format.
    pub fn render(&self) -> String {
        let families = self.registry.gather();
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_default()
    }
}
