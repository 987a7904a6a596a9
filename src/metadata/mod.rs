//! Immutable snapshots of the cluster metadata: brokers, topics with their ids, partition
//! counts and config overrides. Every request handler reads one snapshot; the controller
//! publishes a new one after every change, so readers never see a half-made change.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::ConfigMap;

/// A broker as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerImage {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: i32,
    /// Replica of every partition (one broker per partition until replication exists).
    pub replicas: Vec<i32>,
    /// Leader epoch of every partition.
    pub leader_epoch: i32,
    /// Topic-level config overrides.
    pub configs: ConfigMap,
}

/// A consistent view of the cluster at one metadata offset.
#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub controller_id: i32,
    pub brokers: Vec<BrokerImage>,
    pub topics: BTreeMap<String, Arc<TopicImage>>,
}

impl MetadataImage {
    /// The topic called `name`.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    /// The topic with id `topic_id`.
    pub fn topic_by_id(&self, topic_id: Uuid) -> Option<&Arc<TopicImage>> {
        self.topics.values().find(|t| t.topic_id == topic_id)
    }
}

/// Topics the brokers keep for themselves (`__consumer_offsets`, later
/// `__transaction_state`): flagged internal in Metadata and closed to client produce.
pub fn is_internal_topic(name: &str) -> bool {
    matches!(name, "__consumer_offsets" | "__transaction_state")
}

/// The longest legal topic name (Apache Kafka's `Topic.MAX_NAME_LENGTH`).
pub const TOPIC_NAME_LENGTH_MAX: usize = 249;

/// Checks a topic name as Apache Kafka does: 1 to 249 characters from `[a-zA-Z0-9._-]`,
/// and neither `.` nor `..`.
pub fn validate_topic_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("topic name is empty");
    }
    if name == "." || name == ".." {
        return Err("topic name cannot be \".\" or \"..\"");
    }
    if name.len() > TOPIC_NAME_LENGTH_MAX {
        return Err("topic name is longer than 249 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(
            "topic name contains characters other than ASCII alphanumerics, '.', '_' and '-'",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name("spaces are bad").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
    }
}
