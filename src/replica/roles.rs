//! A partition's role changes and the replication protocol on each side: the leader
//! answering a follower's fetch (recording its log end offset, moving the high watermark,
//! proposing ISR changes, reporting a diverging epoch), and the follower appending the
//! leader's batches and truncating where its log diverges.

use bytes::Bytes;

use super::error::ReplicaError;
use super::leader_state::LeaderState;
use super::partition::{IsrChange, Partition, ReplicaState, Role};
use super::read_replica::ReplicaView;
use crate::ids::{BrokerId, LeaderEpoch, Offset};
use crate::metadata::PartitionImage;

/// What a follower asks for in a fetch.
#[derive(Debug, Clone, Copy)]
pub struct FollowerFetch {
    pub replica_id: BrokerId,
    pub fetch_offset: Offset,
    /// The epoch of the follower's last batch (-1 when unknown, before Fetch v12).
    pub last_fetched_epoch: LeaderEpoch,
    pub current_leader_epoch: LeaderEpoch,
    /// At most this many bytes, but at least the first batch (KIP-74) unless 0 (a
    /// throttled replica, or a response already full): then no records.
    pub max_bytes: usize,
    /// When the follower's session rested (its fetches answered without reading, nothing
    /// having changed since a read found it caught up; `api::fetch_sessions`): the last
    /// time it was seen so, which counts as a fetch at `fetch_offset` with the leader's
    /// log ending there.
    pub rested_until_ms: Option<i64>,
}

/// The leader's answer to a follower.
#[derive(Debug, Clone)]
pub enum FollowerFetchResult {
    /// Batches from the fetch offset (maybe none), with the leader's offsets.
    Records {
        records: Bytes,
        high_watermark: Offset,
        log_start_offset: Offset,
        log_end_offset: Offset,
    },
    /// The follower's log diverges: it must truncate to at most `end_offset` of `epoch`.
    Diverging {
        epoch: LeaderEpoch,
        end_offset: Offset,
    },
}

impl Partition {
    /// Takes the role the metadata gives this broker: leader with the image's replicas and
    /// ISR, or follower of its leader. Epochs older than the current one are ignored
    /// (images only move forward); the same epoch only refreshes replicas and ISR.
    pub fn apply_partition_image(
        &self,
        node_id: BrokerId,
        wanted: &PartitionImage,
    ) -> Result<(), ReplicaError> {
        let leader_epoch = LeaderEpoch(wanted.leader_epoch);
        if leader_epoch < self.leader_epoch() {
            return Ok(());
        }
        match BrokerId(wanted.leader) == node_id {
            true => self.make_leader(
                node_id,
                leader_epoch,
                wanted.partition_epoch,
                broker_ids(&wanted.replicas),
                broker_ids(&wanted.isr),
            ),
            false => self.make_follower(
                BrokerId(wanted.leader),
                leader_epoch,
                wanted.partition_epoch,
            ),
        }
    }

    /// Becomes leader at `leader_epoch`: the epoch starts at the log end offset, followers
    /// start unknown. A repeated call for the same epoch only refreshes replicas and ISR.
    pub fn make_leader(
        &self,
        local_id: BrokerId,
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
        replicas: Vec<BrokerId>,
        isr: Vec<BrokerId>,
    ) -> Result<(), ReplicaError> {
        let mut state = self.state();
        let same_epoch = state.leader_epoch == leader_epoch;
        if let Role::Leader(leader) = &mut state.role {
            if same_epoch {
                leader.update_replicas(replicas, isr, self.clock().now_ms());
                state.partition_epoch = partition_epoch;
                drop(state);
                self.replication_changed();
                self.maybe_increment_high_watermark();
                return Ok(());
            }
        }
        let mut log = self.log_mut_for_roles();
        let start = log.log_end_offset();
        let latest = log
            .epoch_cache()
            .latest_epoch()
            .unwrap_or(LeaderEpoch::UNKNOWN);
        if leader_epoch >= latest {
            log.assign_leader_epoch(leader_epoch, start)
                .map_err(|e| self.log_error(e))?;
        } else {
            // Only a single node's default image (epoch 0) can be older than the log.
            tracing::warn!(partition = %self.topic_partition, %leader_epoch, %latest,
                "leader epoch older than the log's latest: not recorded");
        }
        drop(log);
        let now = self.clock().now_ms();
        *state = ReplicaState {
            leader_epoch,
            partition_epoch,
            role: Role::Leader(LeaderState::new(local_id, replicas, isr, start, now)),
        };
        self.invariant_history()
            .start_leading(self.high_watermark());
        drop(state);
        self.replication_changed();
        self.wake_high_watermark_waiters();
        tracing::info!(partition = %self.topic_partition, %leader_epoch, "became leader");
        self.maybe_increment_high_watermark();
        self.check_invariants();
        Ok(())
    }

    /// Becomes a follower of `leader` at `leader_epoch`. The log is not truncated here: the
    /// fetcher finds the diverging point with the leader (never the high watermark), unless
    /// the test-only pre-KIP-101 switch is on.
    pub fn make_follower(
        &self,
        leader: BrokerId,
        leader_epoch: LeaderEpoch,
        partition_epoch: i32,
    ) -> Result<(), ReplicaError> {
        let mut state = self.state();
        let unchanged = state.leader_epoch == leader_epoch
            && matches!(state.role, Role::Follower { leader: l } if l == leader);
        // Waits for an append of the old role to finish (lock order: state, then log).
        let log = self.log_mut_for_roles();
        *state = ReplicaState {
            leader_epoch,
            partition_epoch,
            role: Role::Follower { leader },
        };
        self.invariant_history().stop_leading();
        drop(log);
        drop(state);
        self.replication_changed();
        self.wake_high_watermark_waiters();
        if self.truncates_to_high_watermark() {
            self.truncate_to(leader_epoch, self.high_watermark())?;
        }
        if !unchanged {
            tracing::info!(partition = %self.topic_partition, %leader, %leader_epoch,
                "became follower");
        }
        self.check_invariants();
        Ok(())
    }

    /// The leader's side of a follower's fetch (Kafka's rule): a diverging epoch when the
    /// follower's last epoch ends earlier here, else the follower's log end offset is
    /// recorded, the high watermark and ISR follow, and batches up to the log end offset
    /// are returned. A proposed ISR change is returned for the controller.
    pub fn fetch_for_follower(
        &self,
        request: FollowerFetch,
    ) -> Result<(FollowerFetchResult, Option<IsrChange>), ReplicaError> {
        self.check_leader_epoch(request.current_leader_epoch)?;
        let log = self.log();
        let log_end_offset = log.log_end_offset();
        let log_start_offset = log.log_start_offset();
        if request.last_fetched_epoch.0 >= 0 {
            let (epoch, end_offset) = log
                .epoch_cache()
                .end_offset_for(request.last_fetched_epoch, log_end_offset);
            if epoch < request.last_fetched_epoch || end_offset < request.fetch_offset {
                return Ok((FollowerFetchResult::Diverging { epoch, end_offset }, None));
            }
        }
        log.check_offset(request.fetch_offset)
            .map_err(|e| self.log_error(e))?;
        let records = log
            .read(
                request.fetch_offset,
                log_end_offset,
                request.max_bytes,
                request.max_bytes > 0,
            )
            .map_err(|e| self.log_error(e))?;
        drop(log);
        let change = self.record_follower(&request, log_end_offset)?;
        let result = FollowerFetchResult::Records {
            records,
            high_watermark: self.high_watermark(),
            log_start_offset,
            log_end_offset,
        };
        Ok((result, change))
    }

    fn record_follower(
        &self,
        request: &FollowerFetch,
        leo: Offset,
    ) -> Result<Option<IsrChange>, ReplicaError> {
        let (replica, fetch_offset) = (request.replica_id, request.fetch_offset);
        let now = self.clock().now_ms();
        let mut state = self.state();
        let (leader_epoch, partition_epoch) = (state.leader_epoch, state.partition_epoch);
        // The refusals are built from the guarded state: `not_leader` would take the lock
        // again (and deadlock the partition on a fetch from an unknown replica).
        let Role::Leader(leader) = &mut state.role else {
            return Err(self.not_leader_at(BrokerId::NONE, leader_epoch));
        };
        if let Some(until_ms) = request.rested_until_ms {
            leader.record_rest(replica, fetch_offset, until_ms);
        }
        if !leader.record_fetch(replica, fetch_offset, leo, now) {
            tracing::warn!(partition = %self.topic_partition, %replica,
                "fetch from a replica outside the assignment refused");
            return Err(self.not_leader_at(leader.local_id, leader_epoch));
        }
        let high_watermark = self.high_watermark();
        let change = leader
            .expansion_candidate(replica, high_watermark)
            .map(|isr| {
                leader.pending_isr = Some(isr.clone());
                self.replication_changed();
                IsrChange {
                    topic_partition: self.topic_partition.clone(),
                    leader_epoch,
                    partition_epoch,
                    isr,
                }
            });
        drop(state);
        self.maybe_increment_high_watermark();
        Ok(change)
    }

    /// As leader, the follower a consumer should read `fetch_offset` from instead (KIP-392):
    /// `choose` picks among the leader and the in-sync followers holding that offset (see
    /// [`super::read_replica`]). `None`: read here (a follower, or an offset below the log
    /// start, always does).
    pub fn preferred_read_replica(
        &self,
        fetch_offset: Offset,
        choose: impl FnOnce(ReplicaView, &[ReplicaView]) -> Option<BrokerId>,
    ) -> Option<BrokerId> {
        let now_ms = self.clock().now_ms();
        let state = self.state();
        let Role::Leader(leader) = &state.role else {
            return None;
        };
        let log = self.log();
        if fetch_offset < log.log_start_offset() {
            return None;
        }
        let me = ReplicaView {
            broker_id: leader.local_id,
            log_end_offset: log.log_end_offset(),
            since_caught_up_ms: 0,
        };
        drop(log);
        let followers = leader.read_candidates(fetch_offset, now_ms);
        drop(state);
        choose(me, &followers).filter(|chosen| *chosen != me.broker_id)
    }

    /// As leader, proposes an ISR without the followers that fell `lag_max_ms` behind.
    pub fn maybe_shrink_isr(&self, now_ms: i64, lag_max_ms: i64) -> Option<IsrChange> {
        let log_end_offset = self.published_log_end_offset();
        let mut state = self.state();
        let (leader_epoch, partition_epoch) = (state.leader_epoch, state.partition_epoch);
        let Role::Leader(leader) = &mut state.role else {
            return None;
        };
        let isr = leader.shrink_candidate(now_ms, lag_max_ms, log_end_offset)?;
        tracing::info!(partition = %self.topic_partition, ?isr, "shrinking the ISR");
        leader.pending_isr = Some(isr.clone());
        self.replication_changed();
        Some(IsrChange {
            topic_partition: self.topic_partition.clone(),
            leader_epoch,
            partition_epoch,
            isr,
        })
    }

    /// Records the controller's answer to an ISR change proposed at `proposed` (the leader
    /// and partition epochs it was proposed at): the partition as the controller left it,
    /// or `None` when the proposal was refused. As Kafka's leader does, an answer to a
    /// state the partition has since left is ignored: a newer image arrived first (it may
    /// even have completed a reassignment that took replicas out), and it is the truth.
    pub fn complete_isr_change(
        &self,
        proposed: (LeaderEpoch, i32),
        answer: Option<&PartitionImage>,
    ) {
        let mut state = self.state();
        if (state.leader_epoch, state.partition_epoch) != proposed {
            tracing::info!(partition = %self.topic_partition, ?proposed,
                now = ?(state.leader_epoch, state.partition_epoch),
                "ignoring the answer to an ISR change: the partition has changed since");
            return;
        }
        let leader_epoch = state.leader_epoch;
        let mut partition_epoch = state.partition_epoch;
        if let Role::Leader(leader) = &mut state.role {
            // The controller's ISR, not the one proposed: it may have completed a
            // reassignment with it. An answer at another leader epoch waits for its image.
            if let Some(image) = answer.filter(|a| LeaderEpoch(a.leader_epoch) == leader_epoch) {
                leader.isr = broker_ids(&image.isr);
                partition_epoch = partition_epoch.max(image.partition_epoch);
            }
            leader.pending_isr = None;
        }
        state.partition_epoch = partition_epoch;
        drop(state);
        // A refused expansion is proposed again at the follower's next fetch that is read.
        self.replication_changed();
        self.maybe_increment_high_watermark();
        self.check_invariants();
    }

    /// Waits until the high watermark reaches `offset` (acks=-1) while this replica still
    /// leads at `leader_epoch`, the epoch of the append, at most `timeout`. A role change
    /// first is NOT_LEADER_OR_FOLLOWER, as Kafka completes its delayed produces on a
    /// leader change: the records may have been truncated, and a high watermark seen at a
    /// later epoch says nothing about them.
    pub async fn wait_for_high_watermark(
        &self,
        offset: Offset,
        leader_epoch: LeaderEpoch,
        timeout: std::time::Duration,
    ) -> Result<(), ReplicaError> {
        let mut high_watermark = self.subscribe();
        let reached = async move {
            loop {
                let passed = *high_watermark.borrow_and_update() >= offset;
                if !self.leads_at(leader_epoch) {
                    return Err(self.not_leader(self.leader()));
                }
                if passed {
                    return Ok(());
                }
                if high_watermark.changed().await.is_err() {
                    return Err(self.not_leader(BrokerId::NONE));
                }
            }
        };
        match tokio::time::timeout(timeout, reached).await {
            Ok(answer) => answer,
            Err(_) => Err(ReplicaError::ReplicationTimeout {
                topic: self.topic_partition.topic.clone(),
                partition: self.topic_partition.partition,
                offset,
                timeout_ms: timeout.as_millis() as u64,
            }),
        }
    }

    /// Whether this replica leads at `leader_epoch`.
    pub fn leads_at(&self, leader_epoch: LeaderEpoch) -> bool {
        let state = self.state();
        matches!(state.role, Role::Leader(_)) && state.leader_epoch == leader_epoch
    }

    /// How many replicas `min.insync.replicas` may count now.
    pub fn isr_len(&self) -> usize {
        match &self.state().role {
            Role::Leader(leader) => leader.effective_isr_len(),
            Role::Follower { .. } => 0,
        }
    }

    /// As follower, appends batches from the leader and takes its high watermark, capped
    /// by the own log end offset (follower HW = min(leader HW, LEO)); the log start offset
    /// follows the leader's.
    ///
    /// `fetched_epoch` is the leader epoch the fetch was sent at: an answer that arrives
    /// after this replica changed role or epoch is dropped (NOT_LEADER_OR_FOLLOWER), so a
    /// new leader never appends its old leader's batches.
    pub fn append_as_follower(
        &self,
        fetched_epoch: LeaderEpoch,
        records: &[u8],
        leader_high_watermark: Offset,
        leader_log_start_offset: Offset,
    ) -> Result<(), ReplicaError> {
        let mut log = self.log_for_follower_write(fetched_epoch)?;
        log.append_as_follower(records)
            .map_err(|e| self.log_error(e))?;
        log.retire_stable_transactions(self.high_watermark());
        let log_end_offset = log.log_end_offset();
        let high_watermark = leader_high_watermark.min(log_end_offset);
        // The log start follows the leader's (DeleteRecords there, or its retention) up to
        // this replica's high watermark, as Kafka's fetcher does: a follower that becomes
        // leader must not hand out records the leader had deleted.
        let start = leader_log_start_offset.min(high_watermark);
        if start > log.log_start_offset() {
            log.delete_records(start, high_watermark)
                .map_err(|e| self.log_error(e))?;
            self.replication_changed();
        }
        drop(log);
        self.publish_log_end_offset(log_end_offset);
        self.set_follower_high_watermark(high_watermark);
        self.set_fetcher_lag(leader_high_watermark, log_end_offset);
        self.check_invariants();
        Ok(())
    }

    /// The log's write lock for a follower's write of a fetch sent at `fetched_epoch`,
    /// taken while the role is checked (lock order: state, then log).
    fn log_for_follower_write(
        &self,
        fetched_epoch: LeaderEpoch,
    ) -> Result<std::sync::RwLockWriteGuard<'_, crate::log::Log>, ReplicaError> {
        let state = self.state();
        let leader = match state.role {
            Role::Follower { .. } if state.leader_epoch == fetched_epoch => {
                return Ok(self.log_mut_for_roles());
            }
            Role::Follower { leader } => leader,
            Role::Leader(ref leader) => leader.local_id,
        };
        drop(state);
        tracing::debug!(partition = %self.topic_partition, %fetched_epoch,
            "fetch answer for an older role dropped");
        Err(self.not_leader(leader))
    }

    /// Truncates the log to `offset` (never below the log start) and lowers the high
    /// watermark with it if needed (only a follower truncates, for a fetch sent at
    /// `fetched_epoch`, or on becoming follower under the pre-KIP-101 test rule).
    pub fn truncate_to(
        &self,
        fetched_epoch: LeaderEpoch,
        offset: Offset,
    ) -> Result<bool, ReplicaError> {
        let mut log = self.log_for_follower_write(fetched_epoch)?;
        let truncated = log.truncate_to(offset).map_err(|e| self.log_error(e))?;
        let log_end_offset = log.log_end_offset();
        drop(log);
        // Even at the same log end, an empty epoch there may be gone (the next fetch's
        // last fetched epoch).
        self.replication_changed();
        if truncated {
            tracing::info!(partition = %self.topic_partition, %offset, "truncated as follower");
            self.publish_log_end_offset(log_end_offset);
            if self.high_watermark() > log_end_offset {
                self.set_follower_high_watermark(log_end_offset);
            }
        }
        self.check_invariants();
        Ok(truncated)
    }

    /// The epoch of the last batch and the log end offset (for the follower's fetch; no
    /// epoch under the test-only pre-KIP-101 rule).
    pub fn last_fetched_epoch(&self) -> (LeaderEpoch, Offset) {
        let log = self.log();
        let epoch = match self.truncates_to_high_watermark() {
            true => LeaderEpoch::UNKNOWN,
            false => log
                .epoch_cache()
                .latest_epoch()
                .unwrap_or(LeaderEpoch::UNKNOWN),
        };
        (epoch, log.log_end_offset())
    }
}

/// Broker ids as the metadata image lists them.
pub fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().copied().map(BrokerId).collect()
}

/// The partition state machine, one rule per test.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;

    /// Broker 1 leads `p` at epoch 0, with broker 2 in its ISR.
    fn lead_epoch_zero(p: &Partition) {
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(0),
            0,
            broker_ids(&[1, 2]),
            broker_ids(&[1, 2]),
        )
        .expect("leader");
    }

    fn partition(dir: &std::path::Path) -> Partition {
        Partition::for_test(dir)
    }

    fn fetch(replica_id: i32, fetch_offset: i64, last_fetched_epoch: i32) -> FollowerFetch {
        FollowerFetch {
            replica_id: BrokerId(replica_id),
            fetch_offset: Offset(fetch_offset),
            last_fetched_epoch: LeaderEpoch(last_fetched_epoch),
            current_leader_epoch: LeaderEpoch(-1),
            max_bytes: 1 << 20,
            rested_until_ms: None,
        }
    }

    fn image(leader: i32, leader_epoch: i32, isr: &[i32]) -> PartitionImage {
        PartitionImage {
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            leader,
            leader_epoch,
            partition_epoch: leader_epoch,
            ..PartitionImage::new(Vec::new())
        }
    }

    #[test]
    fn an_isr_answer_to_a_state_the_partition_left_is_ignored() {
        // Found by compat/cluster/reassign.sh: the leader proposes ISR [1,2,3]; the change
        // completes a reassignment to replicas [3,1] and its image (a new leader epoch)
        // arrives before the answer. Writing the proposal over it broke "ISR within the
        // replicas" and stopped the node.
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        p.apply_partition_image(BrokerId(1), &image(1, 1, &[1, 2]))
            .expect("leader");
        let proposed = (LeaderEpoch(1), 1);
        let mut moved = PartitionImage::new(vec![3, 1]);
        (
            moved.leader,
            moved.isr,
            moved.leader_epoch,
            moved.partition_epoch,
        ) = (1, vec![1, 3], 2, 2);
        p.apply_partition_image(BrokerId(1), &moved)
            .expect("the completed reassignment");
        p.complete_isr_change(proposed, Some(&moved));
        assert_eq!(p.isr_len(), 2, "the image's ISR stands");
        p.check_invariants();
        // A current answer is taken as the controller gives it, not as proposed.
        let mut answer = moved.clone();
        answer.partition_epoch = 3;
        answer.isr = vec![1];
        p.complete_isr_change((LeaderEpoch(2), 2), Some(&answer));
        assert_eq!(p.isr_len(), 1);
        assert_eq!(p.state().partition_epoch, 3);
    }

    #[test]
    fn a_stale_image_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        p.apply_partition_image(BrokerId(1), &image(1, 3, &[1, 2]))
            .expect("leader");
        p.apply_partition_image(BrokerId(1), &image(2, 2, &[2]))
            .expect("stale");
        assert!(p.is_leader());
        assert_eq!(p.leader_epoch(), LeaderEpoch(3));
    }

    #[test]
    fn the_same_epoch_only_refreshes_replicas_and_isr() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        p.apply_partition_image(BrokerId(1), &image(1, 1, &[1, 2]))
            .expect("leader");
        p.append_as_leader(&encode_batch(2, -1, -1, 0))
            .expect("append");
        p.apply_partition_image(BrokerId(1), &image(1, 1, &[1]))
            .expect("refresh");
        assert_eq!(p.isr_len(), 1, "the ISR follows the image");
        assert_eq!(
            p.high_watermark(),
            Offset(2),
            "a lone leader's HW reaches its log end"
        );
        let entries = p.log().epoch_cache().entries().to_vec();
        assert_eq!(entries.len(), 1, "no new epoch entry: {entries:?}");
    }

    #[test]
    fn a_leaders_high_watermark_waits_for_every_isr_member() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        lead_epoch_zero(&p);
        p.append_as_leader(&encode_batch(3, -1, -1, 0))
            .expect("append");
        assert_eq!(
            p.high_watermark(),
            Offset(0),
            "the follower has nothing yet"
        );
        p.fetch_for_follower(fetch(2, 0, -1)).expect("first fetch");
        assert_eq!(
            p.high_watermark(),
            Offset(0),
            "the follower's offset is learned one fetch late"
        );
        p.fetch_for_follower(fetch(2, 3, 0)).expect("second fetch");
        assert_eq!(p.high_watermark(), Offset(3));
    }

    #[test]
    fn a_leaders_high_watermark_never_decreases() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(0),
            0,
            broker_ids(&[1, 2, 3]),
            broker_ids(&[1, 2]),
        )
        .expect("leader");
        p.append_as_leader(&encode_batch(3, -1, -1, 0))
            .expect("append");
        p.fetch_for_follower(fetch(2, 0, -1)).expect("first fetch");
        p.fetch_for_follower(fetch(2, 3, 0)).expect("caught up");
        assert_eq!(p.high_watermark(), Offset(3));
        p.fetch_for_follower(fetch(2, 1, 0))
            .expect("a fetch from further back");
        assert_eq!(
            p.high_watermark(),
            Offset(3),
            "a follower going back does not lower it"
        );
        p.apply_partition_image(BrokerId(1), &image(1, 0, &[1, 2, 3]))
            .expect("ISR grows");
        assert_eq!(
            p.high_watermark(),
            Offset(3),
            "a new ISR member with nothing fetched yet does not lower it"
        );
        assert!(
            !p.maybe_advance_high_watermark(Offset(2)),
            "never moved back"
        );
        assert_eq!(p.high_watermark(), Offset(3));
    }

    #[test]
    fn the_high_watermark_stands_still_while_the_isr_is_below_min_insync_replicas() {
        // KIP-966's strict min ISR: with min.insync.replicas 2 a lone ISR member does not
        // move the high watermark, so every record below it is on two replicas.
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        let mut config = *p.log().config();
        config.min_insync_replicas = 2;
        p.set_log_config(config);
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(0),
            0,
            broker_ids(&[1, 2, 3]),
            broker_ids(&[1]),
        )
        .expect("leader");
        p.append_as_leader(&encode_batch(3, -1, -1, 0))
            .expect("append");
        assert_eq!(p.high_watermark(), Offset(0), "ISR [1] is below min ISR 2");
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(0),
            1,
            broker_ids(&[1, 2, 3]),
            broker_ids(&[1, 2]),
        )
        .expect("ISR grows");
        p.fetch_for_follower(fetch(2, 0, -1)).expect("first fetch");
        p.fetch_for_follower(fetch(2, 3, 0)).expect("caught up");
        assert_eq!(p.high_watermark(), Offset(3), "two in sync: the HW moves");
    }

    #[test]
    fn a_followers_high_watermark_is_capped_by_its_log_end() {
        let leader_dir = tempfile::tempdir().expect("tempdir");
        let leader = partition(leader_dir.path());
        leader
            .make_leader(
                BrokerId(1),
                LeaderEpoch(0),
                0,
                broker_ids(&[1]),
                broker_ids(&[1]),
            )
            .expect("leader");
        leader
            .append_as_leader(&encode_batch(3, -1, -1, 0))
            .expect("append");
        let records = leader
            .log()
            .read(Offset(0), Offset(3), 1 << 20, true)
            .expect("read");
        let dir = tempfile::tempdir().expect("tempdir");
        let follower = partition(dir.path());
        follower
            .make_follower(BrokerId(1), LeaderEpoch(0), 0)
            .expect("follower");
        follower
            .append_as_follower(LeaderEpoch(0), &records, Offset(100), Offset(0))
            .expect("append");
        assert_eq!(
            follower.high_watermark(),
            Offset(3),
            "min(leader HW, own log end)"
        );
    }

    #[test]
    fn a_diverging_epoch_is_reported_when_the_followers_epoch_ends_earlier() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(0),
            0,
            broker_ids(&[1, 2]),
            broker_ids(&[1]),
        )
        .expect("leader");
        p.append_as_leader(&encode_batch(3, -1, -1, 0))
            .expect("append");
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(2),
            1,
            broker_ids(&[1, 2]),
            broker_ids(&[1]),
        )
        .expect("leader again");
        p.append_as_leader(&encode_batch(2, -1, -1, 0))
            .expect("append");
        // The follower's last batch is of epoch 1, unknown here: epoch 0 ended at 3.
        let (answer, _) = p.fetch_for_follower(fetch(2, 5, 1)).expect("fetch");
        match answer {
            FollowerFetchResult::Diverging { epoch, end_offset } => {
                assert_eq!((epoch, end_offset), (LeaderEpoch(0), Offset(3)));
            }
            other => panic!("expected a diverging epoch, got {other:?}"),
        }
    }

    #[test]
    fn a_fetch_from_a_replica_outside_the_assignment_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        lead_epoch_zero(&p);
        let refused = p.fetch_for_follower(fetch(9, 0, -1));
        assert!(matches!(
            refused,
            Err(ReplicaError::NotLeaderOrFollower { .. })
        ));
    }

    #[test]
    fn a_fetch_answer_for_an_older_epoch_is_not_applied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = partition(dir.path());
        p.make_follower(BrokerId(1), LeaderEpoch(4), 4)
            .expect("follower");
        let refused = p.append_as_follower(
            LeaderEpoch(3),
            &encode_batch(1, -1, -1, 0),
            Offset(1),
            Offset(0),
        );
        assert!(matches!(
            refused,
            Err(ReplicaError::NotLeaderOrFollower { .. })
        ));
        assert_eq!(p.log().log_end_offset(), Offset(0), "nothing appended");
    }
}
