//! What a partition's leader knows of its followers: each one's log end offset (learned
//! from the offsets it fetches from) and when it was last caught up, the ISR, and from them
//! the high watermark. Pure state, no I/O: the partition applies what this decides.
//!
//! Invariants: the leader is in the ISR; the ISR is a subset of the replicas; a proposed
//! ISR change is pending until the controller's metadata confirms it, and meanwhile the
//! high watermark counts the larger of the two sets ("maximal ISR", as Kafka does), so a
//! shrink never lets the high watermark pass a record a removed replica might still lead
//! with, and an expansion waits for the new member.

use std::collections::BTreeMap;

use super::read_replica::ReplicaView;
use crate::ids::{BrokerId, Offset};

/// One follower as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteReplica {
    /// The offset of its last fetch: everything below is on its log (-1: never fetched).
    pub log_end_offset: Offset,
    /// The last time its log end offset reached the leader's (ms).
    pub last_caught_up_ms: i64,
    /// The leader's log end offset at its previous fetch, and when that fetch came.
    last_fetch_leader_log_end_offset: Offset,
    last_fetch_ms: i64,
}

impl RemoteReplica {
    fn new(now_ms: i64) -> Self {
        RemoteReplica {
            log_end_offset: Offset::UNKNOWN,
            // A new leader gives every follower a full lag window before shrinking.
            last_caught_up_ms: now_ms,
            last_fetch_leader_log_end_offset: Offset::UNKNOWN,
            last_fetch_ms: now_ms,
        }
    }
}

/// The leader's view of its replicas.
#[derive(Debug, Clone)]
pub struct LeaderState {
    pub local_id: BrokerId,
    pub replicas: Vec<BrokerId>,
    /// The ISR as the controller last published it.
    pub isr: Vec<BrokerId>,
    /// An ISR change sent to the controller and not yet confirmed.
    pub pending_isr: Option<Vec<BrokerId>>,
    /// The leader's log end offset when it became leader: a follower joins the ISR only
    /// once it has everything up to here (and up to the high watermark).
    pub leader_epoch_start_offset: Offset,
    pub remotes: BTreeMap<BrokerId, RemoteReplica>,
}

impl LeaderState {
    /// The state of a new leader.
    pub fn new(
        local_id: BrokerId,
        replicas: Vec<BrokerId>,
        isr: Vec<BrokerId>,
        start: Offset,
        now_ms: i64,
    ) -> Self {
        let remotes = replicas
            .iter()
            .filter(|r| **r != local_id)
            .map(|r| (*r, RemoteReplica::new(now_ms)))
            .collect();
        LeaderState {
            local_id,
            replicas,
            isr,
            pending_isr: None,
            leader_epoch_start_offset: start,
            remotes,
        }
    }

    /// Takes new replicas and ISR from the controller at the same epoch: followers that
    /// stay keep what is known of them, new ones start unknown.
    pub fn update_replicas(&mut self, replicas: Vec<BrokerId>, isr: Vec<BrokerId>, now_ms: i64) {
        let local_id = self.local_id;
        self.remotes.retain(|r, _| replicas.contains(r));
        for replica in replicas.iter().filter(|r| **r != local_id) {
            self.remotes
                .entry(*replica)
                .or_insert_with(|| RemoteReplica::new(now_ms));
        }
        self.replicas = replicas;
        self.isr = isr;
        self.pending_isr = None;
    }

    /// The ISR the high watermark must respect: the committed ISR and any pending change
    /// (a replica in both comes twice, which no minimum minds). No allocation: it is read
    /// on every append and every follower fetch.
    fn maximal_isr(&self) -> impl Iterator<Item = BrokerId> + '_ {
        self.isr
            .iter()
            .chain(self.pending_isr.iter().flatten())
            .copied()
    }

    /// The ISR minimum.insync.replicas is checked against: the committed one, and a
    /// pending shrink counts already (as Kafka's `isrState.isr`).
    pub fn effective_isr_len(&self) -> usize {
        match &self.pending_isr {
            Some(pending) => pending.len().min(self.isr.len()),
            None => self.isr.len(),
        }
    }

    /// The in-sync followers that already hold `fetch_offset`: where a consumer may be
    /// sent to read it (KIP-392).
    pub fn read_candidates(&self, fetch_offset: Offset, now_ms: i64) -> Vec<ReplicaView> {
        self.remotes
            .iter()
            .filter(|(id, r)| self.isr.contains(id) && r.log_end_offset >= fetch_offset)
            .map(|(id, r)| ReplicaView {
                broker_id: *id,
                log_end_offset: r.log_end_offset,
                since_caught_up_ms: now_ms - r.last_caught_up_ms,
            })
            .collect()
    }

    /// Records a follower's fetch at `fetch_offset` (its log end offset); returns whether
    /// the follower is known.
    pub fn record_fetch(
        &mut self,
        replica: BrokerId,
        fetch_offset: Offset,
        leader_leo: Offset,
        now_ms: i64,
    ) -> bool {
        let Some(remote) = self.remotes.get_mut(&replica) else {
            return false;
        };
        if fetch_offset >= leader_leo {
            remote.last_caught_up_ms = now_ms;
        } else if fetch_offset >= remote.last_fetch_leader_log_end_offset {
            remote.last_caught_up_ms = remote.last_caught_up_ms.max(remote.last_fetch_ms);
        }
        remote.log_end_offset = fetch_offset;
        remote.last_fetch_leader_log_end_offset = leader_leo;
        remote.last_fetch_ms = now_ms;
        true
    }

    /// Credits a follower whose session rested until `until_ms` (see
    /// [`super::roles::FollowerFetch::rested_until_ms`]) with the fetches that were not
    /// read: each found it at `fetch_offset`, the leader's log end then. Only when the
    /// last fetch read left it there.
    pub fn record_rest(&mut self, replica: BrokerId, fetch_offset: Offset, until_ms: i64) {
        let rested = self.remotes.get(&replica).is_some_and(|remote| {
            remote.log_end_offset == fetch_offset && remote.last_fetch_ms < until_ms
        });
        if rested {
            self.record_fetch(replica, fetch_offset, fetch_offset, until_ms);
        }
    }

    /// The high watermark the ISR allows: the least log end offset over the maximal ISR
    /// (the leader's own included).
    pub fn high_watermark_bound(&self, leader_leo: Offset) -> Offset {
        self.maximal_isr()
            .map(|r| match r == self.local_id {
                true => leader_leo,
                false => self
                    .remotes
                    .get(&r)
                    .map_or(Offset::UNKNOWN, |remote| remote.log_end_offset),
            })
            .min()
            .unwrap_or(leader_leo)
    }

    /// A follower to add to the ISR: caught up to the high watermark and to the start of
    /// this leader's epoch, and not already in (or pending for) it.
    pub fn expansion_candidate(
        &self,
        replica: BrokerId,
        high_watermark: Offset,
    ) -> Option<Vec<BrokerId>> {
        if self.pending_isr.is_some() || self.isr.contains(&replica) {
            return None;
        }
        let remote = self.remotes.get(&replica)?;
        let caught_up = remote.log_end_offset >= high_watermark
            && remote.log_end_offset >= self.leader_epoch_start_offset;
        caught_up.then(|| {
            let mut isr = self.isr.clone();
            isr.push(replica);
            isr
        })
    }

    /// The ISR without the followers that have not caught up within `lag_max_ms`, when
    /// that removes anyone. A follower whose log ends where the leader's does
    /// (`leader_leo`) is caught up however long ago it fetched (Kafka's `isCaughtUp`): an
    /// idle partition's followers stay in the ISR, and a dead one leaves it once the
    /// leader appends.
    pub fn shrink_candidate(
        &self,
        now_ms: i64,
        lag_max_ms: i64,
        leader_leo: Offset,
    ) -> Option<Vec<BrokerId>> {
        if self.pending_isr.is_some() {
            return None;
        }
        let lagging = |r: &BrokerId| {
            *r != self.local_id
                && self.remotes.get(r).is_none_or(|remote| {
                    remote.log_end_offset != leader_leo
                        && now_ms - remote.last_caught_up_ms > lag_max_ms
                })
        };
        let kept: Vec<BrokerId> = self.isr.iter().copied().filter(|r| !lagging(r)).collect();
        (kept.len() < self.isr.len()).then_some(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::roles::broker_ids as ids;

    fn three() -> LeaderState {
        LeaderState::new(BrokerId(1), ids(&[1, 2, 3]), ids(&[1, 2, 3]), Offset(0), 0)
    }

    #[test]
    fn only_in_sync_followers_holding_the_offset_may_serve_a_consumer() {
        let mut state = three();
        assert!(
            state.read_candidates(Offset(0), 5).is_empty(),
            "not heard from yet"
        );
        state.record_fetch(BrokerId(2), Offset(7), Offset(10), 1);
        state.record_fetch(BrokerId(3), Offset(10), Offset(10), 4);
        let serving = |s: &LeaderState, offset| -> Vec<BrokerId> {
            s.read_candidates(offset, 5)
                .iter()
                .map(|v| v.broker_id)
                .collect()
        };
        assert_eq!(serving(&state, Offset(7)), ids(&[2, 3]));
        assert_eq!(
            serving(&state, Offset(8)),
            ids(&[3]),
            "2 does not hold offset 8 yet"
        );
        assert_eq!(state.read_candidates(Offset(8), 5)[0].since_caught_up_ms, 1);
        state.isr = ids(&[1, 2]);
        assert_eq!(serving(&state, Offset(7)), ids(&[2]), "3 left the ISR");
    }

    #[test]
    fn the_high_watermark_is_the_least_log_end_offset_in_the_isr() {
        let mut state = three();
        assert_eq!(
            state.high_watermark_bound(Offset(10)),
            Offset(-1),
            "followers not heard from yet"
        );
        state.record_fetch(BrokerId(2), Offset(7), Offset(10), 1);
        state.record_fetch(BrokerId(3), Offset(10), Offset(10), 1);
        assert_eq!(state.high_watermark_bound(Offset(10)), Offset(7));
        state.isr = ids(&[1, 3]);
        assert_eq!(
            state.high_watermark_bound(Offset(10)),
            Offset(10),
            "a replica out of the ISR does not hold it back"
        );
    }

    #[test]
    fn a_pending_shrink_still_holds_the_high_watermark_back() {
        let mut state = three();
        state.record_fetch(BrokerId(2), Offset(4), Offset(10), 1);
        state.record_fetch(BrokerId(3), Offset(10), Offset(10), 1);
        state.pending_isr = Some(ids(&[1, 3]));
        assert_eq!(state.high_watermark_bound(Offset(10)), Offset(4));
        assert_eq!(state.effective_isr_len(), 2);
    }

    #[test]
    fn a_pending_expansion_waits_for_the_new_member_but_min_isr_counts_it_once_committed() {
        let mut state = LeaderState::new(BrokerId(1), ids(&[1, 2, 3]), ids(&[1, 2]), Offset(0), 0);
        state.record_fetch(BrokerId(2), Offset(10), Offset(10), 1);
        state.record_fetch(BrokerId(3), Offset(6), Offset(10), 1);
        state.pending_isr = Some(ids(&[1, 2, 3]));
        assert_eq!(
            state.high_watermark_bound(Offset(10)),
            Offset(6),
            "3 counts for the HW already"
        );
        assert_eq!(
            state.effective_isr_len(),
            2,
            "but not for min.insync.replicas"
        );
        state.update_replicas(ids(&[1, 2, 3]), ids(&[1, 2, 3]), 2);
        assert_eq!(state.effective_isr_len(), 3, "committed");
    }

    #[test]
    fn lagging_followers_leave_the_isr_and_caught_up_ones_rejoin() {
        let mut state = three();
        state.record_fetch(BrokerId(2), Offset(10), Offset(10), 1_000);
        state.record_fetch(BrokerId(3), Offset(3), Offset(10), 1_000);
        assert_eq!(state.shrink_candidate(20_000, 30_000, Offset(10)), None);
        state.record_fetch(BrokerId(2), Offset(10), Offset(10), 40_000);
        assert_eq!(
            state.shrink_candidate(40_000, 30_000, Offset(10)),
            Some(ids(&[1, 2]))
        );
        state.isr = ids(&[1, 2]);
        assert_eq!(
            state.expansion_candidate(BrokerId(3), Offset(10)),
            None,
            "still behind"
        );
        state.record_fetch(BrokerId(3), Offset(10), Offset(10), 41_000);
        assert_eq!(
            state.expansion_candidate(BrokerId(3), Offset(10)),
            Some(ids(&[1, 2, 3]))
        );
    }
}
