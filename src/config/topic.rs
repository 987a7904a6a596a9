//! Topic-level configuration (LogConfig in Apache Kafka): every key a topic has, the broker
//! key that supplies its default, and its type. Used to validate CreateTopics configs, to
//! answer DescribeConfigs with every config and its source, and to size a partition's log.

use super::dynamic::Layers;
use super::{BrokerConfig, ConfigError, ConfigMap};

/// The type of a config value, with the numeric code DescribeConfigs v3+ reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
    /// A secret: described without its value.
    Password = 9,
}

/// Where a config value comes from, with DescribeConfigs' source codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    TopicConfig = 1,
    /// A dynamic config of this broker alone.
    DynamicBrokerConfig = 2,
    /// A dynamic config of every broker (the cluster-wide default).
    DynamicDefaultBrokerConfig = 3,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
    /// A broker logger's level (BROKER_LOGGER resources).
    DynamicBrokerLoggerConfig = 6,
    /// A group's own config (GROUP resources, KIP-848).
    GroupConfig = 8,
}

/// One topic config key: its broker-level synonym (which supplies the default) and type.
#[derive(Debug, Clone, Copy)]
pub struct TopicKey {
    pub name: &'static str,
    pub broker_synonym: Option<&'static str>,
    pub fallback: &'static str,
    pub config_type: ConfigType,
}

const fn key(
    name: &'static str,
    broker_synonym: Option<&'static str>,
    fallback: &'static str,
    config_type: ConfigType,
) -> TopicKey {
    TopicKey {
        name,
        broker_synonym,
        fallback,
        config_type,
    }
}

use ConfigType::{Boolean, Double, Int, List, Long, String as Str};

/// Every topic config, sorted by name, as Apache Kafka 4.x lists them.
pub const TOPIC_KEYS: &[TopicKey] = &[
    key("cleanup.policy", Some("log.cleanup.policy"), "delete", List),
    key(
        "compression.gzip.level",
        Some("compression.gzip.level"),
        "-1",
        Int,
    ),
    key(
        "compression.lz4.level",
        Some("compression.lz4.level"),
        "9",
        Int,
    ),
    key(
        "compression.type",
        Some("compression.type"),
        "producer",
        Str,
    ),
    key(
        "compression.zstd.level",
        Some("compression.zstd.level"),
        "3",
        Int,
    ),
    key(
        "delete.retention.ms",
        Some("log.cleaner.delete.retention.ms"),
        "86400000",
        Long,
    ),
    key(
        "file.delete.delay.ms",
        Some("log.segment.delete.delay.ms"),
        "60000",
        Long,
    ),
    key(
        "flush.messages",
        Some("log.flush.interval.messages"),
        "9223372036854775807",
        Long,
    ),
    key(
        "flush.ms",
        Some("log.flush.interval.ms"),
        "9223372036854775807",
        Long,
    ),
    key("follower.replication.throttled.replicas", None, "", List),
    key(
        "index.interval.bytes",
        Some("log.index.interval.bytes"),
        "4096",
        Int,
    ),
    key("leader.replication.throttled.replicas", None, "", List),
    key(
        "local.retention.bytes",
        Some("log.local.retention.bytes"),
        "-2",
        Long,
    ),
    key(
        "local.retention.ms",
        Some("log.local.retention.ms"),
        "-2",
        Long,
    ),
    key(
        "max.compaction.lag.ms",
        Some("log.cleaner.max.compaction.lag.ms"),
        "9223372036854775807",
        Long,
    ),
    key(
        "max.message.bytes",
        Some("message.max.bytes"),
        "1048588",
        Int,
    ),
    key(
        "message.timestamp.after.max.ms",
        Some("log.message.timestamp.after.max.ms"),
        "3600000",
        Long,
    ),
    key(
        "message.timestamp.before.max.ms",
        Some("log.message.timestamp.before.max.ms"),
        "9223372036854775807",
        Long,
    ),
    key(
        "message.timestamp.type",
        Some("log.message.timestamp.type"),
        "CreateTime",
        Str,
    ),
    key(
        "min.cleanable.dirty.ratio",
        Some("log.cleaner.min.cleanable.ratio"),
        "0.5",
        Double,
    ),
    key(
        "min.compaction.lag.ms",
        Some("log.cleaner.min.compaction.lag.ms"),
        "0",
        Long,
    ),
    key("min.insync.replicas", Some("min.insync.replicas"), "1", Int),
    key("preallocate", Some("log.preallocate"), "false", Boolean),
    key("remote.storage.enable", None, "false", Boolean),
    key("retention.bytes", Some("log.retention.bytes"), "-1", Long),
    key("retention.ms", Some("log.retention.ms"), "604800000", Long),
    key(
        "segment.bytes",
        Some("log.segment.bytes"),
        "1073741824",
        Int,
    ),
    key(
        "segment.index.bytes",
        Some("log.index.size.max.bytes"),
        "10485760",
        Int,
    ),
    key("segment.jitter.ms", Some("log.roll.jitter.ms"), "0", Long),
    key("segment.ms", Some("log.roll.ms"), "604800000", Long),
    key(
        "unclean.leader.election.enable",
        Some("unclean.leader.election.enable"),
        "false",
        Boolean,
    ),
];

/// Whether `name` is a topic config key.
pub fn is_topic_key(name: &str) -> bool {
    TOPIC_KEYS.iter().any(|k| k.name == name)
}

fn find(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}

/// The values a string config takes, in the order Kafka's error message lists them.
fn allowed(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "cleanup.policy" => &["compact", "delete"],
        "message.timestamp.type" => &["CreateTime", "LogAppendTime"],
        "compression.type" => &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        _ => return None,
    })
}

/// The offending value (a list's bad element) and why it is not one of `key`'s values, in
/// Kafka's ConfigDef words.
fn type_error(key: &TopicKey, value: &str) -> Option<(String, String)> {
    let v = value.trim();
    let reason = match key.config_type {
        Boolean if v != "true" && v != "false" => "Expected value to be either true or false",
        Int if v.parse::<i32>().is_err() => "Not a number of type INT",
        Long if v.parse::<i64>().is_err() => "Not a number of type LONG",
        Double if v.parse::<f64>().is_err() => "Not a number of type DOUBLE",
        Str | List => {
            let allowed = allowed(key.name)?;
            let mut items = match key.config_type {
                List => v
                    .split(',')
                    .map(str::trim)
                    .filter(|i| !i.is_empty())
                    .collect(),
                _ => vec![v],
            };
            items.retain(|i| !allowed.contains(i));
            let bad = items.first()?;
            let reason = format!("String must be one of: {}", allowed.join(", "));
            return Some((bad.to_string(), reason));
        }
        _ => return None,
    };
    Some((v.to_string(), reason.to_string()))
}

/// The range of a numeric topic config in Kafka 4.1's LogConfig (inclusive; None for no
/// bound).
fn bounds(name: &str) -> Option<(f64, Option<f64>)> {
    Some(match name {
        "segment.bytes" => (1_048_576.0, None),
        "segment.ms" | "flush.messages" | "max.compaction.lag.ms" | "min.insync.replicas" => {
            (1.0, None)
        }
        "segment.index.bytes" => (4.0, None),
        "retention.ms" => (-1.0, None),
        "local.retention.ms" | "local.retention.bytes" => (-2.0, None),
        "min.cleanable.dirty.ratio" => (0.0, Some(1.0)),
        "segment.jitter.ms"
        | "flush.ms"
        | "max.message.bytes"
        | "index.interval.bytes"
        | "delete.retention.ms"
        | "min.compaction.lag.ms"
        | "file.delete.delay.ms"
        | "message.timestamp.before.max.ms"
        | "message.timestamp.after.max.ms" => (0.0, None),
        _ => return None,
    })
}

/// A number as Java prints it: `2.0` for a double, `1000` for an integer.
fn java_number(key: &TopicKey, number: f64) -> String {
    match key.config_type {
        Double if number.fract() == 0.0 => format!("{number:.1}"),
        _ => format!("{number}"),
    }
}

/// Checks topic config overrides: known keys, well-typed values within Kafka's ranges,
/// refused with Kafka's ConfigException text.
pub fn validate(overrides: &ConfigMap) -> Result<(), ConfigError> {
    for (name, value) in overrides {
        let key =
            find(name).ok_or_else(|| ConfigError::UnknownTopicConfig { key: name.clone() })?;
        let invalid = |shown: String, reason: String| ConfigError::InvalidTopicConfig {
            key: name.clone(),
            value: shown,
            reason,
        };
        if let Some((shown, reason)) = type_error(key, value) {
            return Err(invalid(shown, reason));
        }
        let (Some((min, max)), Ok(number)) = (bounds(name), value.trim().parse::<f64>()) else {
            continue;
        };
        let bound = |b: f64| {
            java_number(
                &TopicKey {
                    config_type: Long,
                    ..*key
                },
                b,
            )
        };
        if number < min {
            return Err(invalid(
                java_number(key, number),
                format!("Value must be at least {}", bound(min)),
            ));
        }
        if let Some(max) = max.filter(|max| number > *max) {
            return Err(invalid(
                java_number(key, number),
                format!("Value must be no more than {}", bound(max)),
            ));
        }
    }
    Ok(())
}

/// One resolved topic config entry.
#[derive(Debug, Clone)]
pub struct ResolvedConfig {
    pub key: &'static TopicKey,
    pub value: String,
    pub source: ConfigSource,
    /// Where else the value could come from, highest precedence first (DescribeConfigs'
    /// synonyms): the topic's override, then the broker key's layers, each with its name.
    pub synonyms: Vec<(String, String, ConfigSource)>,
}

/// Every topic config of a topic with `overrides`, with its value, source and synonyms:
/// the override, else the broker key (this broker's dynamic value, the cluster-wide one,
/// the static one, the default: `broker`'s `layers`), else Kafka's default.
pub fn resolve(
    broker: &BrokerConfig,
    layers: Layers<'_>,
    overrides: &ConfigMap,
) -> Vec<ResolvedConfig> {
    TOPIC_KEYS
        .iter()
        .map(|key| {
            let mut synonyms = Vec::new();
            if let Some(value) = overrides.get(key.name) {
                synonyms.push((
                    key.name.to_string(),
                    value.clone(),
                    ConfigSource::TopicConfig,
                ));
            }
            if let Some(broker_key) = key.broker_synonym {
                let from_broker = layers.synonyms(broker, broker_key).into_iter();
                synonyms.extend(from_broker.map(|(s, v)| (broker_key.to_string(), v, s)));
            }
            let (value, source) = synonyms.first().map_or_else(
                || (key.fallback.to_string(), ConfigSource::DefaultConfig),
                |(_, value, source)| (value.clone(), *source),
            );
            ResolvedConfig {
                key,
                value,
                source,
                synonyms,
            }
        })
        .collect()
}

/// The resolved value of one topic config: the topic's override, else the broker key,
/// else Kafka's default.
pub fn value<'a>(broker: &'a BrokerConfig, overrides: &'a ConfigMap, name: &str) -> &'a str {
    let key = find(name);
    overrides
        .get(name)
        .map(String::as_str)
        .or_else(|| {
            key.and_then(|k| k.broker_synonym)
                .and_then(|s| broker.get(s))
        })
        .or(key.map(|k| k.fallback))
        .unwrap_or("0")
}

/// The resolved value of one topic config, parsed as a number.
pub fn number(broker: &BrokerConfig, overrides: &ConfigMap, name: &str) -> i64 {
    value(broker, overrides, name).trim().parse().unwrap_or(0)
}

/// The resolved value of one topic config, parsed as a floating-point number.
pub fn fraction(broker: &BrokerConfig, overrides: &ConfigMap, name: &str) -> f64 {
    value(broker, overrides, name).trim().parse().unwrap_or(0.0)
}

/// Whether the resolved `cleanup.policy` holds `policy` (`delete` or `compact`).
pub fn has_cleanup_policy(broker: &BrokerConfig, overrides: &ConfigMap, policy: &str) -> bool {
    value(broker, overrides, "cleanup.policy")
        .split(',')
        .any(|p| p.trim() == policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sorted_and_unique() {
        for pair in TOPIC_KEYS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    #[test]
    fn validate_refuses_unknown_keys_and_bad_values() {
        let mut map = ConfigMap::new();
        map.insert("retention.ms".into(), "abc".into());
        assert!(validate(&map).is_err());
        let mut map = ConfigMap::new();
        map.insert("no.such.key".into(), "1".into());
        assert!(validate(&map).is_err());
        let mut map = ConfigMap::new();
        map.insert("cleanup.policy".into(), "compact,delete".into());
        assert!(validate(&map).is_ok());
    }

    #[test]
    fn resolve_reports_overrides_broker_values_and_defaults() {
        let mut explicit = ConfigMap::new();
        explicit.insert("log.retention.ms".into(), "1000".into());
        let broker = BrokerConfig::from_map(explicit).expect("config");
        let mut overrides = ConfigMap::new();
        overrides.insert("segment.bytes".into(), "2048".into());
        let own = ConfigMap::new();
        let cluster_default = ConfigMap::from([("max.message.bytes".into(), "7".into())]);
        let layers = Layers {
            own: &own,
            cluster_default: &cluster_default,
        };
        let resolved = resolve(&broker, layers, &overrides);
        let get = |n: &str| {
            resolved
                .iter()
                .find(|r| r.key.name == n)
                .expect("key")
                .clone()
        };
        assert_eq!(get("segment.bytes").source, ConfigSource::TopicConfig);
        assert_eq!(get("retention.ms").value, "1000");
        assert_eq!(get("retention.ms").source, ConfigSource::StaticBrokerConfig);
        assert_eq!(
            get("index.interval.bytes").source,
            ConfigSource::DefaultConfig
        );
        assert_eq!(
            get("max.message.bytes").value,
            "1048588",
            "not a dynamic key"
        );
        let retention = get("retention.ms").synonyms;
        assert_eq!(retention[0].0, "log.retention.ms");
        assert_eq!(
            retention.last().map(|s| s.2),
            Some(ConfigSource::DefaultConfig)
        );
    }

    #[test]
    fn hours_and_minutes_stand_for_milliseconds_as_in_kafka() {
        let retention = |keys: &[(&str, &str)]| {
            let explicit: ConfigMap = keys
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let broker = BrokerConfig::from_map(explicit).expect("config");
            value(&broker, &ConfigMap::new(), "retention.ms").to_string()
        };
        assert_eq!(retention(&[("log.retention.hours", "24")]), "86400000");
        let both = [
            ("log.retention.hours", "24"),
            ("log.retention.minutes", "5"),
        ];
        assert_eq!(retention(&both), "300000", "minutes before hours");
        let all = [("log.retention.ms", "7"), ("log.retention.minutes", "5")];
        assert_eq!(retention(&all), "7", "milliseconds first");
        assert_eq!(
            retention(&[("log.retention.hours", "-1")]),
            "-1",
            "no limit"
        );
        assert_eq!(retention(&[]), "604800000");
        let explicit: ConfigMap = [("log.roll.hours".to_string(), "1".to_string())].into();
        let broker = BrokerConfig::from_map(explicit).expect("config");
        assert_eq!(value(&broker, &ConfigMap::new(), "segment.ms"), "3600000");
    }
}
