//! The replication rules of one partition (the seed documents', as KIP-101 and KIP-966
//! state them), checked after every role change, append, truncation and high watermark
//! move, in release builds too (issue 11):
//! - log start offset <= high watermark <= log end offset, and LSO <= high watermark;
//! - a leader's high watermark never decreases while it leads, nor does the leader epoch;
//! - the epoch cache's epochs strictly increase and their start offsets do not decrease,
//!   none past the log end offset;
//! - as leader: the ISR is a subset of the replicas and holds the leader.
//!
//! A broken rule means the broker may hand out or acknowledge wrong data: it is logged
//! with the partition and the process stops (`panic = "abort"` in release builds).

use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

use super::partition::{Partition, Role};
use crate::ids::{LeaderEpoch, Offset};

/// What a partition remembers between two checks: the floor its leader's high watermark
/// may not go below, and the highest leader epoch seen.
#[derive(Debug)]
pub struct InvariantHistory {
    leader_high_watermark_floor: AtomicI64,
    leader_epoch_max: AtomicI32,
}

impl Default for InvariantHistory {
    fn default() -> Self {
        InvariantHistory {
            leader_high_watermark_floor: AtomicI64::new(-1),
            leader_epoch_max: AtomicI32::new(-1),
        }
    }
}

impl InvariantHistory {
    /// A new leadership starts its floor at the high watermark it takes over with.
    pub fn start_leading(&self, high_watermark: Offset) {
        self.leader_high_watermark_floor
            .store(high_watermark.0, Ordering::Release);
    }

    /// A follower has no floor: its high watermark follows the leader's, and truncation.
    pub fn stop_leading(&self) {
        self.leader_high_watermark_floor
            .store(-1, Ordering::Release);
    }
}

/// Stops the process: `rule` is broken on `partition`.
fn violated(partition: &Partition, rule: &str) -> ! {
    tracing::error!(partition = %partition.topic_partition, rule,
        "replication invariant violated: stopping");
    panic!(
        "{}: replication invariant violated: {rule}",
        partition.topic_partition
    )
}

fn require(partition: &Partition, holds: bool, rule: impl FnOnce() -> String) {
    if !holds {
        violated(partition, &rule());
    }
}

/// Checks every rule of `partition` (call with none of its locks held). The role is held
/// for the whole check, so that no role change (which resets the history) interleaves.
pub fn check(partition: &Partition, history: &InvariantHistory) {
    let state = partition.state();
    let (role, leader_epoch) = (&state.role, state.leader_epoch);
    let log = partition.log();
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let high_watermark = partition.high_watermark();
    let entries = log.epoch_cache().entries();
    let offsets = || format!("start {start}, HW {high_watermark}, LEO {end}");
    require(partition, start <= high_watermark, || {
        format!("log start <= HW ({})", offsets())
    });
    require(partition, high_watermark <= end, || {
        format!("HW <= LEO ({})", offsets())
    });
    let epoch_max = LeaderEpoch(
        history
            .leader_epoch_max
            .fetch_max(leader_epoch.0, Ordering::AcqRel),
    );
    require(partition, leader_epoch >= epoch_max, || {
        format!("leader epoch never decreases ({epoch_max} -> {leader_epoch})")
    });
    for pair in entries.windows(2) {
        require(partition, pair[0].epoch < pair[1].epoch, || {
            format!("epoch cache epochs increase ({:?})", entries)
        });
        require(
            partition,
            pair[0].start_offset <= pair[1].start_offset,
            || format!("epoch cache starts do not decrease ({:?})", entries),
        );
    }
    if let Some(last) = entries.last() {
        require(partition, last.start_offset <= end, || {
            format!("epoch cache within the log ({:?}, LEO {end})", entries)
        });
    }
    if let Role::Leader(leader) = role {
        let floor = Offset(
            history
                .leader_high_watermark_floor
                .fetch_max(high_watermark.0, Ordering::AcqRel),
        );
        require(partition, high_watermark >= floor, || {
            format!("a leader's HW never decreases ({floor} -> {high_watermark})")
        });
        require(partition, leader.isr.contains(&leader.local_id), || {
            format!(
                "the ISR {:?} holds the leader {}",
                leader.isr, leader.local_id
            )
        });
        require(
            partition,
            leader.isr.iter().all(|r| leader.replicas.contains(r)),
            || {
                format!(
                    "ISR {:?} within the replicas {:?}",
                    leader.isr, leader.replicas
                )
            },
        );
    }
    drop(log);
    drop(state);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::BrokerId;
    use crate::replica::roles::broker_ids;

    fn leader(dir: &std::path::Path) -> Partition {
        let partition = Partition::for_test(dir);
        partition
            .make_leader(
                BrokerId(1),
                LeaderEpoch(0),
                0,
                broker_ids(&[1, 2]),
                broker_ids(&[1, 2]),
            )
            .expect("leader");
        partition
    }

    /// Goal: the rules hold through ordinary use, and a broken one stops with the rule
    /// named. Method: a real leader; its remembered high watermark floor raised above the
    /// high watermark stands for a leader whose high watermark went back.
    #[test]
    fn a_leader_whose_high_watermark_went_back_stops_the_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let partition = leader(dir.path());
        let batch = crate::log::batch::tests::encode_batch(3, -1, -1, 0);
        partition.append_as_leader(&batch).expect("append");
        check(&partition, partition.invariant_history());
        partition.invariant_history().start_leading(Offset(5));
        let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(&partition, partition.invariant_history());
        }));
        let message = stopped.expect_err("a broken rule stops");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(text.contains("a leader's HW never decreases"), "{text}");
    }

    /// Goal: a leader epoch going back is caught. Method: the highest epoch seen is 7, the
    /// partition's is 0.
    #[test]
    fn a_leader_epoch_that_went_back_stops_the_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let partition = leader(dir.path());
        partition
            .invariant_history()
            .leader_epoch_max
            .store(7, Ordering::Release);
        let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(&partition, partition.invariant_history());
        }));
        assert!(stopped.is_err());
    }
}
