//! The transaction coordinator's settings, read from the broker's Kafka keys
//! (`transaction.*`; defaults as Apache Kafka 4.x ships them, in `config::BROKER_DEFAULTS`).

use std::time::Duration;

use crate::config::{BrokerConfig, ConfigError};

/// Settings of the transaction coordinator.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions`.
    pub partitions: i32,
    /// `transaction.state.log.replication.factor` (capped by the brokers available).
    pub replication_factor: i32,
    /// `transaction.state.log.min.isr`.
    pub min_isr: i32,
    /// `transaction.state.log.segment.bytes`.
    pub segment_bytes: i64,
    /// `transaction.max.timeout.ms`: longer client timeouts are refused.
    pub max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_check_interval: Duration,
    /// How long a state write waits to be replicated (Kafka's request timeout for it).
    pub write_timeout: Duration,
    /// `transactional.id.expiration.ms`: an id idle this long (no transaction open) is
    /// forgotten.
    pub id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expiration_check_interval: Duration,
}

impl TxnConfig {
    /// Reads the transaction settings of a broker, naming the key of a value that is not
    /// valid.
    pub fn from_broker(config: &BrokerConfig) -> Result<Self, ConfigError> {
        let ms = |key| config.parse::<u64>(key).map(Duration::from_millis);
        Ok(TxnConfig {
            partitions: config
                .parse::<i32>("transaction.state.log.num.partitions")?
                .max(1),
            replication_factor: config
                .parse::<i32>("transaction.state.log.replication.factor")?
                .max(1),
            min_isr: config.parse::<i32>("transaction.state.log.min.isr")?.max(1),
            segment_bytes: config.parse("transaction.state.log.segment.bytes")?,
            max_timeout_ms: config.parse("transaction.max.timeout.ms")?,
            abort_check_interval: ms(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            )?,
            write_timeout: ms("offsets.commit.timeout.ms")?,
            id_expiration_ms: config.parse("transactional.id.expiration.ms")?,
            expiration_check_interval: ms(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
            )?,
        })
    }
}
