//! Topic changes as the active controller makes them: validation against the current
//! state, replica placement over the unfenced brokers, and the records that commit them.

use uuid::Uuid;

use super::{conflict, ActiveController, ControllerReply};
use crate::config::{topic, ConfigMap};
use crate::controller::error::ControllerError;
use crate::controller::placement::assign_replicas;
use crate::controller::state::{ClusterState, Record, RecordResult};
use crate::controller::NewTopic;
use crate::metadata::{validate_topic_name, PartitionImage, TopicImage};

/// The most partitions one topic may have (a bound on what one request can make us create).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

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
        if (1..replicas.len()).any(|i| replicas[..i].contains(&replicas[i])) {
            return Err(invalid("a partition lists a broker twice"));
        }
    }
    Ok(())
}

/// The unfenced brokers, sorted: where new replicas may go.
fn usable_brokers(state: &ClusterState) -> Vec<i32> {
    state
        .brokers
        .values()
        .filter(|b| !b.fenced && !b.in_controlled_shutdown)
        .map(|b| b.node_id)
        .collect()
}

/// A start on the broker ring that varies by topic, as Kafka's random start does.
fn ring_start(topic_id: Uuid) -> usize {
    topic_id.as_bytes()[0] as usize
}

impl ActiveController {
    pub(super) fn validate_new_topic(
        &self,
        topic: &NewTopic,
    ) -> Result<TopicImage, ControllerError> {
        let name = topic.name.clone();
        validate_topic_name(&name).map_err(|reason| ControllerError::InvalidTopic {
            topic: name.clone(),
            reason,
        })?;
        let (exists, usable, registered) = self.state(|s| {
            let registered: Vec<i32> = s.brokers.keys().copied().collect();
            (s.topics.contains_key(&name), usable_brokers(s), registered)
        });
        if exists {
            return Err(ControllerError::TopicAlreadyExists { topic: name });
        }
        let topic_id = Uuid::new_v4();
        let replicas = if topic.assignments.is_empty() {
            let partitions = match topic.partitions {
                -1 => self.config.num_partitions,
                n => n,
            };
            let factor = match topic.replication_factor {
                -1 => self.config.default_replication_factor,
                n => n,
            };
            if factor <= 0 || factor as usize > usable.len() {
                return Err(ControllerError::InvalidReplicationFactor {
                    topic: name,
                    factor,
                    brokers: usable.len(),
                });
            }
            // Checked before sizing the replica lists by a count read from the wire.
            check_partition_count(&name, partitions)?;
            assign_replicas(
                &usable,
                0,
                partitions,
                factor as usize,
                ring_start(topic_id),
            )
        } else {
            check_partition_count(&name, topic.assignments.len() as i32)?;
            check_assignments(&name, &topic.assignments, &registered)?;
            topic.assignments.clone()
        };
        topic::validate(&topic.configs).map_err(|source| ControllerError::InvalidConfig {
            topic: name.clone(),
            source: Box::new(source),
        })?;
        Ok(TopicImage {
            name,
            topic_id,
            partitions: replicas.into_iter().map(PartitionImage::new).collect(),
            configs: topic.configs.clone(),
        })
    }

    pub(super) async fn create_topic(
        &self,
        topic: &NewTopic,
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let image = self.validate_new_topic(topic)?;
        if !validate_only {
            match self.propose(Record::CreateTopic(image.clone())).await? {
                RecordResult::Rejected { .. } => {
                    return Err(ControllerError::TopicAlreadyExists { topic: image.name })
                }
                _ => tracing::info!(topic = %image.name,
                    partitions = image.partitions.len(), "created topic"),
            }
        }
        Ok(ControllerReply::Topic(image))
    }

    pub(super) async fn delete_topic(
        &self,
        name: &str,
    ) -> Result<ControllerReply, ControllerError> {
        let found = self.state(|s| s.topics.get(name).cloned());
        let topic = found.ok_or_else(|| ControllerError::UnknownTopic {
            topic: name.to_string(),
        })?;
        let record = Record::DeleteTopic {
            name: name.to_string(),
            topic_id: topic.topic_id,
        };
        conflict(self.propose(record).await?)?;
        tracing::info!(topic = %name, "deleted topic");
        Ok(ControllerReply::Topic(topic))
    }

    pub(super) async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let found = self.state(|s| {
            s.topics.get(name).map(|t| {
                (
                    t.partition_count(),
                    t.partitions.first().map_or(1, |p| p.replicas.len()),
                    t.topic_id,
                    usable_brokers(s),
                )
            })
        });
        let (current, factor, topic_id, usable) =
            found.ok_or_else(|| ControllerError::UnknownTopic {
                topic: name.to_string(),
            })?;
        if count <= current {
            let reason = "the new count must be greater than the current count";
            return Err(ControllerError::InvalidPartitions {
                topic: name.to_string(),
                count,
                reason,
            });
        }
        check_partition_count(name, count)?;
        if factor > usable.len() {
            return Err(ControllerError::InvalidReplicationFactor {
                topic: name.to_string(),
                factor: factor as i32,
                brokers: usable.len(),
            });
        }
        if validate_only {
            return Ok(ControllerReply::Done);
        }
        let replicas = assign_replicas(
            &usable,
            current,
            count - current,
            factor,
            ring_start(topic_id),
        );
        let record = Record::CreatePartitions {
            name: name.to_string(),
            replicas,
        };
        conflict(self.propose(record).await?)?;
        tracing::info!(topic = %name, partitions = count, "added partitions");
        Ok(ControllerReply::Done)
    }

    pub(super) async fn alter_configs(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let found = self.state(|s| s.topics.get(name).map(|t| t.configs.clone()));
        let mut configs: ConfigMap = found.ok_or_else(|| ControllerError::UnknownTopic {
            topic: name.to_string(),
        })?;
        for (key, value) in changes {
            match value {
                Some(value) => configs.insert(key.clone(), value.clone()),
                None => configs.remove(key),
            };
        }
        topic::validate(&configs).map_err(|source| ControllerError::InvalidConfig {
            topic: name.to_string(),
            source: Box::new(source),
        })?;
        if !validate_only {
            let record = Record::AlterTopicConfigs {
                name: name.to_string(),
                configs,
            };
            conflict(self.propose(record).await?)?;
        }
        Ok(ControllerReply::Done)
    }
}
