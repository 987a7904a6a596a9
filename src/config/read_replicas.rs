//! `replica.selector.class` (KIP-392): which replica a partition's leader sends a consumer
//! to read from. Kafka's two selectors are understood; any other class is refused at start,
//! since highwater cannot load a plug-in and silently reading from leaders only would
//! defeat what the operator asked for.

use super::error::ConfigError;
use super::ConfigMap;

/// Kafka's default: consumers read from the leader.
const LEADER_SELECTOR: &str = "org.apache.kafka.common.replica.LeaderSelector";
/// A replica in the consumer's rack (`client.rack`), the leader when it is there.
const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// Whether `replica.selector.class` asks for rack-aware reads.
pub fn rack_aware(values: &ConfigMap) -> Result<bool, ConfigError> {
    let key = "replica.selector.class";
    let value = values.get(key).map_or("", |v| v.trim());
    match value {
        "" | LEADER_SELECTOR => Ok(false),
        RACK_AWARE_SELECTOR => Ok(true),
        other => Err(ConfigError::Conflict {
            key,
            value: other.to_string(),
            reason: format!("highwater implements {LEADER_SELECTOR} and {RACK_AWARE_SELECTOR}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> ConfigMap {
        [("replica.selector.class".to_string(), value.to_string())].into()
    }

    #[test]
    fn kafkas_two_selectors_are_understood_and_any_other_class_refused() {
        assert!(!rack_aware(&ConfigMap::new()).expect("unset"));
        assert!(!rack_aware(&with(LEADER_SELECTOR)).expect("leader"));
        assert!(rack_aware(&with(RACK_AWARE_SELECTOR)).expect("rack aware"));
        let refused = rack_aware(&with("com.example.MySelector")).expect_err("a plug-in");
        assert!(
            refused.to_string().contains("com.example.MySelector"),
            "{refused}"
        );
    }
}
