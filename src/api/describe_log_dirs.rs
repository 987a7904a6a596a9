//! DescribeLogDirs (`kafka-log-dirs --describe`, the AdminClient's `describeLogDirs`): each
//! of this broker's `log.dirs` with the replicas it holds, their sizes and offset lag, and
//! the directory's total and usable bytes (v4), as Kafka's ReplicaManager describes them.
//! A failed directory is listed with KAFKA_STORAGE_ERROR and nothing else.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::replica::log_dirs::LogDir;
use crate::replica::{Partition, TopicPartition};

/// Answers DescribeLogDirs: every directory, the requested partitions (all when `topics`
/// is null) among those it holds.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
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
        .map(|dir| {
            let partitions = broker.replicas.partitions_in(dir);
            describe(request, dir, &partitions, wanted.as_ref())
        })
        .collect();
    request.respond(&DescribeLogDirsResponse::default().with_results(results))
}

/// One directory's entry: KAFKA_STORAGE_ERROR when it failed, an unknown server error when
/// its file system cannot be asked for its space.
fn describe(
    request: &Request,
    dir: &LogDir,
    partitions: &[std::sync::Arc<Partition>],
    wanted: Option<&HashSet<TopicPartition>>,
) -> DescribeLogDirsResult {
    let path = std::path::absolute(&dir.path).unwrap_or_else(|_| dir.path.clone());
    let result = DescribeLogDirsResult::default().with_log_dir(str_bytes(&path.to_string_lossy()));
    if dir.is_offline() {
        tracing::warn!(client = %request.client, log_dir = %path.display(),
            "DescribeLogDirs: the log directory is offline");
        return result.with_error_code(ResponseError::KafkaStorageError.code());
    }
    let (total_bytes, usable_bytes) = match space(&path) {
        Ok(space) => space,
        Err(error) => {
            tracing::error!(client = %request.client, log_dir = %path.display(), %error,
                "DescribeLogDirs: cannot read the file system's space");
            return result.with_error_code(ResponseError::UnknownServerError.code());
        }
    };
    let mut topics: BTreeMap<&str, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for partition in partitions {
        let tp = &partition.topic_partition;
        if wanted.is_some_and(|w| !w.contains(tp)) {
            continue;
        }
        let size = partition.log().size_in_bytes();
        let offsets = partition.offsets();
        topics.entry(&tp.topic).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(tp.partition)
                .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
                // Kafka's lag of a current (not future) log: its HW minus its LEO, at least 0.
                .with_offset_lag((offsets.high_watermark - offsets.log_end_offset).max(0))
                .with_is_future_key(false),
        );
    }
    let topics = topics
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(TopicName(str_bytes(name)))
                .with_partitions(partitions)
        })
        .collect();
    result
        .with_topics(topics)
        .with_total_bytes(total_bytes)
        .with_usable_bytes(usable_bytes)
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
