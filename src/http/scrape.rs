//! `/metrics`: the broker's counters and histograms ([`crate::metrics`]) followed by the
//! gauges read from its state at scrape time — partition counts, per-partition offsets and
//! replication, the quorum, consumer group lag. Names follow Kafka's JMX metrics as the
//! Prometheus JMX exporter renders them (`kafka.log:type=Log,name=LogEndOffset,topic=t,
//! partition=0` is `kafka_log_log_logendoffset{topic="t",partition="0"}`); the few Kafka
//! has no MBean for are named in the same families (`kafka_cluster_partition_highwatermark`)
//! or as kafka_exporter names them (`kafka_consumergroup_lag`).

use std::collections::HashMap;

use prometheus::{IntGauge, IntGaugeVec, Opts, Registry};

use crate::api::Broker;
use crate::config::topic;
use crate::replica::{Partition, Role};

/// The gauges of one scrape.
struct Gauges(Registry);

impl Gauges {
    fn vec(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        let gauge = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid name");
        self.0.register(Box::new(gauge.clone())).expect("unique");
        gauge
    }

    fn one(&self, name: &str, help: &str, value: i64) {
        let gauge = IntGauge::new(name, help).expect("valid name");
        gauge.set(value);
        self.0.register(Box::new(gauge)).expect("unique");
    }

    fn render(&self) -> String {
        let families = self.0.gather();
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_default()
    }
}

/// The whole `/metrics` text.
pub fn render(broker: &Broker) -> String {
    let gauges = Gauges(Registry::new());
    let hosted = broker.replicas.hosted();
    partitions(broker, &gauges, &hosted);
    controller(broker, &gauges);
    groups(broker, &gauges, &hosted);
    fetch_sessions(broker, &gauges);
    let mut text = broker.metrics.render();
    text.push_str(&gauges.render());
    text
}

/// The incremental fetch sessions kept (FetchSessionCache).
fn fetch_sessions(broker: &Broker, gauges: &Gauges) {
    let (sessions, partitions) = broker.fetch_sessions.counts();
    gauges.one(
        "kafka_server_fetchsessioncache_numincrementalfetchsessions",
        "Incremental fetch sessions kept (FetchSessionCache)",
        sessions as i64,
    );
    gauges.one(
        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
        "Partitions held by the incremental fetch sessions (FetchSessionCache)",
        partitions as i64,
    );
}

/// What the leader of a partition knows: replicas, in-sync replicas, and each follower's
/// log end offset from its last fetch.
type Led = (
    usize,
    usize,
    Vec<(crate::ids::BrokerId, crate::ids::Offset)>,
);

/// What one scrape reads of a hosted partition.
struct Reading {
    size: i64,
    segments: i64,
    offsets: crate::replica::PartitionOffsets,
    /// As its leader: replicas, in-sync replicas, and each follower's log end offset.
    led: Option<Led>,
}

impl Reading {
    fn of(partition: &Partition) -> Reading {
        let offsets = partition.offsets();
        let (size, segments) = {
            let log = partition.log();
            (log.size_in_bytes() as i64, log.segments().len() as i64)
        };
        let state = partition.state();
        let led = match &state.role {
            Role::Leader(l) => {
                let remotes = l.remotes.iter().map(|(id, r)| (*id, r.log_end_offset));
                Some((l.replicas.len(), l.isr.len(), remotes.collect()))
            }
            Role::Follower { .. } => None,
        };
        Reading {
            size,
            segments,
            offsets,
            led,
        }
    }

    fn under_replicated(&self) -> Option<bool> {
        self.led.as_ref().map(|(replicas, isr, _)| isr < replicas)
    }
}

type PartitionGauge = (&'static str, &'static str, fn(&Reading) -> Option<i64>);

/// The gauges of every hosted partition (`topic`, `partition`); `None`: not shown for it
/// (the replication ones are shown by the leader only, as Kafka's Partition MBeans).
const PARTITION_GAUGES: &[PartitionGauge] = &[
    (
        "kafka_log_log_size",
        "Bytes of the partition's log (Log Size)",
        |r| Some(r.size),
    ),
    (
        "kafka_log_log_numlogsegments",
        "Segments of the log (Log NumLogSegments)",
        |r| Some(r.segments),
    ),
    (
        "kafka_log_log_logstartoffset",
        "First offset of the log (Log LogStartOffset)",
        |r| Some(r.offsets.log_start_offset.0),
    ),
    (
        "kafka_log_log_logendoffset",
        "Offset after the last record (Log LogEndOffset)",
        |r| Some(r.offsets.log_end_offset.0),
    ),
    (
        "kafka_cluster_partition_highwatermark",
        "High watermark: read_uncommitted consumers read below it",
        |r| Some(r.offsets.high_watermark.0),
    ),
    (
        "kafka_cluster_partition_laststableoffset",
        "Last stable offset: read_committed consumers read below it",
        |r| Some(r.offsets.last_stable_offset.0),
    ),
    (
        "kafka_cluster_partition_laststableoffsetlag",
        "High watermark minus last stable offset (Partition LastStableOffsetLag)",
        |r| {
            r.led.as_ref()?;
            Some(r.offsets.high_watermark - r.offsets.last_stable_offset)
        },
    ),
    (
        "kafka_cluster_partition_replicascount",
        "Replicas of a partition led here (Partition ReplicasCount)",
        |r| r.led.as_ref().map(|l| l.0 as i64),
    ),
    (
        "kafka_cluster_partition_insyncreplicascount",
        "In-sync replicas of a partition led here (Partition InSyncReplicasCount)",
        |r| r.led.as_ref().map(|l| l.1 as i64),
    ),
    (
        "kafka_cluster_partition_underreplicated",
        "1 when a partition led here has fewer in-sync replicas than replicas",
        |r| r.under_replicated().map(i64::from),
    ),
];

fn partitions(broker: &Broker, gauges: &Gauges, hosted: &[std::sync::Arc<Partition>]) {
    let labels = &["topic", "partition"];
    let vecs: Vec<_> = PARTITION_GAUGES
        .iter()
        .map(|(name, help, value)| (gauges.vec(name, help, labels), value))
        .collect();
    let lag = gauges.vec(
        "kafka_cluster_partition_replicalag",
        "Leader's log end offset minus a follower's, as the leader last saw it",
        &["topic", "partition", "replica"],
    );
    let image = broker.image();
    let (mut leaders, mut under, mut under_min, mut at_min) = (0, 0, 0, 0);
    for partition in hosted {
        let tp = &partition.topic_partition;
        let index = tp.partition.to_string();
        let l = [tp.topic.as_str(), index.as_str()];
        let reading = Reading::of(partition);
        for (gauge, value) in &vecs {
            if let Some(value) = value(&reading) {
                gauge.with_label_values(&l).set(value);
            }
        }
        let Some((_, isr, remotes)) = &reading.led else {
            continue;
        };
        leaders += 1;
        under += usize::from(reading.under_replicated() == Some(true));
        let min_isr = image.topics.get(&tp.topic).map_or(1, |t| {
            topic::number(&broker.config, &t.configs, "min.insync.replicas").max(1) as usize
        });
        under_min += usize::from(*isr < min_isr);
        at_min += usize::from(*isr == min_isr);
        for (replica, replica_end) in remotes {
            let behind = reading.offsets.log_end_offset.0 - replica_end.0.max(0);
            let replica = replica.to_string();
            lag.with_label_values(&[l[0], l[1], &replica]).set(behind);
        }
    }
    let counts = [
        ("partitioncount", "Partitions hosted here", hosted.len()),
        ("leadercount", "Partitions led here", leaders),
        (
            "underreplicatedpartitions",
            "Partitions led here with fewer in-sync replicas than replicas",
            under,
        ),
        (
            "underminisrpartitioncount",
            "Partitions led here with fewer in-sync replicas than min.insync.replicas",
            under_min,
        ),
        (
            "atminisrpartitioncount",
            "Partitions led here with exactly min.insync.replicas in sync",
            at_min,
        ),
        (
            "offlinereplicacount",
            "Replicas here whose log directory failed",
            broker.replicas.offline_count(),
        ),
    ];
    for (name, help, value) in counts {
        let name = format!("kafka_server_replicamanager_{name}");
        gauges.one(&name, &format!("{help} (ReplicaManager)"), value as i64);
    }
    fetchers(gauges, hosted);
}

/// The followers' lag behind their leaders' high watermarks (FetcherLagMetrics, and
/// ReplicaFetcherManager's MaxLag over them).
fn fetchers(gauges: &Gauges, hosted: &[std::sync::Arc<Partition>]) {
    let lags = gauges.vec(
        "kafka_server_fetcherlagmetrics_consumerlag",
        "As follower: the leader's high watermark minus this replica's log end offset after \
         the last fetch (FetcherLagMetrics)",
        &["clientid", "topic", "partition"],
    );
    let mut max_lag = 0;
    for partition in hosted {
        let Some(lag) = partition.fetcher_lag() else {
            continue;
        };
        let tp = &partition.topic_partition;
        // Kafka names a fetcher thread by its id and its leader: one link per leader.
        let client = format!("ReplicaFetcherThread-0-{}", partition.leader());
        let index = tp.partition.to_string();
        lags.with_label_values(&[&client, &tp.topic, &index])
            .set(lag);
        max_lag = max_lag.max(lag);
    }
    let max = gauges.vec(
        "kafka_server_replicafetchermanager_maxlag",
        "The largest fetcher lag of the partitions followed here (ReplicaFetcherManager)",
        &["clientid"],
    );
    max.with_label_values(&["Replica"]).set(max_lag);
}

fn controller(broker: &Broker, gauges: &Gauges) {
    let image = broker.image();
    let status = broker.controller.quorum_status();
    let node_id = broker.config.node_id;
    let active = status.is_some_and(|s| s.leader == Some(node_id));
    gauges.one(
        "kafka_controller_kafkacontroller_activecontrollercount",
        "1 on the active controller (KafkaController ActiveControllerCount)",
        i64::from(active),
    );
    if let Some(status) = status {
        gauges.one(
            "kafka_server_raft_metrics_current_leader",
            "The quorum leader this node knows, -1 when none (raft-metrics current-leader)",
            status.leader.map_or(-1, i64::from),
        );
        gauges.one(
            "kafka_server_raft_metrics_current_epoch",
            "The quorum's epoch (Raft term) this node is at (raft-metrics current-epoch)",
            status.term as i64,
        );
        gauges.one(
            "kafka_server_raft_metrics_log_end_offset",
            "Records of the metadata log applied here (raft-metrics log-end-offset)",
            status.applied as i64,
        );
    }
    // As Kafka, the cluster-wide counts come from the active controller only.
    let cluster = |values: [usize; 5]| {
        let names = [
            ("offlinepartitionscount", "Partitions without a leader"),
            ("globalpartitioncount", "Partitions in the cluster"),
            ("globaltopiccount", "Topics in the cluster"),
            ("activebrokercount", "Unfenced brokers"),
            ("fencedbrokercount", "Fenced brokers"),
        ];
        for ((name, help), value) in names.iter().zip(values) {
            let name = format!("kafka_controller_kafkacontroller_{name}");
            gauges.one(&name, help, value as i64);
        }
    };
    let partitions = image.topics.values().flat_map(|t| t.partitions.iter());
    let offline = partitions.clone().filter(|p| p.leader < 0).count();
    let fenced = image.brokers.iter().filter(|b| b.fenced).count();
    match active {
        true => cluster([
            offline,
            partitions.count(),
            image.topics.len(),
            image.brokers.len() - fenced,
            fenced,
        ]),
        false => cluster([0; 5]),
    }
}

/// Consumer group lag of the groups coordinated here, on the partitions hosted here
/// (the high watermark minus the committed offset, as kafka_exporter reports it).
fn groups(broker: &Broker, gauges: &Gauges, hosted: &[std::sync::Arc<Partition>]) {
    let labels = &["consumergroup", "topic", "partition"];
    let current = gauges.vec(
        "kafka_consumergroup_current_offset",
        "Offset committed by a consumer group",
        labels,
    );
    let lag = gauges.vec(
        "kafka_consumergroup_lag",
        "High watermark minus the offset a consumer group committed",
        labels,
    );
    let high_watermarks: HashMap<(&str, i32), i64> = hosted
        .iter()
        .map(|p| {
            let tp = &p.topic_partition;
            ((tp.topic.as_str(), tp.partition), p.high_watermark().0)
        })
        .collect();
    for (group, (topic, partition), offset) in broker.groups.committed_offsets() {
        let index = partition.to_string();
        let l = [group.as_str(), topic.as_str(), index.as_str()];
        current.with_label_values(&l).set(offset);
        if let Some(hw) = high_watermarks.get(&(topic.as_str(), partition)) {
            lag.with_label_values(&l).set((hw - offset).max(0));
        }
    }
}
