//! Feature levels (KIP-584, KIP-778): the features this broker implements with the range
//! of levels it supports, and the level the cluster finalized for each, as ApiVersions
//! reports them and UpdateFeatures changes them. Clients choose protocol paths by the
//! finalized levels (Java and franz-go producers run KIP-890 part 2 transactions only at
//! `transaction.version` 2).
//!
//! A level is finalized by a record in the metadata log; a feature no record names is at
//! its default level (what a new cluster starts with). Pure: no state of its own.

use std::collections::BTreeMap;

/// One feature: its name and the levels this broker supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub min_level: i16,
    pub max_level: i16,
    /// The level of a cluster that finalized none.
    pub default_level: i16,
}

/// `metadata.version` 27 is 4.1-IV1: the records and RPCs of Apache Kafka 4.1, the only
/// metadata version spoken here.
pub const METADATA_VERSION: &str = "metadata.version";
/// KIP-890 part 2 (a new producer epoch for every transaction) from level 2.
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// KIP-848 consumer groups from level 1.
pub const GROUP_VERSION: &str = "group.version";

/// Every feature served, by name. `kraft.version` 0: a static voter set (no KIP-853);
/// `eligible.leader.replicas.version` 1: KIP-966 is always on here.
pub const FEATURES: &[Feature] = &[
    Feature {
        name: "eligible.leader.replicas.version",
        min_level: 1,
        max_level: 1,
        default_level: 1,
    },
    Feature {
        name: GROUP_VERSION,
        min_level: 0,
        max_level: 1,
        default_level: 1,
    },
    Feature {
        name: "kraft.version",
        min_level: 0,
        max_level: 0,
        default_level: 0,
    },
    Feature {
        name: METADATA_VERSION,
        min_level: 27,
        max_level: 27,
        default_level: 27,
    },
    Feature {
        name: TRANSACTION_VERSION,
        min_level: 0,
        max_level: 2,
        default_level: 2,
    },
];

/// The feature called `name`, if served.
pub fn feature(name: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.name == name)
}

/// The finalized level of every served feature: `set` (the levels records finalized) over
/// the defaults.
pub fn finalized(set: &BTreeMap<String, i16>) -> BTreeMap<String, i16> {
    FEATURES
        .iter()
        .map(|f| {
            let level = set.get(f.name).copied().unwrap_or(f.default_level);
            (f.name.to_string(), level)
        })
        .collect()
}

/// How an update may move a level (UpdateFeatures' `UpgradeType`; v0's `AllowDowngrade`
/// is a safe downgrade).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    /// The type of wire code `code` (1, 2, 3), if known.
    pub fn from_code(code: i8) -> Option<UpgradeType> {
        match code {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// Checks moving `name` from `current` to `level` as Kafka's controller does; the error
/// is the reason, worded as Kafka words it.
pub fn check_update(
    node_id: i32,
    name: &str,
    level: i16,
    upgrade: UpgradeType,
    current: i16,
) -> Result<(), String> {
    let invalid = |reason: String| {
        Err(format!(
            "Invalid update version {level} for feature {name}. {reason}"
        ))
    };
    if level < 0 {
        return invalid("A feature version cannot be less than 0.".into());
    }
    let (min, max) = feature(name).map_or((0, 0), |f| (f.min_level, f.max_level));
    if level < min || level > max {
        return match max {
            0 if min == 0 => invalid(format!(
                "Local controller {node_id} does not support this feature."
            )),
            _ => invalid(format!(
                "Local controller {node_id} only supports versions {min}-{max}"
            )),
        };
    }
    if level < current && upgrade == UpgradeType::Upgrade {
        return invalid(
            "Can't downgrade the version of this feature without setting the upgrade type \
             to either safe or unsafe downgrade."
                .into(),
        );
    }
    if level > current && upgrade != UpgradeType::Upgrade {
        return invalid("Can't downgrade to a newer version.".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_without_records_is_at_the_defaults() {
        let levels = finalized(&BTreeMap::new());
        assert_eq!(levels.get(TRANSACTION_VERSION), Some(&2));
        assert_eq!(levels.get(METADATA_VERSION), Some(&27));
        let set = BTreeMap::from([(TRANSACTION_VERSION.to_string(), 1)]);
        assert_eq!(finalized(&set).get(TRANSACTION_VERSION), Some(&1));
    }

    #[test]
    fn updates_are_checked_as_kafkas_controller_checks_them() {
        let tv = TRANSACTION_VERSION;
        assert_eq!(
            check_update(1, tv, 0, UpgradeType::SafeDowngrade, 1),
            Ok(())
        );
        assert_eq!(check_update(1, tv, 1, UpgradeType::Upgrade, 0), Ok(()));
        assert_eq!(check_update(1, tv, 1, UpgradeType::Upgrade, 1), Ok(()));
        let downgrade = check_update(1, tv, 0, UpgradeType::Upgrade, 1).expect_err("refused");
        assert!(
            downgrade.contains("without setting the upgrade type"),
            "{downgrade}"
        );
        let upgrade = check_update(1, tv, 1, UpgradeType::SafeDowngrade, 0).expect_err("refused");
        assert!(upgrade.contains("newer version"), "{upgrade}");
        let range = check_update(3, tv, 3, UpgradeType::Upgrade, 2).expect_err("refused");
        assert_eq!(
            range,
            "Invalid update version 3 for feature transaction.version. \
             Local controller 3 only supports versions 0-2"
        );
        let unknown =
            check_update(1, "share.version", 1, UpgradeType::Upgrade, 0).expect_err("refused");
        assert!(
            unknown.ends_with("does not support this feature."),
            "{unknown}"
        );
        let metadata = check_update(1, METADATA_VERSION, 26, UpgradeType::UnsafeDowngrade, 27);
        assert!(metadata.is_err(), "one metadata version only");
    }
}
