//! `/`: the live replication page — brokers, topics and, per partition, every replica's
//! log end offset, the high watermark, the last stable offset, the ISR and the leader
//! epoch history (the seeds' diagrams, live), under-replicated partitions first, and the
//! consumer groups coordinated here with their lag. The page is static; it reads
//! `/state.json` (built here from the broker's state) every second and redraws.
//!
//! Offsets are this broker's view: a partition's replica LEOs as its leader saw them in
//! the followers' fetches when it leads here, its own log when it only follows here, the
//! metadata alone (ISR, leader, epochs) when it is not hosted here.

use std::collections::HashMap;

use serde::Serialize;

use crate::api::Broker;
use crate::ids::{BrokerId, LeaderEpoch, Offset};
use crate::replica::{Partition, Role};

#[derive(Serialize)]
struct State {
    node_id: i32,
    cluster_id: String,
    controller_id: i32,
    metadata_offset: u64,
    brokers: Vec<BrokerRow>,
    partitions: Vec<PartitionRow>,
    groups: Vec<GroupRow>,
}

#[derive(Serialize)]
struct BrokerRow {
    id: i32,
    endpoint: String,
    fenced: bool,
}

#[derive(Serialize)]
struct PartitionRow {
    topic: String,
    partition: i32,
    leader: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    elr: Vec<i32>,
    under_replicated: bool,
    /// What this broker holds of the partition, if it hosts it.
    local: Option<LocalRow>,
}

#[derive(Serialize)]
struct LocalRow {
    role: &'static str,
    log_start_offset: Offset,
    log_end_offset: Offset,
    high_watermark: Offset,
    last_stable_offset: Offset,
    /// Leader epoch history: (epoch, start offset), oldest first.
    epochs: Vec<(LeaderEpoch, Offset)>,
    /// As leader: each replica's log end offset (its own included).
    replica_log_end_offsets: Vec<(BrokerId, Offset)>,
}

#[derive(Serialize)]
struct GroupRow {
    group: String,
    topic: String,
    partition: i32,
    committed: i64,
    /// High watermark minus the committed offset, when the partition is hosted here.
    lag: Option<i64>,
}

fn local(partition: &Partition) -> LocalRow {
    let offsets = partition.offsets();
    let epochs = partition
        .log()
        .epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    let state = partition.state();
    let (role, replica_log_end_offsets) = match &state.role {
        Role::Leader(leader) => {
            let own = (leader.local_id, offsets.log_end_offset);
            let remotes = leader.remotes.iter().map(|(id, r)| (*id, r.log_end_offset));
            ("leader", std::iter::once(own).chain(remotes).collect())
        }
        Role::Follower { .. } => ("follower", Vec::new()),
    };
    LocalRow {
        role,
        log_start_offset: offsets.log_start_offset,
        log_end_offset: offsets.log_end_offset,
        high_watermark: offsets.high_watermark,
        last_stable_offset: offsets.last_stable_offset,
        epochs,
        replica_log_end_offsets,
    }
}

/// Every partition of the cluster, with what this broker hosts of it; under-replicated
/// first, then by name.
fn partition_rows(broker: &Broker, image: &crate::metadata::MetadataImage) -> Vec<PartitionRow> {
    let mut hosted: HashMap<(String, i32), LocalRow> = broker
        .replicas
        .hosted()
        .iter()
        .map(|p| {
            let tp = &p.topic_partition;
            ((tp.topic.clone(), tp.partition), local(p))
        })
        .collect();
    let mut rows: Vec<PartitionRow> = image
        .topics
        .values()
        .flat_map(|t| {
            t.partitions.iter().enumerate().map(|(i, p)| PartitionRow {
                topic: t.name.clone(),
                partition: i as i32,
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                elr: p.elr.clone(),
                under_replicated: p.isr.len() < p.replicas.len(),
                local: None,
            })
        })
        .collect();
    for row in &mut rows {
        row.local = hosted.remove(&(row.topic.clone(), row.partition));
    }
    rows.sort_by(|a, b| {
        let key = |r: &PartitionRow| (!r.under_replicated, r.topic.clone(), r.partition);
        key(a).cmp(&key(b))
    });
    rows
}

/// The committed offsets of the groups coordinated here, with their lag where the
/// partition is hosted here.
fn group_rows(broker: &Broker, partitions: &[PartitionRow]) -> Vec<GroupRow> {
    let high_watermarks: HashMap<(&str, i32), i64> = partitions
        .iter()
        .filter_map(|p| {
            let local = p.local.as_ref()?;
            Some(((p.topic.as_str(), p.partition), local.high_watermark.0))
        })
        .collect();
    broker
        .groups
        .committed_offsets()
        .into_iter()
        .map(|(group, (topic, partition), committed)| GroupRow {
            lag: high_watermarks
                .get(&(topic.as_str(), partition))
                .map(|hw| (hw - committed).max(0)),
            group,
            topic,
            partition,
            committed,
        })
        .collect()
}

/// `/state.json`.
pub fn state(broker: &Broker) -> String {
    let image = broker.image();
    let partitions = partition_rows(broker, &image);
    let groups = group_rows(broker, &partitions);
    let brokers = image
        .brokers
        .iter()
        .map(|b| BrokerRow {
            id: b.node_id,
            endpoint: format!("{}:{}", b.host, b.port),
            fenced: b.fenced,
        })
        .collect();
    let state = State {
        node_id: broker.config.node_id,
        cluster_id: image.cluster_id.clone(),
        controller_id: image.controller_id,
        metadata_offset: image.offset,
        brokers,
        partitions,
        groups,
    };
    serde_json::to_string(&state).unwrap_or_else(|_| "{}".into())
}

/// The page: static markup and a script that redraws it from `/state.json` every second.
pub const HTML: &str = include_str!("page.html");
