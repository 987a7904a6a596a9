//! The controller: the one place where cluster metadata changes (topics, partitions,
//! configs, producer id blocks). Each change is validated, persisted, then published as a
//! new immutable [`MetadataImage`].
//!
//! This is the single-node controller of a combined broker: its state is a JSON snapshot
//! in the log directory, rewritten atomically on every change. The Raft quorum of issue #4
//! replaces the snapshot with a replicated log behind the same operations.

pub mod error;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::{topic, BrokerConfig, ConfigMap};
use crate::log::checkpoint::write_atomically;
use crate::log::LogError;
use crate::metadata::{validate_topic_name, BrokerImage, MetadataImage, TopicImage};
pub use error::ControllerError;

/// File name of the controller's snapshot inside the log directory.
pub const SNAPSHOT_FILE: &str = "highwater-metadata.json";
/// Producer ids handed out per persisted block, so that ids are never reused after a crash.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// The most partitions one topic may have (a bound on what one request can make us create).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// What is persisted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Snapshot {
    cluster_id: String,
    topics: BTreeMap<String, TopicImage>,
    /// Producer ids below this were (or may have been) handed out.
    producer_id_block_end: i64,
}

#[derive(Debug)]
struct State {
    snapshot: Snapshot,
    next_producer_id: i64,
}

/// A topic to create, as requested.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    /// -1 for the broker default.
    pub partitions: i32,
    /// -1 for the broker default.
    pub replication_factor: i32,
    /// Explicit replica assignment per partition, if the client gave one.
    pub assignments: Vec<Vec<i32>>,
    pub configs: ConfigMap,
}

/// The single-node controller.
#[derive(Debug)]
pub struct Controller {
    path: PathBuf,
    config: Arc<BrokerConfig>,
    state: Mutex<State>,
    image: RwLock<Arc<MetadataImage>>,
}

fn storage(source: LogError) -> ControllerError {
    ControllerError::Storage { source }
}

impl Controller {
    /// Loads the snapshot from the log directory, or starts a new cluster.
    pub fn open(config: Arc<BrokerConfig>) -> Result<Self, ControllerError> {
        let path = config.log_dir.join(SNAPSHOT_FILE);
        let existed = path.exists();
        let snapshot = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                storage(LogError::CorruptFile {
                    path: path.clone(),
                    reason: e.to_string(),
                })
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Snapshot {
                cluster_id: new_cluster_id(),
                ..Snapshot::default()
            },
            Err(e) => return Err(storage(LogError::io(&path, e))),
        };
        let next_producer_id = snapshot.producer_id_block_end;
        let controller = Controller {
            path,
            config,
            state: Mutex::new(State {
                snapshot,
                next_producer_id,
            }),
            image: RwLock::new(Arc::new(MetadataImage::default())),
        };
        let mut state = controller.lock();
        if existed {
            // Unchanged since it was written: publish it without rewriting (and fsyncing)
            // it, which keeps a restart's time to first Metadata short.
            controller.publish(&state);
        } else {
            controller.commit(&mut state)?;
        }
        drop(state);
        Ok(controller)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current metadata image.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(
            &self
                .image
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The broker's own configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Persists the state and publishes a new image.
    fn commit(&self, state: &mut State) -> Result<Arc<MetadataImage>, ControllerError> {
        let bytes = serde_json::to_vec_pretty(&state.snapshot).map_err(|e| {
            storage(LogError::CorruptFile {
                path: self.path.clone(),
                reason: e.to_string(),
            })
        })?;
        std::fs::create_dir_all(&self.config.log_dir)
            .map_err(|e| storage(LogError::io(&self.config.log_dir, e)))?;
        write_atomically(&self.path, &bytes).map_err(storage)?;
        Ok(self.publish(state))
    }

    /// Publishes the state as the new metadata image.
    fn publish(&self, state: &State) -> Arc<MetadataImage> {
        let image = Arc::new(MetadataImage {
            cluster_id: state.snapshot.cluster_id.clone(),
            controller_id: self.config.node_id,
            brokers: vec![BrokerImage {
                node_id: self.config.node_id,
                host: self.config.advertised_host.clone(),
                port: self.config.advertised_port,
            }],
            topics: state
                .snapshot
                .topics
                .iter()
                .map(|(name, t)| (name.clone(), Arc::new(t.clone())))
                .collect(),
        });
        *self
            .image
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&image);
        image
    }

    fn validate_new_topic(
        &self,
        state: &State,
        topic: &NewTopic,
    ) -> Result<TopicImage, ControllerError> {
        let name = topic.name.clone();
        validate_topic_name(&name).map_err(|reason| ControllerError::InvalidTopic {
            topic: name.clone(),
            reason,
        })?;
        if state.snapshot.topics.contains_key(&name) {
            return Err(ControllerError::TopicAlreadyExists { topic: name });
        }
        let brokers = [self.config.node_id];
        let (partitions, replicas) = if topic.assignments.is_empty() {
            let partitions = if topic.partitions == -1 {
                self.config.num_partitions
            } else {
                topic.partitions
            };
            let factor = if topic.replication_factor == -1 {
                1
            } else {
                topic.replication_factor
            };
            if factor <= 0 || factor as usize > brokers.len() {
                return Err(ControllerError::InvalidReplicationFactor {
                    topic: name,
                    factor,
                    brokers: brokers.len(),
                });
            }
            // Checked before sizing the replica list by a count read from the wire.
            check_partition_count(&name, partitions)?;
            (partitions, vec![self.config.node_id; partitions as usize])
        } else {
            check_assignments(&name, &topic.assignments, &brokers)?;
            (
                topic.assignments.len() as i32,
                topic.assignments.iter().map(|a| a[0]).collect(),
            )
        };
        check_partition_count(&name, partitions)?;
        topic::validate(&topic.configs).map_err(|source| ControllerError::InvalidConfig {
            topic: name.clone(),
            source: Box::new(source),
        })?;
        Ok(TopicImage {
            name,
            topic_id: Uuid::new_v4(),
            partitions,
            replicas,
            leader_epoch: 0,
            configs: topic.configs.clone(),
        })
    }

    /// Validates (and unless `validate_only`, creates) a topic.
    pub fn create_topic(
        &self,
        topic: &NewTopic,
        validate_only: bool,
    ) -> Result<TopicImage, ControllerError> {
        let mut state = self.lock();
        let image = self.validate_new_topic(&state, topic)?;
        if !validate_only {
            state
                .snapshot
                .topics
                .insert(image.name.clone(), image.clone());
            self.commit(&mut state)?;
            tracing::info!(topic = %image.name, partitions = image.partitions, "created topic");
        }
        Ok(image)
    }

    /// Deletes a topic by name.
    pub fn delete_topic(&self, name: &str) -> Result<TopicImage, ControllerError> {
        let mut state = self.lock();
        let removed =
            state
                .snapshot
                .topics
                .remove(name)
                .ok_or_else(|| ControllerError::UnknownTopic {
                    topic: name.to_string(),
                })?;
        self.commit(&mut state)?;
        tracing::info!(topic = %name, "deleted topic");
        Ok(removed)
    }

    /// Grows a topic to `count` partitions.
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let mut state = self.lock();
        let topic =
            state
                .snapshot
                .topics
                .get_mut(name)
                .ok_or_else(|| ControllerError::UnknownTopic {
                    topic: name.to_string(),
                })?;
        if count <= topic.partitions {
            let reason = "the new count must be greater than the current count";
            return Err(ControllerError::InvalidPartitions {
                topic: name.to_string(),
                count,
                reason,
            });
        }
        check_partition_count(name, count)?;
        if validate_only {
            return Ok(());
        }
        topic.partitions = count;
        topic.replicas.resize(count as usize, self.config.node_id);
        self.commit(&mut state)?;
        tracing::info!(topic = %name, partitions = count, "added partitions");
        Ok(())
    }

    /// Hands out a new producer id, persisting a new block of ids when one runs out.
    pub fn allocate_producer_id(&self) -> Result<i64, ControllerError> {
        let mut state = self.lock();
        if state.next_producer_id >= state.snapshot.producer_id_block_end {
            state.snapshot.producer_id_block_end = state.next_producer_id + PRODUCER_ID_BLOCK_SIZE;
            self.commit(&mut state)?;
        }
        let id = state.next_producer_id;
        state.next_producer_id += 1;
        Ok(id)
    }
}

fn check_partition_count(topic: &str, count: i32) -> Result<(), ControllerError> {
    let reason = if count <= 0 {
        "must be greater than 0"
    } else if count > PARTITIONS_PER_TOPIC_MAX {
        "exceeds the limit of 10000 partitions per topic"
    } else {
        return Ok(());
    };
    Err(ControllerError::InvalidPartitions {
        topic: topic.to_string(),
        count,
        reason,
    })
}

fn check_assignments(
    topic: &str,
    assignments: &[Vec<i32>],
    brokers: &[i32],
) -> Result<(), ControllerError> {
    let invalid = |reason| ControllerError::InvalidReplicaAssignment {
        topic: topic.into(),
        reason,
    };
    for replicas in assignments {
        if replicas.is_empty() {
            return Err(invalid("a partition has no replicas"));
        }
        if replicas.iter().any(|r| !brokers.contains(r)) {
            return Err(invalid("a replica is not a registered broker"));
        }
        if replicas.len() > brokers.len() {
            return Err(invalid(
                "a partition has more replicas than there are brokers",
            ));
        }
    }
    Ok(())
}

/// A new random cluster id, in Kafka's base64url form of a UUID.
fn new_cluster_id() -> String {
    base64url(Uuid::new_v4())
}

/// Kafka's text form of a UUID: unpadded base64url of its 16 bytes.
pub fn base64url(id: Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller() -> (tempfile::TempDir, Controller) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut map = ConfigMap::new();
        map.insert("log.dirs".into(), dir.path().display().to_string());
        let config = Arc::new(BrokerConfig::from_map(map).expect("config"));
        (dir, Controller::open(config).expect("open"))
    }

    fn new_topic(name: &str, partitions: i32) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor: -1,
            assignments: vec![],
            configs: ConfigMap::new(),
        }
    }

    #[test]
    fn topics_survive_a_reopen() {
        let (dir, controller) = controller();
        controller
            .create_topic(&new_topic("a", 3), false)
            .expect("create");
        let id = controller.image().topic("a").expect("a").topic_id;
        drop(controller);
        let mut map = ConfigMap::new();
        map.insert("log.dirs".into(), dir.path().display().to_string());
        let config = Arc::new(BrokerConfig::from_map(map).expect("config"));
        let reopened = Controller::open(config).expect("reopen");
        assert_eq!(reopened.image().topic("a").expect("a").topic_id, id);
    }

    #[test]
    fn duplicate_and_invalid_topics_are_refused() {
        let (_dir, controller) = controller();
        controller
            .create_topic(&new_topic("a", 1), false)
            .expect("create");
        assert!(matches!(
            controller.create_topic(&new_topic("a", 1), false),
            Err(ControllerError::TopicAlreadyExists { .. })
        ));
        assert!(matches!(
            controller.create_topic(&new_topic("a b", 1), false),
            Err(ControllerError::InvalidTopic { .. })
        ));
        assert!(matches!(
            controller.create_topic(&new_topic("b", 0), false),
            Err(ControllerError::InvalidPartitions { .. })
        ));
    }

    #[test]
    fn producer_ids_are_not_reused_after_a_restart() {
        let (dir, controller) = controller();
        let first = controller.allocate_producer_id().expect("id");
        drop(controller);
        let mut map = ConfigMap::new();
        map.insert("log.dirs".into(), dir.path().display().to_string());
        let config = Arc::new(BrokerConfig::from_map(map).expect("config"));
        let reopened = Controller::open(config).expect("reopen");
        assert!(reopened.allocate_producer_id().expect("id") > first);
    }

    #[test]
    fn base64url_matches_kafkas_uuid_text() {
        let id = Uuid::from_bytes([0xff; 16]);
        assert_eq!(base64url(id), "_____________________w");
    }
}
