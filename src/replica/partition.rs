//! One partition hosted by this broker: its log, its role (leader or follower) at a leader
//! epoch, and its high watermark, with channels that wake parked fetches when the high
//! watermark (consumers) or the log end offset (followers) moves.
//!
//! As leader it learns each follower's log end offset from the offsets the follower
//! fetches from and moves the high watermark to the least one in the ISR; as follower it
//! appends the leader's batches unchanged and takes the leader's high watermark, capped by
//! its own log end offset (the protocol's rule).
//! Invariant: log_start_offset <= high_watermark <= log_end_offset; the leader epoch never
//! decreases; a leader's high watermark never decreases.
//!
//! Locking: `state` (role and epochs) and `log` are taken in that order and never the
//! other way round. Whoever writes the log for a role (a leader's append, a follower's
//! append or truncation) takes the log's write lock while holding `state`, after checking
//! the role and epoch there; role changes hold `state` and take the log's write lock too.
//! So no write of an old role lands after a role change. Neither lock is held across an
//! await.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::watch;
use uuid::Uuid;

use super::error::ReplicaError;
use super::invariants::{self, InvariantHistory};
use super::leader_state::LeaderState;
use super::log_dirs::{is_dir_failure, LogDir};
use crate::clock::Clock;
use crate::ids::{BrokerId, LeaderEpoch, Offset, ProducerEpoch, ProducerId};
use crate::log::cleaner::CleanedSegment;
use crate::log::control::Marker;
use crate::log::{AppendInfo, Log, LogError};

/// A topic name and partition index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Offsets a reader needs besides the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log_start_offset: Offset,
    pub high_watermark: Offset,
    /// The high watermark, or the first offset of the earliest undecided transaction below
    /// it (read_committed consumers read up to here).
    pub last_stable_offset: Offset,
    pub log_end_offset: Offset,
}

/// What this replica does for the partition.
#[derive(Debug, Clone)]
pub enum Role {
    Leader(LeaderState),
    Follower { leader: BrokerId },
}

/// Role and epochs, changed together under one lock.
#[derive(Debug, Clone)]
pub struct ReplicaState {
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub role: Role,
}

/// An ISR the leader wants the controller to record (AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub topic_partition: TopicPartition,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub isr: Vec<BrokerId>,
}

/// A partition hosted by this broker.
#[derive(Debug)]
pub struct Partition {
    pub topic_partition: TopicPartition,
    pub topic_id: Uuid,
    state: Mutex<ReplicaState>,
    log: RwLock<Log>,
    /// Publishes the high watermark; consumer fetches parked on this partition watch it.
    high_watermark: watch::Sender<Offset>,
    /// Publishes the log end offset, read by follower fetches woken by `changes`.
    log_end_offset: watch::Sender<Offset>,
    /// The broker's replication version, moved by this partition's changes.
    changes: ReplicationChanges,
    /// Test-only: follow the pre-KIP-101 rule (truncate to the high watermark on becoming
    /// follower, fetch without epochs), to show what the leader-epoch rule prevents.
    truncate_to_high_watermark: std::sync::atomic::AtomicBool,
    /// The log directory holding the log: an I/O error takes it (and this replica) offline.
    /// Changed only with the log's write lock held, when a move to another directory
    /// completes (`log_mover`); a leaf lock.
    log_dir: RwLock<Arc<LogDir>>,
    /// What the invariant checks remember between two checks.
    history: InvariantHistory,
    /// The time follower lag is measured in (the simulator moves it by hand).
    clock: Clock,
    /// As follower: the leader's high watermark minus this log's end, after the last
    /// fetch (Kafka's FetcherLagMetrics ConsumerLag); -1 before the first one.
    fetcher_lag: std::sync::atomic::AtomicI64,
    /// The topic's `min.insync.replicas`, read by every acks=all produce without the log's
    /// lock; set with the log's config (opening, and every changed topic configuration).
    min_insync_replicas: std::sync::atomic::AtomicUsize,
    /// Which replication throttles apply to this replica ([`THROTTLED_AS_LEADER`],
    /// [`THROTTLED_AS_FOLLOWER`]), from the topic's throttled-replicas lists (`quota`).
    throttles: std::sync::atomic::AtomicU8,
}

/// A version shared by the partitions of a broker, moved by every change a follower's
/// fetch could see or make here: log end offsets (as leader and as follower), high
/// watermarks, log start offsets, ISR changes and roles (failed log directories are
/// counted by `LogDirs`; [`super::ReplicaManager::replication_version`] adds the two).
///
/// A leader's append and a role change also wake the receivers: a follower's fetch parks
/// on this one channel rather than on one per partition of its session (thousands, each
/// subscribed and polled per fetch), and on a wake reads again only if what it read
/// moved. The other changes move the version quietly, for those that compare it: a
/// follower's session at rest that finds the version unchanged reads none of its
/// partitions (`api::fetch_sessions`), and a fetcher reuses its partitions' positions
/// ([`super::fetch_session`]).
#[derive(Debug, Clone)]
pub struct ReplicationChanges(Arc<watch::Sender<u64>>);

impl Default for ReplicationChanges {
    fn default() -> Self {
        ReplicationChanges(Arc::new(watch::channel(0).0))
    }
}

impl ReplicationChanges {
    /// Moves the version and wakes every receiver (a leader's log end moved, or roles).
    pub(super) fn log_end_moved(&self) {
        self.0
            .send_modify(|version| *version = version.wrapping_add(1));
    }

    /// Moves the version without waking anyone.
    pub(super) fn changed(&self) {
        self.0.send_if_modified(|version| {
            *version = version.wrapping_add(1);
            false
        });
    }

    /// The version now.
    pub fn version(&self) -> u64 {
        *self.0.borrow()
    }

    /// A receiver woken by every later leader append and role change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// Sending to followers out of the ISR counts against the leader throttle.
pub const THROTTLED_AS_LEADER: u8 = 1;
/// Fetching while out of the ISR counts against the follower throttle.
pub const THROTTLED_AS_FOLLOWER: u8 = 2;

impl Partition {
    /// Wraps an opened log as a follower of `leader` at `leader_epoch`, until
    /// [`Partition::make_leader`] or [`Partition::make_follower`] gives it its role.
    pub fn new(
        topic_partition: TopicPartition,
        topic_id: Uuid,
        (leader, leader_epoch): (BrokerId, LeaderEpoch),
        log: Log,
        log_dir: Arc<LogDir>,
        (clock, changes): (Clock, ReplicationChanges),
    ) -> Self {
        let log_end_offset = log.log_end_offset();
        let min_insync_replicas = log.config().min_insync_replicas;
        let (high_watermark, _) = watch::channel(log_end_offset);
        let (log_end_offset, _) = watch::channel(log_end_offset);
        let state = ReplicaState {
            leader_epoch,
            partition_epoch: 0,
            role: Role::Follower { leader },
        };
        Partition {
            topic_partition,
            topic_id,
            state: Mutex::new(state),
            log: RwLock::new(log),
            high_watermark,
            log_end_offset,
            changes,
            truncate_to_high_watermark: std::sync::atomic::AtomicBool::new(false),
            log_dir: RwLock::new(log_dir),
            history: InvariantHistory::default(),
            clock,
            fetcher_lag: std::sync::atomic::AtomicI64::new(-1),
            min_insync_replicas: std::sync::atomic::AtomicUsize::new(min_insync_replicas),
            throttles: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Sets which replication throttles apply ([`THROTTLED_AS_LEADER`] and
    /// [`THROTTLED_AS_FOLLOWER`] bits).
    pub fn set_throttles(&self, throttles: u8) {
        self.throttles
            .store(throttles, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether throttle `which` applies to this replica.
    pub fn is_throttled(&self, which: u8) -> bool {
        self.throttles.load(std::sync::atomic::Ordering::Relaxed) & which != 0
    }

    /// As leader, whether `replica` is in the ISR (false when not leading).
    pub fn in_isr(&self, replica: BrokerId) -> bool {
        match &self.state().role {
            Role::Leader(leader) => leader.isr.contains(&replica),
            Role::Follower { .. } => false,
        }
    }

    /// The topic's `min.insync.replicas` (at least 1).
    pub fn min_insync_replicas(&self) -> usize {
        self.min_insync_replicas
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// As follower, how far the last fetch left this log behind the leader's high
    /// watermark (None: a leader, or no fetch answered yet).
    pub fn fetcher_lag(&self) -> Option<i64> {
        let lag = self.fetcher_lag.load(std::sync::atomic::Ordering::Relaxed);
        let following = matches!(self.state().role, Role::Follower { .. });
        (following && lag >= 0).then_some(lag)
    }

    /// Records the lag a follower's fetch left (see [`Partition::fetcher_lag`]).
    pub(super) fn set_fetcher_lag(&self, leader_high_watermark: Offset, log_end_offset: Offset) {
        let lag = leader_high_watermark
            .0
            .saturating_sub(log_end_offset.0)
            .max(0);
        self.fetcher_lag
            .store(lag, std::sync::atomic::Ordering::Relaxed);
    }

    /// The clock this replica reads.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// What the invariant checks remember (role changes reset it, under the role's lock).
    pub(super) fn invariant_history(&self) -> &InvariantHistory {
        &self.history
    }

    /// A partition `t-0` on a fresh log in `dir`, following no one (unit tests).
    #[cfg(test)]
    pub(crate) fn for_test(dir: &std::path::Path) -> Partition {
        use crate::log::config::test_config;
        let config = test_config(1 << 20, 64);
        let log = Log::open(dir, config, crate::log::OpenOptions::default()).expect("open");
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        let log_dir = Arc::new(LogDir::standalone(dir));
        Partition::new(
            tp,
            Uuid::nil(),
            (BrokerId(-1), LeaderEpoch(0)),
            log,
            log_dir,
            (Clock::system(), ReplicationChanges::default()),
        )
    }

    /// Whether this replica's log directory failed (KAFKA_STORAGE_ERROR for every use).
    pub fn is_offline(&self) -> bool {
        self.log_dir().is_offline()
    }

    /// The log directory holding this replica.
    pub fn log_dir(&self) -> Arc<LogDir> {
        Arc::clone(&self.log_dir.read().unwrap_or_else(|e| self.poisoned(e)))
    }

    /// Moves the replica to `dir` (its log, reopened there, already in place).
    pub(super) fn set_log_dir(&self, dir: Arc<LogDir>) {
        *self.log_dir.write().unwrap_or_else(|e| self.poisoned(e)) = dir;
    }

    /// Sets the high watermark read from the checkpoint at start, within [log start, log
    /// end]; without one it starts at the log start offset, as in Kafka.
    pub fn restore_high_watermark(&self, checkpointed: Option<Offset>) {
        let log = self.log();
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        drop(log);
        self.set_follower_high_watermark(checkpointed.unwrap_or(start).clamp(start, end));
    }

    /// Test-only: switches this partition to the pre-KIP-101 truncation rule.
    pub fn set_truncate_to_high_watermark(&self, on: bool) {
        self.truncate_to_high_watermark
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the pre-KIP-101 truncation rule is on (tests only).
    pub fn truncates_to_high_watermark(&self) -> bool {
        self.truncate_to_high_watermark
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The role and epochs (never held across an await).
    pub fn state(&self) -> MutexGuard<'_, ReplicaState> {
        self.state.lock().unwrap_or_else(|e| self.poisoned(e))
    }

    /// A lock of this partition was poisoned: a thread panicked halfway through a change,
    /// so the state may break the invariants. Never ignored (release builds abort first).
    fn poisoned<T>(&self, _: PoisonError<T>) -> T {
        panic!(
            "{}: partition lock poisoned by a panic",
            self.topic_partition
        )
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.state().leader_epoch
    }

    /// The current leader (-1: none).
    pub fn leader(&self) -> BrokerId {
        match &self.state().role {
            Role::Leader(leader) => leader.local_id,
            Role::Follower { leader } => *leader,
        }
    }

    /// Refuses with NOT_LEADER_OR_FOLLOWER unless this broker leads the partition.
    pub fn check_leader(&self) -> Result<(), ReplicaError> {
        match self.is_leader() {
            true => Ok(()),
            false => Err(self.not_leader(self.leader())),
        }
    }

    /// Whether this replica leads the partition.
    pub fn is_leader(&self) -> bool {
        matches!(self.state().role, Role::Leader(_))
    }

    /// Read access to the log (never held across an await).
    pub fn log(&self) -> RwLockReadGuard<'_, Log> {
        self.log.read().unwrap_or_else(|e| self.poisoned(e))
    }

    fn log_mut(&self) -> RwLockWriteGuard<'_, Log> {
        self.log.write().unwrap_or_else(|e| self.poisoned(e))
    }

    /// Write access to the log for role changes and replication (same module tree).
    pub(super) fn log_mut_for_roles(&self) -> RwLockWriteGuard<'_, Log> {
        self.log_mut()
    }

    /// Publishes a new log end offset (what a parked follower fetch compares when woken).
    pub(super) fn publish_log_end_offset(&self, log_end_offset: Offset) {
        let moved = self.log_end_offset.send_if_modified(|leo| {
            let moved = *leo != log_end_offset;
            *leo = log_end_offset;
            moved
        });
        if moved {
            self.changes.changed();
        }
    }

    /// The broker's replication version (see [`ReplicationChanges`]; without its failed
    /// log directories).
    pub fn replication_version(&self) -> u64 {
        self.changes.version()
    }

    /// Moves the broker's replication version (a change a follower's fetch could see).
    pub(super) fn replication_changed(&self) {
        self.changes.changed();
    }

    /// The log end offset last published (without the log's lock).
    pub fn published_log_end_offset(&self) -> Offset {
        *self.log_end_offset.borrow()
    }

    /// Sets a follower's high watermark (it may go down with a truncation).
    pub(super) fn set_follower_high_watermark(&self, high_watermark: Offset) {
        let changed = self.high_watermark.send_if_modified(|hw| {
            let changed = *hw != high_watermark;
            *hw = high_watermark;
            changed
        });
        if changed {
            self.changes.changed();
        }
    }

    /// Wakes whoever waits on the high watermark without moving it (a role change: acks=-1
    /// waits check the epoch they were appended at).
    pub(super) fn wake_high_watermark_waiters(&self) {
        self.high_watermark.send_modify(|_| {});
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> Offset {
        *self.high_watermark.borrow()
    }

    /// A receiver that sees every later change of the high watermark.
    pub fn subscribe(&self) -> watch::Receiver<Offset> {
        self.high_watermark.subscribe()
    }

    /// The partition's offsets, read consistently.
    pub fn offsets(&self) -> PartitionOffsets {
        let log = self.log();
        let high_watermark = self.high_watermark();
        PartitionOffsets {
            log_start_offset: log.log_start_offset(),
            high_watermark,
            last_stable_offset: log.last_stable_offset(high_watermark),
            log_end_offset: log.log_end_offset(),
        }
    }

    /// Checks a client's `current_leader_epoch` (KIP-320); -1 means "not given".
    pub fn check_leader_epoch(&self, requested: LeaderEpoch) -> Result<(), ReplicaError> {
        let current = self.leader_epoch();
        let tp = &self.topic_partition;
        if requested == LeaderEpoch::UNKNOWN || requested == current {
            return Ok(());
        }
        let (topic, partition) = (tp.topic.clone(), tp.partition);
        if requested < current {
            Err(ReplicaError::FencedLeaderEpoch {
                topic,
                partition,
                requested,
                current,
            })
        } else {
            Err(ReplicaError::UnknownLeaderEpoch {
                topic,
                partition,
                requested,
                current,
            })
        }
    }

    /// Wraps a log error with this partition's name; an I/O error takes the partition's
    /// log directory offline (KIP-112), never to be written again by this process.
    pub fn log_error(&self, source: LogError) -> ReplicaError {
        if is_dir_failure(&source) {
            self.log_dir().fail(&source);
        }
        ReplicaError::Log {
            topic: self.topic_partition.topic.clone(),
            partition: self.topic_partition.partition,
            source,
        }
    }

    /// Appends a producer's batch as leader, then moves the high watermark as far as the
    /// ISR allows (at once when the leader is the only member).
    ///
    /// The log's write lock is taken while the role is still held (lock order: state, then
    /// log), and a role change takes the same two locks, so a broker that has just lost
    /// the leadership can never append at the old epoch.
    pub fn append_as_leader(&self, records: &[u8]) -> Result<AppendInfo, ReplicaError> {
        self.write_as_leader(|log, leader_epoch| log.append_as_leader(records, leader_epoch))
    }

    /// Appends a transaction marker (WriteTxnMarkers from the coordinator) as leader, like
    /// [`Partition::append_as_leader`]; the caller waits for its replication.
    pub fn append_marker_as_leader(
        &self,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        marker: Marker,
    ) -> Result<AppendInfo, ReplicaError> {
        self.write_as_leader(|log, leader_epoch| {
            log.append_marker_as_leader(producer_id, producer_epoch, marker, leader_epoch)
        })
    }

    /// Runs a leader's append `write` (given the log and the leader epoch) with the log's
    /// write lock taken while the role is held, then publishes its effects.
    fn write_as_leader(
        &self,
        write: impl FnOnce(&mut Log, LeaderEpoch) -> Result<AppendInfo, LogError>,
    ) -> Result<AppendInfo, ReplicaError> {
        let state = self.state();
        let leader_epoch = match &state.role {
            Role::Leader(_) => state.leader_epoch,
            Role::Follower { leader } => {
                let leader = *leader;
                drop(state);
                return Err(self.not_leader(leader));
            }
        };
        let mut log = self.log_mut();
        drop(state);
        let info = write(&mut log, leader_epoch).map_err(|e| self.log_error(e))?;
        self.appended_as_leader(log);
        Ok(info)
    }

    /// After a leader's append: publishes the log end, moves the high watermark.
    fn appended_as_leader(&self, mut log: RwLockWriteGuard<'_, Log>) {
        log.retire_stable_transactions(self.high_watermark());
        let log_end_offset = log.log_end_offset();
        drop(log);
        self.publish_log_end_offset(log_end_offset);
        // Only a leader's appends concern the follower fetches parked here.
        self.changes.log_end_moved();
        self.maybe_increment_high_watermark();
        self.check_invariants();
    }

    /// NOT_LEADER_OR_FOLLOWER for this partition, naming the leader if known.
    pub fn not_leader(&self, leader: BrokerId) -> ReplicaError {
        self.not_leader_at(leader, self.leader_epoch())
    }

    /// NOT_LEADER_OR_FOLLOWER naming `leader` at `leader_epoch` (for callers that hold the
    /// role's lock).
    pub fn not_leader_at(&self, leader: BrokerId, leader_epoch: LeaderEpoch) -> ReplicaError {
        ReplicaError::NotLeaderOrFollower {
            topic: self.topic_partition.topic.clone(),
            partition: self.topic_partition.partition,
            leader,
            leader_epoch,
        }
    }

    /// As leader, moves the high watermark to the least log end offset in the maximal ISR
    /// if that is higher. Returns whether it moved.
    ///
    /// Not while fewer replicas than `min.insync.replicas` (capped by the replication
    /// factor) are in sync (KIP-966's strict min ISR): every record below the high
    /// watermark is then on at least that many replicas, which is what lets an eligible
    /// leader replica that left the ISR meanwhile lead without loss.
    pub fn maybe_increment_high_watermark(&self) -> bool {
        let log = self.log();
        let (log_end_offset, min_isr) = (log.log_end_offset(), log.config().min_insync_replicas);
        drop(log);
        let bound = match &self.state().role {
            Role::Leader(leader)
                if leader.effective_isr_len() < min_isr.min(leader.replicas.len()) =>
            {
                return false
            }
            Role::Leader(leader) => leader.high_watermark_bound(log_end_offset),
            Role::Follower { .. } => return false,
        };
        let moved = self.maybe_advance_high_watermark(bound.min(log_end_offset));
        if moved {
            self.check_invariants();
        }
        moved
    }

    /// Moves the high watermark forward to `offset`; returns whether it moved.
    pub fn maybe_advance_high_watermark(&self, offset: Offset) -> bool {
        let moved = self.high_watermark.send_if_modified(|hw| {
            if offset > *hw {
                *hw = offset;
                true
            } else {
                false
            }
        });
        if moved {
            self.changes.changed();
        }
        moved
    }

    /// Applies retention, the flush policy and producer expiry
    /// (`producer.id.expiration.ms`; called by the maintenance task).
    pub fn maintain(&self, now_ms: i64, producer_expiration_ms: i64) -> Result<(), ReplicaError> {
        let high_watermark = self.high_watermark();
        let mut log = self.log_mut();
        let start = log.log_start_offset();
        log.delete_old_segments(now_ms, high_watermark)
            .map_err(|e| self.log_error(e))?;
        if log.log_start_offset() != start {
            self.changes.changed();
        }
        log.maybe_flush_by_time(now_ms)
            .map_err(|e| self.log_error(e))?;
        let expired = log.expire_producers(now_ms, producer_expiration_ms);
        if expired > 0 {
            tracing::debug!(partition = %self.topic_partition, expired, "idle producers expired");
        }
        Ok(())
    }

    /// Swaps a cleaned segment in (the log cleaner's last phase, under the write lock);
    /// returns whether the segments it replaces were still there.
    pub fn replace_with_cleaned(&self, cleaned: CleanedSegment) -> Result<bool, ReplicaError> {
        self.log_mut()
            .replace_with_cleaned(cleaned)
            .map_err(|e| self.log_error(e))
    }

    /// DeleteRecords: moves the log start offset to `offset` (-1: the high watermark) and
    /// returns the new log start offset.
    pub fn delete_records(&self, offset: Offset) -> Result<Offset, ReplicaError> {
        let high_watermark = self.high_watermark();
        let target = if offset == Offset::UNKNOWN {
            high_watermark
        } else {
            offset
        };
        let mut log = self.log_mut();
        if target.0 < 0 || target > high_watermark {
            let source = LogError::OffsetOutOfRange {
                offset,
                log_start_offset: log.log_start_offset(),
                log_end_offset: high_watermark,
            };
            return Err(self.log_error(source));
        }
        let start = log
            .delete_records(target, high_watermark)
            .map_err(|e| self.log_error(e))?;
        self.changes.changed();
        Ok(start)
    }

    /// Applies a changed topic configuration to the log.
    pub fn set_log_config(&self, config: crate::log::LogConfig) {
        let min_insync_replicas = config.min_insync_replicas;
        self.log_mut().set_config(config);
        self.min_insync_replicas
            .store(min_insync_replicas, std::sync::atomic::Ordering::Relaxed);
    }

    /// Flushes and trims the log for a clean shutdown.
    pub fn close(&self) -> Result<(), ReplicaError> {
        self.log_mut().close().map_err(|e| self.log_error(e))
    }

    /// Checks the replication invariants (`invariants`), in release builds too: a broken
    /// one stops the process.
    pub fn check_invariants(&self) {
        invariants::check(self, &self.history);
    }
}

/// The partition's own rules (the role changes and fetches are specified in `roles`).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use crate::replica::roles::broker_ids;

    fn leader_of_two(dir: &std::path::Path, leader_epoch: i32) -> Partition {
        let p = Partition::for_test(dir);
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(leader_epoch),
            leader_epoch,
            broker_ids(&[1, 2]),
            broker_ids(&[1, 2]),
        )
        .expect("leader");
        p
    }

    #[test]
    fn a_clients_leader_epoch_is_fenced_when_older_and_unknown_when_newer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = leader_of_two(dir.path(), 3);
        assert!(
            p.check_leader_epoch(LeaderEpoch(-1)).is_ok(),
            "-1: not given"
        );
        assert!(p.check_leader_epoch(LeaderEpoch(3)).is_ok());
        assert!(matches!(
            p.check_leader_epoch(LeaderEpoch(2)),
            Err(ReplicaError::FencedLeaderEpoch {
                requested: LeaderEpoch(2),
                current: LeaderEpoch(3),
                ..
            })
        ));
        assert!(matches!(
            p.check_leader_epoch(LeaderEpoch(4)),
            Err(ReplicaError::UnknownLeaderEpoch {
                requested: LeaderEpoch(4),
                current: LeaderEpoch(3),
                ..
            })
        ));
    }

    #[test]
    fn a_follower_refuses_a_producers_append_and_names_its_leader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = Partition::for_test(dir.path());
        p.make_follower(BrokerId(2), LeaderEpoch(5), 5)
            .expect("follower");
        assert!(!p.is_leader());
        assert_eq!(p.leader(), BrokerId(2));
        let refused = p.append_as_leader(&encode_batch(1, -1, -1, 0));
        assert!(
            matches!(
                refused,
                Err(ReplicaError::NotLeaderOrFollower {
                    leader: BrokerId(2),
                    leader_epoch: LeaderEpoch(5),
                    ..
                })
            ),
            "{refused:?}"
        );
        assert!(p.check_leader().is_err());
        assert_eq!(p.log().log_end_offset(), Offset(0), "nothing was written");
    }

    #[test]
    fn delete_records_never_goes_past_the_high_watermark() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = leader_of_two(dir.path(), 0);
        p.append_as_leader(&encode_batch(3, -1, -1, 0))
            .expect("append");
        assert_eq!(
            p.high_watermark(),
            Offset(0),
            "the follower has nothing yet"
        );
        assert!(
            p.delete_records(Offset(2)).is_err(),
            "above the high watermark"
        );
        assert_eq!(p.log().log_start_offset(), Offset(0));
        p.make_leader(
            BrokerId(1),
            LeaderEpoch(0),
            1,
            broker_ids(&[1, 2]),
            broker_ids(&[1]),
        )
        .expect("ISR shrinks");
        p.maybe_increment_high_watermark();
        assert_eq!(
            p.high_watermark(),
            Offset(3),
            "a lone leader commits its log"
        );
        assert_eq!(p.delete_records(Offset(-1)).expect("to the HW"), Offset(3));
        assert_eq!(p.offsets().log_start_offset, Offset(3));
    }

    #[test]
    fn a_topic_config_change_reaches_min_insync_replicas() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = Partition::for_test(dir.path());
        assert_eq!(p.min_insync_replicas(), 1);
        let mut config = *p.log().config();
        config.min_insync_replicas = 2;
        p.set_log_config(config);
        assert_eq!(p.min_insync_replicas(), 2);
        assert_eq!(p.log().config().min_insync_replicas, 2);
    }
}
