//! The log directories of this broker, as Kafka's ReplicaManager serves them:
//! DescribeLogDirs (`kafka-log-dirs --describe`, the AdminClient's `describeLogDirs` and
//! `describeReplicaLogDirs`) lists each of `log.dirs` with the replicas it holds, their
//! sizes and offset lag, the replicas being moved there (`is_future_key`), and the
//! directory's total and usable bytes (v4); a failed directory is listed with
//! KAFKA_STORAGE_ERROR and nothing else. AlterReplicaLogDirs (`alterReplicaLogDirs`,
//! `kafka-reassign-partitions` with `log_dirs`) starts moving replicas between them.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, TopicName,
};

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::replica::log_dirs::LogDir;
use crate::replica::log_mover::FutureReplica;
use crate::replica::{Partition, ReplicaManager, TopicPartition};

/// Answers DescribeLogDirs: every directory, the requested partitions (all when `topics`
/// is null) among those it holds.
pub fn describe(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeLogDirsRequest = request.decode()?;
    let wanted: Option<HashSet<TopicPartition>> = body.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| TopicPartition {
                    topic: t.topic.0.to_string(),
                    partition: *p,
                })
            })
            .collect()
    });
    let results = broker
        .replicas
        .log_dirs()
        .all()
        .iter()
        .map(|dir| describe_dir(request, &broker.replicas, dir, wanted.as_ref()))
        .collect();
    request.respond(&DescribeLogDirsResponse::default().with_results(results))
}

/// One directory's entry: KAFKA_STORAGE_ERROR when it failed, an unknown server error when
/// its file system cannot be asked for its space.
fn describe_dir(
    request: &Request,
    replicas: &ReplicaManager,
    dir: &Arc<LogDir>,
    wanted: Option<&HashSet<TopicPartition>>,
) -> DescribeLogDirsResult {
    let path = std::path::absolute(&dir.path).unwrap_or_else(|_| dir.path.clone());
    let result = DescribeLogDirsResult::default().with_log_dir(str_bytes(&path.to_string_lossy()));
    if dir.is_offline() {
        tracing::warn!(client = %request.client, log_dir = %path.display(),
            "DescribeLogDirs: the log directory is offline");
        return result.with_error_code(refusal_error(Refusal::StorageFailed).code());
    }
    let (total_bytes, usable_bytes) = match space(&path) {
        Ok(space) => space,
        Err(error) => {
            tracing::error!(client = %request.client, log_dir = %path.display(), %error,
                "DescribeLogDirs: cannot read the file system's space");
            return result.with_error_code(refusal_error(Refusal::Internal).code());
        }
    };
    let is_wanted = |tp: &TopicPartition| wanted.is_none_or(|w| w.contains(tp));
    let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for partition in replicas.partitions_in(dir) {
        let tp = &partition.topic_partition;
        if is_wanted(tp) {
            topics
                .entry(tp.topic.clone())
                .or_default()
                .push(current(&partition));
        }
    }
    for (tp, future) in replicas.future_replicas() {
        let moving = replicas.partition(&tp.topic, tp.partition).ok();
        if let Some(partition) = moving.filter(|_| is_wanted(&tp) && Arc::ptr_eq(&future.dest, dir))
        {
            let entry = topics.entry(tp.topic.clone()).or_default();
            entry.push(future_replica(&partition, &future));
        }
    }
    let topics = topics
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(TopicName(str_bytes(&name)))
                .with_partitions(partitions)
        })
        .collect();
    result
        .with_topics(topics)
        .with_total_bytes(total_bytes)
        .with_usable_bytes(usable_bytes)
}

/// A replica's current log: Kafka's lag of it is its HW minus its LEO, at least 0.
fn current(partition: &Partition) -> DescribeLogDirsPartition {
    let size = partition.log().size_in_bytes();
    let offsets = partition.offsets();
    DescribeLogDirsPartition::default()
        .with_partition_index(partition.topic_partition.partition)
        .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
        .with_offset_lag((offsets.high_watermark - offsets.log_end_offset).max(0))
        .with_is_future_key(false)
}

/// A replica's future log: its lag is how far it is behind the current log's end.
fn future_replica(partition: &Partition, future: &FutureReplica) -> DescribeLogDirsPartition {
    let lag = partition.offsets().log_end_offset.0 - future.log_end_offset();
    DescribeLogDirsPartition::default()
        .with_partition_index(partition.topic_partition.partition)
        .with_partition_size(i64::try_from(future.size()).unwrap_or(i64::MAX))
        .with_offset_lag(lag.max(0))
        .with_is_future_key(true)
}

/// Answers AlterReplicaLogDirs: each partition's move starts (or is found unnecessary);
/// the answer does not wait for the data to move (DescribeLogDirs shows the progress).
pub fn alter(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: AlterReplicaLogDirsRequest = request.decode()?;
    // As Kafka: one destination per partition, the last one named.
    let mut moves: BTreeMap<(String, i32), String> = BTreeMap::new();
    for dir in &body.dirs {
        for topic in &dir.topics {
            for partition in &topic.partitions {
                let key = (topic.name.0.to_string(), *partition);
                moves.insert(key, dir.path.to_string());
            }
        }
    }
    let mut results: BTreeMap<String, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    for ((topic, partition), path) in moves {
        let tp = TopicPartition {
            topic: topic.clone(),
            partition,
        };
        let outcome = broker.replicas.alter_log_dir(&tp, Path::new(&path));
        let code = match outcome {
            Ok(()) => 0,
            Err(error) => {
                tracing::warn!(client = %request.client, partition = %tp, to = path, %error,
                    "AlterReplicaLogDirs refused");
                super::errors::replica_error(&error).code()
            }
        };
        results.entry(topic).or_default().push(
            AlterReplicaLogDirPartitionResult::default()
                .with_partition_index(partition)
                .with_error_code(code),
        );
    }
    let results = results
        .into_iter()
        .map(|(topic, partitions)| {
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(TopicName(str_bytes(&topic)))
                .with_partitions(partitions)
        })
        .collect();
    request.respond(&AlterReplicaLogDirsResponse::default().with_results(results))
}

/// The total and usable (available to this process) bytes of the file system holding
/// `path`, as Java's `FileStore.getTotalSpace` and `getUsableSpace` report them.
fn space(path: &Path) -> std::io::Result<(i64, i64)> {
    let stat = rustix::fs::statvfs(path)?;
    let bytes =
        |blocks: u64| i64::try_from(blocks.saturating_mul(stat.f_frsize)).unwrap_or(i64::MAX);
    Ok((bytes(stat.f_blocks), bytes(stat.f_bavail)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_of_a_directory_is_positive_and_usable_at_most_total() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (total, usable) = space(dir.path()).expect("statvfs");
        assert!(total > 0);
        assert!((0..=total).contains(&usable), "{usable} of {total}");
    }

    #[test]
    fn space_of_a_missing_directory_is_an_error() {
        assert!(space(Path::new("/nonexistent/highwater-log-dir")).is_err());
    }
}
