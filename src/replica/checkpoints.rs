//! The broker-level files of a log directory, in Apache Kafka's formats:
//! `recovery-point-offset-checkpoint`, `replication-offset-checkpoint` (high watermarks),
//! `log-start-offset-checkpoint` and `cleaner-offset-checkpoint` (lines `topic partition
//! offset`, written atomically),
//! and `meta.properties` (node id, cluster id, directory id).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::error::ReplicaError;
use super::partition::TopicPartition;
use crate::ids::Offset;
use crate::log::checkpoint;
use crate::log::LogError;

/// Offsets below which data is known to be flushed, per partition.
pub const RECOVERY_POINT_FILE: &str = "recovery-point-offset-checkpoint";
/// High watermarks, per partition.
pub const HIGH_WATERMARK_FILE: &str = "replication-offset-checkpoint";
/// Log start offsets moved inside a segment (DeleteRecords), per partition.
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";
/// The log cleaner's first dirty offset, per compacted partition.
pub const CLEANER_OFFSET_FILE: &str = "cleaner-offset-checkpoint";
/// The log directory's identity.
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// Reads a `topic partition offset` checkpoint; empty if the file does not exist.
pub fn read_offsets(path: &Path) -> Result<HashMap<TopicPartition, Offset>, LogError> {
    let mut offsets = HashMap::new();
    for line in checkpoint::read(path)?.unwrap_or_default() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let parsed = match parts.as_slice() {
            [topic, partition, offset] => partition
                .parse()
                .ok()
                .zip(offset.parse().ok().map(Offset))
                .map(|(partition, offset)| {
                    (
                        TopicPartition {
                            topic: topic.to_string(),
                            partition,
                        },
                        offset,
                    )
                }),
            _ => None,
        };
        let (tp, offset) = parsed.ok_or_else(|| LogError::CorruptFile {
            path: path.to_path_buf(),
            reason: format!("bad checkpoint entry {line:?}"),
        })?;
        offsets.insert(tp, offset);
    }
    Ok(offsets)
}

/// Writes a `topic partition offset` checkpoint atomically.
pub fn write_offsets(path: &Path, offsets: &[(TopicPartition, Offset)]) -> Result<(), LogError> {
    let lines: Vec<String> = offsets
        .iter()
        .map(|(tp, offset)| format!("{} {} {offset}", tp.topic, tp.partition))
        .collect();
    checkpoint::write(path, &lines)
}

/// Checks `meta.properties`: refuses another node id or cluster id than the directory
/// was made for (as Kafka does). On first start (no file yet) returns the write that makes
/// it, which the caller may run while it does other work.
pub fn check_meta_properties(
    dir: &Path,
    node_id: i32,
    cluster_id: &str,
) -> Result<Option<MetaPropertiesWrite>, ReplicaError> {
    let path = dir.join(META_PROPERTIES_FILE);
    let inconsistent = |reason: String| ReplicaError::InconsistentLogDir {
        path: path.clone(),
        reason,
    };
    match checkpoint::read_properties(&path) {
        Ok(Some(found)) => {
            let node = found.get("node.id").map_or("", String::as_str);
            if node != node_id.to_string() {
                return Err(inconsistent(format!(
                    "made for node.id {node}, configured {node_id}"
                )));
            }
            let cluster = found.get("cluster.id").map_or("", String::as_str);
            if cluster != cluster_id {
                return Err(inconsistent(format!(
                    "made for cluster {cluster}, metadata says {cluster_id}"
                )));
            }
            Ok(None)
        }
        Ok(None) => {
            let directory_id = crate::metadata::uuid_text::base64url(uuid::Uuid::new_v4());
            let text = format!(
                "#\n#Written by highwater\nversion=1\nnode.id={node_id}\ncluster.id={cluster_id}\ndirectory.id={directory_id}\n"
            );
            Ok(Some(MetaPropertiesWrite { path, text }))
        }
        Err(e) => Err(inconsistent(e.to_string())),
    }
}

/// The first `meta.properties` of a log directory, still to be written.
#[derive(Debug)]
pub struct MetaPropertiesWrite {
    path: PathBuf,
    text: String,
}

impl MetaPropertiesWrite {
    /// Writes the file atomically (fsynced, then renamed into place).
    pub fn write(self) -> Result<(), ReplicaError> {
        checkpoint::write_atomically(&self.path, self.text.as_bytes()).map_err(|e| {
            ReplicaError::InconsistentLogDir {
                path: self.path.clone(),
                reason: e.to_string(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_in_kafkas_format() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(RECOVERY_POINT_FILE);
        let tp = TopicPartition {
            topic: "a.b-c".into(),
            partition: 3,
        };
        write_offsets(&path, &[(tp.clone(), Offset(42))]).expect("write");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "0\n1\na.b-c 3 42\n"
        );
        assert_eq!(read_offsets(&path).expect("read")[&tp], Offset(42));
    }

    #[test]
    fn meta_properties_refuse_another_node() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = check_meta_properties(dir.path(), 1, "abc").expect("first start");
        first.expect("a file to write").write().expect("written");
        let again = check_meta_properties(dir.path(), 1, "abc").expect("same node");
        assert!(again.is_none());
        assert!(check_meta_properties(dir.path(), 2, "abc").is_err());
        assert!(check_meta_properties(dir.path(), 1, "xyz").is_err());
    }
}
