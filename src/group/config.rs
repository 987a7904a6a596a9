//! The group coordinator's settings, read from the broker's Kafka keys (`group.*`,
//! `offsets.*`; defaults as Apache Kafka 4.x ships them, in `config::BROKER_DEFAULTS`).

use std::time::Duration;

use crate::config::{BrokerConfig, ConfigError};

/// Settings of the group coordinator.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `offsets.topic.num.partitions`: how many partitions `__consumer_offsets` gets.
    pub offsets_partitions: i32,
    /// `offsets.topic.replication.factor` (capped by the brokers available).
    pub offsets_replication_factor: i32,
    /// `offsets.topic.segment.bytes`.
    pub offsets_segment_bytes: i64,
    /// `group.min.session.timeout.ms`.
    pub session_timeout_min_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub session_timeout_max_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long an empty group waits for more members.
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`: members per classic group.
    pub group_size_max: usize,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in milliseconds.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval: Duration,
    /// `offsets.commit.timeout.ms`: how long a write waits to be replicated.
    pub commit_timeout: Duration,
    /// `group.consumer.session.timeout.ms` (KIP-848 groups).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (KIP-848 groups).
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`.
    pub consumer_group_size_max: usize,
    /// `group.consumer.assignors`: server-side assignors, the first is the default.
    pub consumer_assignors: Vec<String>,
}

impl GroupConfig {
    /// Reads the group settings of a broker, naming the key of a value that is not valid.
    pub fn from_broker(config: &BrokerConfig) -> Result<Self, ConfigError> {
        let ms = |key| config.parse::<u64>(key).map(Duration::from_millis);
        let assignors = config
            .get("group.consumer.assignors")
            .unwrap_or_default()
            .split(',')
            .map(|a| a.trim().to_ascii_lowercase())
            .filter(|a| !a.is_empty())
            .collect();
        let retention_minutes: i64 = config.parse("offsets.retention.minutes")?;
        Ok(GroupConfig {
            offsets_partitions: config.parse::<i32>("offsets.topic.num.partitions")?.max(1),
            offsets_replication_factor: config
                .parse::<i32>("offsets.topic.replication.factor")?
                .max(1),
            offsets_segment_bytes: config.parse("offsets.topic.segment.bytes")?,
            session_timeout_min_ms: config.parse("group.min.session.timeout.ms")?,
            session_timeout_max_ms: config.parse("group.max.session.timeout.ms")?,
            initial_rebalance_delay_ms: config.parse("group.initial.rebalance.delay.ms")?,
            group_size_max: config.parse::<usize>("group.max.size")?.max(1),
            offset_metadata_max_bytes: config.parse("offset.metadata.max.bytes")?,
            offsets_retention_ms: retention_minutes.saturating_mul(60_000),
            offsets_retention_check_interval: ms("offsets.retention.check.interval.ms")?,
            commit_timeout: ms("offsets.commit.timeout.ms")?,
            consumer_session_timeout_ms: config.parse("group.consumer.session.timeout.ms")?,
            consumer_heartbeat_interval_ms: config.parse("group.consumer.heartbeat.interval.ms")?,
            consumer_group_size_max: config.parse::<usize>("group.consumer.max.size")?.max(1),
            consumer_assignors: assignors,
        })
    }
}
