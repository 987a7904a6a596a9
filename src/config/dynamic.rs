//! Dynamic broker configuration, as Kafka's DynamicBrokerConfig layers it: a broker key may
//! be set while the cluster runs, for one broker or as the cluster-wide default of every
//! broker, through IncrementalAlterConfigs or the legacy AlterConfigs
//! (`kafka-configs --alter --entity-type brokers`). The controller quorum keeps both layers
//! in the metadata log; every broker applies them to the keys it reads live.
//!
//! Precedence, highest first: this broker's dynamic value, the cluster-wide dynamic
//! default, the static value of the config file or flags, Kafka's default.
//!
//! Must not: accept a key highwater would store but not apply. `LIVE_KEYS` lists what
//! is applied live; a key Kafka reads only at start is refused with Kafka's words, and a
//! key highwater does not read at all is refused by name.

use std::sync::Arc;

use tokio::sync::watch;

use super::topic::{self, ConfigSource};
use super::{resolve_time_units, BrokerConfig, ConfigError, ConfigMap, BROKER_DEFAULTS};

/// How a dynamic key is applied, which decides how its value is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    /// The broker-wide default of a topic config (`log.retention.ms` for `retention.ms`):
    /// checked as that topic config is, and applied to every partition without an
    /// override of its own.
    TopicDefault,
    /// A count, a size or a time: an integer of at least the given value.
    AtLeast(i64),
    /// `max.connections.per.ip.overrides` (`ip:count,…`).
    ConnectionOverrides,
    /// `true` or `false`.
    Flag,
}

/// Every broker key highwater applies while running, with how. The topic defaults are the
/// broker synonyms of `config::topic::TOPIC_KEYS` and their coarser time units.
const LIVE_KEYS: &[(&str, Applied)] = &[
    ("follower.replication.throttled.rate", Applied::AtLeast(0)),
    ("leader.replication.throttled.rate", Applied::AtLeast(0)),
    ("log.cleaner.backoff.ms", Applied::AtLeast(0)),
    ("log.cleaner.dedupe.buffer.size", Applied::AtLeast(1)),
    ("log.cleaner.threads", Applied::AtLeast(1)),
    ("log.retention.hours", Applied::TopicDefault),
    ("log.retention.minutes", Applied::TopicDefault),
    ("log.roll.hours", Applied::TopicDefault),
    ("log.roll.jitter.hours", Applied::TopicDefault),
    ("max.connections", Applied::AtLeast(0)),
    ("max.connections.per.ip", Applied::AtLeast(0)),
    (
        "max.connections.per.ip.overrides",
        Applied::ConnectionOverrides,
    ),
    ("producer.id.expiration.ms", Applied::AtLeast(1)),
    (
        "replica.alter.log.dirs.io.max.bytes.per.second",
        Applied::AtLeast(0),
    ),
    ("transaction.partition.verification.enable", Applied::Flag),
];

/// Keys that exist only as dynamic configs (Kafka's broker quota configs): no static value,
/// and unlimited (`Long.MAX_VALUE` bytes per second) until set.
pub const DYNAMIC_ONLY_DEFAULTS: &[(&str, &str)] = &[
    ("follower.replication.throttled.rate", "9223372036854775807"),
    ("leader.replication.throttled.rate", "9223372036854775807"),
    (
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "9223372036854775807",
    ),
];

/// Whether `key` is a broker key highwater applies while running.
pub fn is_dynamic(key: &str) -> bool {
    applied(key).is_some()
}

fn applied(key: &str) -> Option<Applied> {
    LIVE_KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, a)| *a)
        .or_else(|| topic_synonym(key).map(|_| Applied::TopicDefault))
}

/// The topic config whose default `key` is (`retention.ms` for `log.retention.ms`).
fn topic_synonym(key: &str) -> Option<&'static str> {
    topic::TOPIC_KEYS
        .iter()
        .find(|k| k.broker_synonym == Some(key))
        .map(|k| k.name)
}

/// Why a dynamic broker config is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicConfigError {
    /// A key Kafka reads only at start (Kafka's words).
    #[error("Cannot update these configs dynamically: Set({key})")]
    ReadOnly { key: String },
    /// A key highwater does not read.
    #[error("Unknown broker config name: {key} (highwater does not read it)")]
    Unknown { key: String },
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidValue {
        key: String,
        value: String,
        reason: String,
    },
}

/// Checks one dynamic broker config: a key applied live with a valid value (`None`
/// removes the dynamic value, always allowed for a live key).
pub fn check(key: &str, value: Option<&str>) -> Result<(), DynamicConfigError> {
    let Some(how) = applied(key) else {
        let known = BROKER_DEFAULTS.iter().any(|(k, _)| *k == key)
            || super::tls::TLS_DEFAULTS.iter().any(|(k, _)| *k == key);
        return Err(match known {
            true => DynamicConfigError::ReadOnly { key: key.into() },
            false => DynamicConfigError::Unknown { key: key.into() },
        });
    };
    let Some(value) = value else {
        return Ok(());
    };
    let invalid = |reason: String| DynamicConfigError::InvalidValue {
        key: key.into(),
        value: value.into(),
        reason,
    };
    match how {
        Applied::TopicDefault => {
            let (name, value) = match topic_synonym(key) {
                Some(name) => (name, value.to_string()),
                None => (coarse_time_synonym(key), coarse_to_ms(key, value)?),
            };
            let map = ConfigMap::from([(name.to_string(), value)]);
            topic::validate(&map).map_err(|e| match e {
                ConfigError::InvalidTopicConfig { reason, .. } => invalid(reason),
                other => invalid(other.to_string()),
            })
        }
        Applied::AtLeast(min) => match value.trim().parse::<i64>() {
            Ok(n) if n >= min => Ok(()),
            Ok(_) => Err(invalid(format!("Value must be at least {min}"))),
            Err(_) => Err(invalid("Not a number of type LONG".into())),
        },
        Applied::Flag => match value.trim() {
            "true" | "false" => Ok(()),
            _ => Err(invalid("Expected value to be either true or false".into())),
        },
        Applied::ConnectionOverrides => {
            let mut values = BrokerConfig::defaults();
            values.insert(key.into(), value.into());
            super::connections::connection_limits(&values)
                .map(|_| ())
                .map_err(|e| invalid(e.to_string()))
        }
    }
}

/// The topic config a coarse time key stands for (`retention.ms` for
/// `log.retention.hours`).
fn coarse_time_synonym(key: &str) -> &'static str {
    match key {
        "log.retention.hours" | "log.retention.minutes" => "retention.ms",
        "log.roll.jitter.hours" => "segment.jitter.ms",
        _ => "segment.ms",
    }
}

/// A coarse time value in milliseconds, as a topic config takes it.
fn coarse_to_ms(key: &str, value: &str) -> Result<String, DynamicConfigError> {
    let mut layer = ConfigMap::from([(key.to_string(), value.to_string())]);
    resolve_time_units(&mut layer).map_err(|_| DynamicConfigError::InvalidValue {
        key: key.into(),
        value: value.into(),
        reason: "Not a number of type LONG".into(),
    })?;
    let ms_key = match coarse_time_synonym(key) {
        "retention.ms" => "log.retention.ms",
        "segment.jitter.ms" => "log.roll.jitter.ms",
        _ => "log.roll.ms",
    };
    Ok(layer.get(ms_key).cloned().unwrap_or_default())
}

/// The two dynamic layers of one broker: its own values and the cluster-wide defaults.
#[derive(Debug, Clone, Copy)]
pub struct Layers<'a> {
    pub own: &'a ConfigMap,
    pub cluster_default: &'a ConfigMap,
}

impl Layers<'_> {
    /// Where the value of broker key `key` comes from and what it is, highest precedence
    /// first (Kafka's synonyms of DescribeConfigs): every layer that sets it.
    pub fn synonyms(&self, base: &BrokerConfig, key: &str) -> Vec<(ConfigSource, String)> {
        let mut found = Vec::new();
        let layers = [
            (self.own, ConfigSource::DynamicBrokerConfig),
            (
                self.cluster_default,
                ConfigSource::DynamicDefaultBrokerConfig,
            ),
            (&base.explicit, ConfigSource::StaticBrokerConfig),
        ];
        for (layer, source) in layers {
            if let Some(value) = layer.get(key) {
                found.push((source, value.clone()));
            }
        }
        // A dynamic-only key (a replication throttle) has no default synonym, as in Kafka.
        let default = BROKER_DEFAULTS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| (*v).to_string())
            .or_else(|| base.values.get(key).cloned());
        if let Some(value) = default {
            found.push((ConfigSource::DefaultConfig, value));
        }
        found
    }
}

impl BrokerConfig {
    /// Every key's default, as a map (what a config file that sets nothing gives).
    fn defaults() -> ConfigMap {
        BROKER_DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// This configuration with the dynamic `layers` applied: each live key set dynamically
    /// takes the dynamic value (this broker's before the cluster default); static keys
    /// keep theirs. A coarse time key set dynamically (`log.retention.hours`) sets its
    /// milliseconds key in its layer unless that layer sets the milliseconds key too.
    pub fn with_dynamic(&self, layers: Layers<'_>) -> Result<BrokerConfig, ConfigError> {
        let mut config = self.clone();
        for (key, value) in DYNAMIC_ONLY_DEFAULTS {
            config
                .values
                .entry((*key).to_string())
                .or_insert_with(|| (*value).to_string());
        }
        for layer in [layers.cluster_default, layers.own] {
            let mut layer = layer.clone();
            layer.retain(|k, _| is_dynamic(k));
            resolve_time_units(&mut layer)?;
            config.values.extend(layer);
        }
        config.connection_limits = super::connections::connection_limits(&config.values)?;
        Ok(config)
    }
}

/// The broker configuration in force, changed by dynamic configs while the broker runs.
/// Readers take the current one (`get`); whoever must act on a change (the connection
/// limits of the listeners) subscribes.
#[derive(Debug)]
pub struct LiveConfig {
    base: Arc<BrokerConfig>,
    current: watch::Sender<Arc<BrokerConfig>>,
}

impl LiveConfig {
    /// The static configuration, before any dynamic value is known.
    pub fn new(base: Arc<BrokerConfig>) -> Self {
        let empty = ConfigMap::new();
        let none = Layers {
            own: &empty,
            cluster_default: &empty,
        };
        // With no layer nothing can fail: only the dynamic-only defaults are added.
        let start = base
            .with_dynamic(none)
            .map_or_else(|_| Arc::clone(&base), Arc::new);
        let (current, _) = watch::channel(start);
        LiveConfig { base, current }
    }

    /// The configuration in force now.
    pub fn get(&self) -> Arc<BrokerConfig> {
        Arc::clone(&self.current.borrow())
    }

    /// The configuration as started, without dynamic values.
    pub fn base(&self) -> &Arc<BrokerConfig> {
        &self.base
    }

    /// Changes of the configuration in force.
    pub fn subscribe(&self) -> watch::Receiver<Arc<BrokerConfig>> {
        self.current.subscribe()
    }

    /// Applies `layers`; returns whether any value in force changed. Layers that cannot be
    /// applied (the controller checked every value, so only a newer broker's key could do
    /// that) leave the configuration as it was, logged.
    pub fn update(&self, layers: Layers<'_>) -> bool {
        let next = match self.base.with_dynamic(layers) {
            Ok(next) => next,
            Err(error) => {
                tracing::error!(%error, "dynamic broker configs not applied");
                return false;
            }
        };
        self.current.send_if_modified(|current| {
            let changed = current.values != next.values;
            if changed {
                for (key, value) in &next.values {
                    if current.values.get(key) != Some(value) {
                        tracing::info!(key = %key, value = %value, "dynamic broker config applied");
                    }
                }
                *current = Arc::new(next);
            }
            changed
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn live_keys_pass_static_and_unknown_keys_are_refused_by_name() {
        assert_eq!(check("log.retention.ms", Some("1000")), Ok(()));
        assert_eq!(check("log.retention.hours", Some("2")), Ok(()));
        assert_eq!(check("message.max.bytes", Some("2000000")), Ok(()));
        assert_eq!(
            check("leader.replication.throttled.rate", Some("100")),
            Ok(())
        );
        assert_eq!(
            check("log.dirs", None),
            Err(DynamicConfigError::ReadOnly {
                key: "log.dirs".into()
            })
        );
        assert!(matches!(
            check("num.io.threads", Some("8")),
            Err(DynamicConfigError::Unknown { .. })
        ));
        let error = check("log.segment.bytes", Some("10")).expect_err("below 1 MiB");
        assert!(error.to_string().contains("log.segment.bytes"), "{error}");
        assert!(check("max.connections", Some("-1")).is_err());
        assert!(check("max.connections.per.ip.overrides", Some("nohost")).is_err());
        assert!(check("log.retention.hours", Some("many")).is_err());
    }

    #[test]
    fn a_broker_value_beats_the_cluster_default_which_beats_the_file() {
        let base = BrokerConfig::from_map(map(&[("log.retention.ms", "5")])).expect("config");
        let own = map(&[("message.max.bytes", "3")]);
        let cluster_default = map(&[("message.max.bytes", "2"), ("log.retention.hours", "1")]);
        let layers = Layers {
            own: &own,
            cluster_default: &cluster_default,
        };
        let live = base.with_dynamic(layers).expect("applies");
        assert_eq!(live.get("message.max.bytes"), Some("3"));
        assert_eq!(live.get("log.retention.ms"), Some("3600000"));
        assert_eq!(
            live.get("leader.replication.throttled.rate"),
            Some("9223372036854775807")
        );
        let rate = "leader.replication.throttled.rate";
        assert!(
            layers.synonyms(&base, rate).is_empty(),
            "no default synonym"
        );
        let sources: Vec<ConfigSource> = layers
            .synonyms(&base, "message.max.bytes")
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(
            sources,
            [
                ConfigSource::DynamicBrokerConfig,
                ConfigSource::DynamicDefaultBrokerConfig,
                ConfigSource::DefaultConfig
            ]
        );
    }

    #[test]
    fn a_live_config_tells_its_subscribers_only_of_real_changes() {
        let base = Arc::new(BrokerConfig::from_map(ConfigMap::new()).expect("config"));
        let live = LiveConfig::new(base);
        let mut changes = live.subscribe();
        let empty = ConfigMap::new();
        let set = map(&[("max.connections", "7")]);
        let layers = |own| Layers {
            own,
            cluster_default: &empty,
        };
        assert!(live.update(layers(&set)));
        assert!(changes.has_changed().expect("open"));
        changes.mark_unchanged();
        assert_eq!(live.get().connection_limits.connections_max, 7);
        assert!(!live.update(layers(&set)), "the same values");
        assert!(!changes.has_changed().expect("open"));
        assert!(live.update(layers(&empty)));
        assert_eq!(live.get().get("max.connections"), Some("2147483647"));
    }
}
