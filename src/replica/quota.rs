//! Replication throttles, as `kafka-reassign-partitions --throttle` sets them (KIP-73,
//! Kafka's ReplicationQuotaManager): a partition's replicas listed in the topic's
//! `leader.replication.throttled.replicas` (on the leader) or
//! `follower.replication.throttled.replicas` (on the follower), as `partition:broker`
//! entries or `*`, move at most the broker's `leader.replication.throttled.rate` /
//! `follower.replication.throttled.rate` bytes per second together while they are out of
//! the ISR (a replica in sync is never slowed, so the high watermark is not held back).
//!
//! The rate is measured as Kafka measures it: the bytes of the last [`WINDOWS`] one-second
//! windows over the time they cover. A quota exceeded leaves the throttled partitions out of
//! the next fetches until the rate falls below it again.
//!
//! Thread safety: each quota's windows sit behind a `std::sync::Mutex` held for one update.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

/// One-second windows a rate is measured over (Kafka's `replication.quota.window.num`).
pub const WINDOWS: usize = 11;
const WINDOW_MS: i64 = 1000;

/// Bytes moved by throttled replicas, per one-second window.
#[derive(Debug, Default)]
pub struct ReplicationQuota {
    /// (window start in ms, bytes), oldest first; at most [`WINDOWS`].
    windows: Mutex<VecDeque<(i64, u64)>>,
}

impl ReplicationQuota {
    /// Counts `bytes` moved at `now_ms`.
    pub fn record(&self, bytes: usize, now_ms: i64) {
        if bytes == 0 {
            return;
        }
        let start = now_ms - now_ms.rem_euclid(WINDOW_MS);
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        match windows.back_mut() {
            Some((at, total)) if *at == start => *total += bytes as u64,
            _ => windows.push_back((start, bytes as u64)),
        }
        while windows.len() > WINDOWS {
            windows.pop_front();
        }
    }

    /// Whether the bytes per second of the last windows are over `rate` (`None`: no
    /// throttle).
    pub fn is_exceeded(&self, rate: Option<u64>, now_ms: i64) -> bool {
        let Some(rate) = rate else {
            return false;
        };
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let oldest_kept = now_ms - WINDOWS as i64 * WINDOW_MS;
        while windows.front().is_some_and(|(at, _)| *at < oldest_kept) {
            windows.pop_front();
        }
        let Some((first, _)) = windows.front() else {
            return false;
        };
        let bytes: u64 = windows.iter().map(|(_, b)| b).sum();
        // The time covered: from the first window kept to now, at least one window.
        let elapsed_ms = (now_ms - first).max(WINDOW_MS) as u64;
        bytes.saturating_mul(1000) > rate.saturating_mul(elapsed_ms)
    }
}

/// The throttled rate a broker key sets, in bytes per second (`None` when unthrottled,
/// Kafka's default of `Long.MAX_VALUE`).
pub fn rate(config: &crate::config::BrokerConfig, key: &str) -> Option<u64> {
    config
        .get(key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|r| *r < i64::MAX as u64)
}

/// Whether a topic's throttled-replicas list (`partition:broker,…` or `*`) names replica
/// `broker` of `partition`.
pub fn names(list: &str, partition: i32, broker: i32) -> bool {
    list.split(',').map(str::trim).any(|entry| {
        entry == "*"
            || entry.split_once(':').is_some_and(|(p, b)| {
                p.trim().parse() == Ok(partition) && b.trim().parse() == Ok(broker)
            })
    })
}

/// The two quotas of a broker: what its throttled leaders send and what its throttled
/// followers fetch.
#[derive(Debug, Default)]
pub struct ReplicationQuotas {
    pub leader: ReplicationQuota,
    pub follower: ReplicationQuota,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_over_the_quota_is_exceeded_until_enough_time_passes() {
        let quota = ReplicationQuota::default();
        assert!(!quota.is_exceeded(Some(1000), 0), "nothing moved yet");
        quota.record(3000, 0);
        assert!(
            quota.is_exceeded(Some(1000), 500),
            "3000 B in the first second"
        );
        assert!(!quota.is_exceeded(None, 500), "unthrottled");
        assert!(quota.is_exceeded(Some(1000), 2500), "3000 B over 2.5 s");
        assert!(!quota.is_exceeded(Some(1000), 3000), "3000 B over 3 s");
        assert!(
            !quota.is_exceeded(Some(1000), 20_000),
            "the window slid past it"
        );
    }

    #[test]
    fn throttled_replica_lists_name_partition_and_broker() {
        assert!(names("0:1,0:2,1:3", 0, 2));
        assert!(!names("0:1,0:2,1:3", 1, 2));
        assert!(names("*", 7, 9));
        assert!(!names("", 0, 1));
        assert!(!names("garbage", 0, 1));
    }

    #[test]
    fn the_default_rate_is_no_throttle() {
        let base = crate::config::BrokerConfig::from_map(Default::default()).expect("config");
        let live = crate::config::LiveConfig::new(std::sync::Arc::new(base)).get();
        assert_eq!(rate(&live, "leader.replication.throttled.rate"), None);
    }
}
