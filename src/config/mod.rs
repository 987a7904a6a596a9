//! Broker and topic configuration, with Apache Kafka's own key names (`log.dirs`,
//! `log.segment.bytes`, `min.insync.replicas`, …). A TOML file under `config/` is read,
//! its tables flattened into dotted keys, then overridden by command-line flags.
//!
//! Must not: know about the network or the log's internals.

pub mod error;
pub mod topic;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use error::ConfigError;

/// A flat map of Kafka config keys to their string values.
pub type ConfigMap = BTreeMap<String, String>;

/// Broker-level keys highwater reads, with their defaults (as Apache Kafka 4.x ships them,
/// except `listeners` and `log.dirs`, which default to a local single node).
pub const BROKER_DEFAULTS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("process.roles", "broker,controller"),
    ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ("advertised.listeners", ""),
    ("log.dirs", "./data"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    ("delete.topic.enable", "true"),
    ("socket.request.max.bytes", "104857600"),
    ("queued.max.requests", "500"),
    ("message.max.bytes", "1048588"),
    ("log.segment.bytes", "1073741824"),
    ("log.index.size.max.bytes", "10485760"),
    ("log.index.interval.bytes", "4096"),
    ("log.retention.ms", "604800000"),
    ("log.retention.bytes", "-1"),
    ("log.roll.ms", "604800000"),
    ("log.cleanup.policy", "delete"),
    ("log.flush.interval.messages", "9223372036854775807"),
    ("log.flush.interval.ms", "9223372036854775807"),
    ("min.insync.replicas", "1"),
    ("compression.type", "producer"),
    ("log.message.timestamp.type", "CreateTime"),
    ("unclean.leader.election.enable", "false"),
    ("log.preallocate", "false"),
    ("log.cleaner.enable", "true"),
    ("log.cleaner.backoff.ms", "15000"),
    ("log.cleaner.dedupe.buffer.size", "134217728"),
    ("log.cleaner.delete.retention.ms", "86400000"),
    ("log.cleaner.min.compaction.lag.ms", "0"),
    ("log.cleaner.max.compaction.lag.ms", "9223372036854775807"),
    ("log.cleaner.min.cleanable.ratio", "0.5"),
    ("log.segment.delete.delay.ms", "60000"),
    ("log.roll.jitter.ms", "0"),
    ("log.message.timestamp.before.max.ms", "9223372036854775807"),
    ("log.message.timestamp.after.max.ms", "3600000"),
    ("log.local.retention.ms", "-2"),
    ("log.local.retention.bytes", "-2"),
    ("log.retention.check.interval.ms", "300000"),
    ("log.flush.offset.checkpoint.interval.ms", "60000"),
    ("replica.high.watermark.checkpoint.interval.ms", "5000"),
    ("compression.gzip.level", "-1"),
    ("compression.lz4.level", "9"),
    ("compression.zstd.level", "3"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "3"),
    ("offsets.topic.segment.bytes", "104857600"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.max.size", "2147483647"),
    ("offset.metadata.max.bytes", "4096"),
    ("offsets.retention.minutes", "10080"),
    ("offsets.retention.check.interval.ms", "600000"),
    ("offsets.commit.timeout.ms", "5000"),
    ("group.consumer.session.timeout.ms", "45000"),
    ("group.consumer.heartbeat.interval.ms", "5000"),
    ("group.consumer.max.size", "2147483647"),
    ("group.consumer.assignors", "uniform,range"),
];

/// The typed configuration of one broker process.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listener: SocketAddr,
    /// Host and port that clients are told to connect to (Metadata, DescribeCluster).
    pub advertised_host: String,
    pub advertised_port: u16,
    pub log_dir: PathBuf,
    pub num_partitions: i32,
    pub auto_create_topics_enable: bool,
    pub socket_request_max_bytes: usize,
    /// Requests read from one connection but not yet answered (named after Kafka's
    /// broker-wide `queued.max.requests`; applied per connection here).
    pub queued_max_requests: usize,
    /// Every broker key with its value, defaults included (DescribeConfigs, topic defaults).
    pub values: ConfigMap,
    /// The keys set explicitly by the file or flags (DescribeConfigs reports their source).
    pub explicit: ConfigMap,
}

/// Flattens nested TOML tables into dotted keys: `[log] dirs = "x"` → `log.dirs = x`.
fn flatten(prefix: &str, value: &toml::Value, out: &mut ConfigMap) {
    match value {
        toml::Value::Table(table) => {
            for (key, inner) in table {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&name, inner, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        toml::Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect();
            out.insert(prefix.to_string(), parts.join(","));
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Reads a TOML config file into a flat map of Kafka keys.
pub fn read_file(path: &Path) -> Result<ConfigMap, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let value: toml::Value = text.parse().map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let mut map = ConfigMap::new();
    flatten("", &value, &mut map);
    Ok(map)
}

fn parse<T: std::str::FromStr>(values: &ConfigMap, key: &'static str) -> Result<T, ConfigError> {
    let raw = values.get(key).map(String::as_str).unwrap_or_default();
    raw.trim().parse().map_err(|_| ConfigError::Invalid {
        key,
        value: raw.to_string(),
    })
}

/// Parses `PLAINTEXT://host:port` or `host:port` into the host and port.
fn parse_listener(key: &'static str, raw: &str) -> Result<(String, u16), ConfigError> {
    let first = raw.split(',').next().unwrap_or_default().trim();
    let address = first.rsplit("://").next().unwrap_or(first);
    let invalid = || ConfigError::Invalid {
        key,
        value: raw.to_string(),
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(invalid)?;
    let port = port.parse().map_err(|_| invalid())?;
    Ok((
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
    ))
}

impl BrokerConfig {
    /// Builds the configuration from explicitly set keys on top of the defaults.
    pub fn from_map(explicit: ConfigMap) -> Result<Self, ConfigError> {
        let mut values: ConfigMap = BROKER_DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for key in explicit.keys() {
            if !values.contains_key(key) && !topic::is_topic_key(key) {
                tracing::warn!(key = %key, "unknown configuration key ignored");
            }
        }
        values.extend(explicit.clone());
        let (host, port) = parse_listener("listeners", &values["listeners"])?;
        let listener: SocketAddr = format!("{host}:{port}")
            .parse()
            .or_else(|_| format!("[{host}]:{port}").parse())
            .map_err(|_| ConfigError::Invalid {
                key: "listeners",
                value: host.clone(),
            })?;
        let advertised = match values["advertised.listeners"].as_str() {
            "" => (host, port),
            raw => parse_listener("advertised.listeners", raw)?,
        };
        let log_dir = values["log.dirs"]
            .split(',')
            .next()
            .unwrap_or("./data")
            .trim()
            .into();
        Ok(BrokerConfig {
            node_id: parse(&values, "node.id")?,
            listener,
            advertised_host: advertised.0,
            advertised_port: advertised.1,
            log_dir,
            num_partitions: parse(&values, "num.partitions")?,
            auto_create_topics_enable: parse(&values, "auto.create.topics.enable")?,
            socket_request_max_bytes: parse(&values, "socket.request.max.bytes")?,
            queued_max_requests: parse::<usize>(&values, "queued.max.requests")?.max(1),
            values,
            explicit,
        })
    }

    /// Parses the value of a broker key, naming the key when it is not valid.
    pub fn parse<T: std::str::FromStr>(&self, key: &'static str) -> Result<T, ConfigError> {
        parse(&self.values, key)
    }

    /// The value of a broker key (defaults included).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_tables_flatten_to_kafka_keys() {
        let value: toml::Value = "node.id = 3\n[log]\ndirs = \"/tmp/x\"\nsegment.bytes = 1024\n"
            .parse()
            .expect("toml");
        let mut map = ConfigMap::new();
        flatten("", &value, &mut map);
        assert_eq!(map["log.dirs"], "/tmp/x");
        assert_eq!(map["log.segment.bytes"], "1024");
        assert_eq!(map["node.id"], "3");
    }

    #[test]
    fn listener_accepts_kafka_and_plain_forms() {
        let mut map = ConfigMap::new();
        map.insert("listeners".into(), "PLAINTEXT://127.0.0.1:9999".into());
        let config = BrokerConfig::from_map(map).expect("config");
        assert_eq!(config.listener.port(), 9999);
        assert_eq!(config.advertised_host, "127.0.0.1");
    }

    #[test]
    fn a_bad_number_is_refused_with_its_key() {
        let mut map = ConfigMap::new();
        map.insert("num.partitions".into(), "many".into());
        let error = BrokerConfig::from_map(map).expect_err("must fail");
        assert!(error.to_string().contains("num.partitions"));
    }
}
