//! Group configs (KIP-848's GroupConfig): the keys a consumer group may set for itself
//! (`kafka-configs --alter --entity-type groups`), each defaulting to a broker key. A
//! group's own value beats the broker's for that group alone.
//!
//! Must not: accept a key that would change nothing here. Share and streams groups are not
//! served, so their keys are listed with their defaults (as Kafka lists them) but refused.

use super::topic::ConfigType;
use super::{BrokerConfig, ConfigMap};

/// One group config: the broker key its default comes from (else `fallback`), its type, and
/// the broker keys bounding it (`None`: not applied here, refused).
#[derive(Debug, Clone, Copy)]
pub struct GroupKey {
    pub name: &'static str,
    pub broker_key: Option<&'static str>,
    pub fallback: &'static str,
    pub config_type: ConfigType,
    bounds: Option<(&'static str, &'static str)>,
}

const fn key(
    name: &'static str,
    broker_key: Option<&'static str>,
    fallback: &'static str,
    config_type: ConfigType,
    bounds: Option<(&'static str, &'static str)>,
) -> GroupKey {
    GroupKey {
        name,
        broker_key,
        fallback,
        config_type,
        bounds,
    }
}

use ConfigType::{Int, String as Str};

/// Every group config of Kafka 4.1, sorted by name.
pub const GROUP_KEYS: &[GroupKey] = &[
    key(
        "consumer.heartbeat.interval.ms",
        Some("group.consumer.heartbeat.interval.ms"),
        "5000",
        Int,
        Some((
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        )),
    ),
    key(
        "consumer.session.timeout.ms",
        Some("group.consumer.session.timeout.ms"),
        "45000",
        Int,
        Some((
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        )),
    ),
    key("share.auto.offset.reset", None, "latest", Str, None),
    key("share.heartbeat.interval.ms", None, "5000", Int, None),
    key("share.isolation.level", None, "read_uncommitted", Str, None),
    key("share.record.lock.duration.ms", None, "30000", Int, None),
    key("share.session.timeout.ms", None, "45000", Int, None),
    key("streams.heartbeat.interval.ms", None, "5000", Int, None),
    key("streams.num.standby.replicas", None, "0", Int, None),
    key("streams.session.timeout.ms", None, "45000", Int, None),
];

impl GroupKey {
    /// The value a group without its own gets: the broker key's, else Kafka's default.
    pub fn default_value(&self, broker: &BrokerConfig) -> String {
        self.broker_key
            .and_then(|k| broker.get(k))
            .unwrap_or(self.fallback)
            .to_string()
    }
}

/// Checks a group's configs as they would be after a change: known keys applied here, with
/// integers within the broker's bounds (Kafka's GroupConfig rules); the reason in Kafka's
/// words otherwise.
pub fn validate(configs: &ConfigMap, broker: &BrokerConfig) -> Result<(), String> {
    for (name, value) in configs {
        let Some(key) = GROUP_KEYS.iter().find(|k| k.name == name) else {
            return Err(format!("Unknown group config name: {name}"));
        };
        let Some((min_key, max_key)) = key.bounds else {
            return Err(format!(
                "{name} configures share or streams groups, which highwater does not serve"
            ));
        };
        let number: i64 = value.trim().parse().map_err(|_| {
            format!("Invalid value {value} for configuration {name}: Not a number of type INT")
        })?;
        let bound = |k: &str| broker.get(k).and_then(|v| v.parse::<i64>().ok());
        // Kafka's words (GroupConfig), which name the bound's key but not its value.
        if bound(min_key).is_some_and(|min| number < min) {
            return Err(format!("{name} must be greater than or equal to {min_key}"));
        }
        if bound(max_key).is_some_and(|max| number > max) {
            return Err(format!("{name} must be less than or equal to {max_key}"));
        }
    }
    let number = |k: &str| configs.get(k).and_then(|v| v.trim().parse::<i64>().ok());
    let session = number("consumer.session.timeout.ms").or_else(|| {
        broker
            .get("group.consumer.session.timeout.ms")?
            .parse()
            .ok()
    });
    let heartbeat = number("consumer.heartbeat.interval.ms").or_else(|| {
        broker
            .get("group.consumer.heartbeat.interval.ms")?
            .parse()
            .ok()
    });
    if let (Some(session), Some(heartbeat)) = (session, heartbeat) {
        if heartbeat >= session {
            return Err(
                "consumer.heartbeat.interval.ms must be less than consumer.session.timeout.ms"
                    .into(),
            );
        }
    }
    Ok(())
}

/// Group `configs`' value of `name` as a number of milliseconds, if the group sets it.
pub fn millis(configs: &ConfigMap, name: &str) -> Option<i32> {
    configs.get(name).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_keys_are_bounded_by_the_broker_and_share_keys_refused() {
        let broker = BrokerConfig::from_map(ConfigMap::new()).expect("config");
        let set = |pairs: &[(&str, &str)]| -> ConfigMap {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            validate(&set(&[("consumer.session.timeout.ms", "50000")]), &broker),
            Ok(())
        );
        let low = validate(&set(&[("consumer.session.timeout.ms", "1000")]), &broker);
        assert!(low
            .expect_err("below min")
            .contains("group.consumer.min.session.timeout.ms"));
        assert!(validate(
            &set(&[("consumer.heartbeat.interval.ms", "99999")]),
            &broker
        )
        .is_err());
        assert!(validate(&set(&[("share.session.timeout.ms", "45000")]), &broker).is_err());
        assert!(validate(&set(&[("no.such.key", "1")]), &broker).is_err());
        assert!(validate(&set(&[("consumer.session.timeout.ms", "x")]), &broker).is_err());
        assert_eq!(
            millis(
                &set(&[("consumer.session.timeout.ms", "50000")]),
                "consumer.session.timeout.ms"
            ),
            Some(50000)
        );
    }
}
