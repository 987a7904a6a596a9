//! The metadata quorum: an openraft node per controller, with the log and snapshots under
//! `<log.dirs>/__cluster_metadata-0/` and Raft RPCs over the controller listener.
//!
//! Consensus is entirely openraft's; this module supplies its storage ([`log_store`],
//! [`state_machine`]) and its network ([`network`]), and starts the node. A fresh node
//! initializes the membership from `controller.quorum.voters` (every voter may do the same,
//! which openraft allows: the first log entry is identical everywhere; they take turns by
//! id so that voters started together do not split the first vote).
// openraft's traits fix their error types (StorageError, RPCError), large as they are.
#![allow(clippy::result_large_err)]

pub mod log_store;
pub mod network;
pub mod state_machine;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use openraft::error::Fatal;
use openraft::{BasicNode, Config, Raft, RaftMetrics, SnapshotPolicy};
use tokio::sync::{watch, Notify};

use super::error::ControllerError;
use super::publisher::Publisher;
pub use super::raft_types::TypeConfig;
use super::state::{Record, RecordResult};
use crate::config::{BrokerConfig, Voter};
use crate::peer::Outbound;
use log_store::LogStore;
use state_machine::StateMachineStore;

/// The Raft node of this controller.
pub type MetadataRaft = Raft<TypeConfig>;

/// Directory of the metadata log inside the log directory (Kafka's name for it).
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";
/// Entries applied between two snapshots.
const SNAPSHOT_EVERY_ENTRIES: u64 = 1000;
/// Entries kept in the log behind the last snapshot, for followers that lag a little.
const ENTRIES_KEPT_BEHIND_SNAPSHOT: u64 = 200;

/// A started Raft node and its state machine.
#[derive(Clone)]
pub struct Quorum {
    pub raft: MetadataRaft,
    pub state_machine: StateMachineStore,
    pub node_id: u64,
    /// When a quorum last confirmed this node's leadership ([`Quorum::confirm_leadership`]).
    confirmed: Arc<Mutex<Option<Instant>>>,
    /// Told when a quorum confirms a leadership that was not confirmed before.
    newly_confirmed: Arc<Notify>,
    /// How long a confirmation lasts: twice the election timeout, the time Kafka's KRaft
    /// leader waits for a majority's fetches before it resigns (its "check quorum").
    lease: Duration,
    /// A quorum of one voter: its own election is its confirmation.
    alone: bool,
}

fn raft_config(config: &BrokerConfig) -> Result<Config, ControllerError> {
    let election_ms = config.quorum_election_timeout_ms.max(10);
    let raft = Config {
        cluster_name: "highwater".into(),
        election_timeout_min: election_ms,
        election_timeout_max: election_ms * 2,
        heartbeat_interval: (election_ms / 5).max(5),
        snapshot_policy: SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY_ENTRIES),
        max_in_snapshot_log_to_keep: ENTRIES_KEPT_BEHIND_SNAPSHOT,
        ..Config::default()
    };
    raft.validate().map_err(|e| ControllerError::Quorum {
        reason: e.to_string(),
    })
}

/// The Raft node's metrics, as watched.
pub type Metrics = watch::Receiver<RaftMetrics<u64, BasicNode>>;

/// Who leads in which term, as far as this node knows.
pub type Leadership = (u64, Option<u64>);

/// The term and leader in `metrics`.
pub fn leadership(metrics: &RaftMetrics<u64, BasicNode>) -> Leadership {
    (metrics.current_term, metrics.current_leader)
}

/// Waits at most `timeout` for a leadership other than `seen`; false once the Raft node
/// stopped. The metrics change at every acknowledged heartbeat: waiting for any change
/// would spin the caller (and, through [`Quorum::keep_confirming`], the network).
async fn wait_for_leadership(metrics: &mut Metrics, seen: Leadership, timeout: Duration) -> bool {
    let changed = tokio::time::timeout(timeout, metrics.wait_for(|m| leadership(m) != seen));
    !matches!(changed.await, Ok(Err(_)))
}

/// The pause between two voters' initializations, by rank: voters started together would
/// otherwise all campaign in term 1, split the vote and wait out an election timeout.
const INITIALIZE_STAGGER: Duration = Duration::from_millis(40);

/// Initializes a pristine node's membership from the voters, the lowest id first and each
/// next voter [`INITIALIZE_STAGGER`] later. A voter that has meanwhile granted a vote or
/// received the log is already part of the cluster and skips it (openraft would refuse it,
/// logging an error); any majority of voters still forms the cluster without the others.
fn initialize_staggered(raft: MetadataRaft, config: &BrokerConfig) {
    let voters = members(&config.voters);
    let rank = voters.keys().position(|id| *id == config.node_id as u64);
    let delay = INITIALIZE_STAGGER * rank.unwrap_or(0) as u32;
    tokio::spawn(async move {
        if !delay.is_zero() {
            // Even a zero sleep waits for the timer's next millisecond tick.
            tokio::time::sleep(delay).await;
        }
        let joined = {
            let metrics = raft.metrics().borrow().clone();
            metrics.current_term > 0 || metrics.last_log_index.is_some()
        };
        if joined {
            tracing::info!("metadata quorum formed by another voter");
            return;
        }
        tracing::info!(voters = voters.len(), "initializing the metadata quorum");
        if let Err(error) = raft.initialize(voters).await {
            // Another voter reached us first: its log now rules.
            tracing::info!(%error, "metadata quorum already initialized");
        }
    });
}

fn members(voters: &[Voter]) -> BTreeMap<u64, BasicNode> {
    voters
        .iter()
        .map(|v| {
            (
                v.node_id as u64,
                BasicNode::new(format!("{}:{}", v.host, v.port)),
            )
        })
        .collect()
}

fn quorum_error(error: impl std::fmt::Display) -> ControllerError {
    ControllerError::Quorum {
        reason: error.to_string(),
    }
}

/// Refuses to start when `controller.quorum.voters` names other voters than the metadata
/// log's membership (changing the quorum needs a membership change, which highwater does
/// not make; a silently different voter set could split the cluster's history).
fn check_membership(
    state_machine: &StateMachineStore,
    voters: &[Voter],
) -> Result<(), ControllerError> {
    let mut logged = state_machine.voter_ids();
    if logged.is_empty() {
        return Ok(());
    }
    logged.sort_unstable();
    let mut configured: Vec<u64> = voters.iter().map(|v| v.node_id as u64).collect();
    configured.sort_unstable();
    if logged == configured {
        return Ok(());
    }
    let reason = format!(
        "controller.quorum.voters names nodes {configured:?}, but the metadata log's quorum \
         is {logged:?}"
    );
    tracing::error!(%reason, "inconsistent quorum configuration");
    Err(ControllerError::Quorum { reason })
}

impl Quorum {
    /// Opens the log and snapshot in `log_dir` and starts the Raft node; a node that has
    /// never stored anything initializes the membership from the voters.
    pub async fn start(
        config: &BrokerConfig,
        log_dir: &Path,
        publisher: Arc<Publisher>,
        outbound: Outbound,
    ) -> Result<Quorum, ControllerError> {
        let dir = log_dir.join(METADATA_LOG_DIR);
        let log_store = LogStore::open(&dir).map_err(quorum_error)?;
        let state_machine = StateMachineStore::open(&dir, publisher).map_err(quorum_error)?;
        let pristine = log_store.is_pristine();
        let node_id = config.node_id as u64;
        let raft = Raft::new(
            node_id,
            Arc::new(raft_config(config)?),
            network::Network::new(outbound),
            log_store,
            state_machine.clone(),
        )
        .await
        .map_err(quorum_error)?;
        if !pristine {
            check_membership(&state_machine, &config.voters)?;
        }
        if pristine {
            initialize_staggered(raft.clone(), config);
        }
        Ok(Quorum {
            raft,
            state_machine,
            node_id,
            confirmed: Arc::new(Mutex::new(None)),
            newly_confirmed: Arc::new(Notify::new()),
            lease: Duration::from_millis(2 * config.quorum_election_timeout_ms.max(10)),
            alone: config.voters.len() <= 1,
        })
    }

    /// The current Raft leader, if known; never this node while its leadership is not
    /// confirmed by a quorum within the lease, so that a leader cut off from the majority
    /// stops acting (and its own broker looks for the majority's controller) at once,
    /// instead of when it hears of the next term.
    pub fn leader(&self) -> Option<i32> {
        let leader = self.raft.metrics().borrow().current_leader;
        let me = leader == Some(self.node_id) && !self.alone;
        let confirmed = *self
            .confirmed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match me && confirmed.is_none_or(|at| at.elapsed() >= self.lease) {
            true => None,
            false => leader.map(|l| l as i32),
        }
    }

    /// Whether this node is the leader, confirmed by a quorum within the lease.
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.node_id as i32)
    }

    /// The quorum as its leader sees it (DescribeQuorum): `None` on a node that does not
    /// lead. Offsets are Kafka's (the next index): a voter's log end is one past the last
    /// entry the leader knows it holds, the high watermark one past the last applied.
    pub fn describe(&self) -> Option<QuorumDescription> {
        if !self.is_leader() {
            return None;
        }
        let metrics = self.raft.metrics().borrow().clone();
        let next = |index: Option<u64>| index.map_or(0, |i| i as i64 + 1);
        let own_end = next(metrics.last_log_index);
        let matched = metrics.replication.clone().unwrap_or_default();
        let voters = metrics
            .membership_config
            .membership()
            .voter_ids()
            .map(|id| {
                let end = match id == self.node_id {
                    true => own_end,
                    false => matched
                        .get(&id)
                        .and_then(|m| m.as_ref())
                        .map_or(0, |log_id| log_id.index as i64 + 1),
                };
                (id as i32, end)
            })
            .collect();
        Some(QuorumDescription {
            leader_id: self.node_id as i32,
            leader_epoch: metrics.current_term as i32,
            high_watermark: next(metrics.last_applied.map(|l| l.index)),
            voters,
        })
    }

    /// The error the Raft node stopped on (a storage error, a panic of its core), if it
    /// stopped on one: `None` while it runs, after a shutdown, and when its core was dropped
    /// with its runtime (a process that exits, a node a test kills) before it could stop.
    pub fn failure(&self) -> Option<String> {
        failure_of(&self.raft.metrics().borrow().running_state)
    }

    /// Whether Raft elected this node, confirmed or not.
    pub fn is_elected(&self) -> bool {
        self.raft.metrics().borrow().current_leader == Some(self.node_id)
    }

    /// Asks a quorum whether this node still leads (a round of heartbeats, waited for at
    /// most half the lease) and, if so, renews the lease; returns whether it did.
    async fn confirm_leadership(&self) -> bool {
        let asked = Instant::now();
        let answer = tokio::time::timeout(self.lease / 2, self.raft.get_read_log_id()).await;
        let confirmed = matches!(answer, Ok(Ok(_)));
        if confirmed {
            let mut last = self
                .confirmed
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_none_or(|at| at.elapsed() >= self.lease) {
                self.newly_confirmed.notify_one();
            }
            *last = Some(asked);
        }
        confirmed
    }

    /// Waits at most `timeout` for a leadership other than `seen` ([`leadership`]) or for a
    /// quorum to newly confirm this node's; false once the Raft node stopped. Other changes
    /// of the Raft metrics (each heartbeat's acknowledgement among them) do not wake it.
    pub async fn leadership_change(
        &self,
        metrics: &mut Metrics,
        seen: Leadership,
        timeout: Duration,
    ) -> bool {
        tokio::select! {
            changed = wait_for_leadership(metrics, seen, timeout) => changed,
            () = self.newly_confirmed.notified() => true,
        }
    }

    /// Renews the lease while this node is elected: at once after an election, then four
    /// times per lease. Runs until dropped or the Raft node stops.
    pub async fn keep_confirming(&self) {
        let mut metrics = self.raft.metrics();
        let mut was_confirmed = true;
        loop {
            let seen = leadership(&metrics.borrow_and_update());
            if self.is_elected() && !self.alone {
                let confirmed = self.confirm_leadership().await;
                if was_confirmed && !confirmed {
                    tracing::warn!(
                        lease_ms = self.lease.as_millis() as u64,
                        "a quorum no longer confirms this controller's leadership; \
                         it stops acting as the active controller"
                    );
                }
                was_confirmed = confirmed;
            }
            if !wait_for_leadership(&mut metrics, seen, self.lease / 4).await {
                return; // the Raft node stopped
            }
        }
    }

    /// Proposes `record` and waits until it is committed and applied here (only the leader
    /// can; others get [`ControllerError::NotController`]).
    pub async fn propose(&self, record: Record) -> Result<RecordResult, ControllerError> {
        match self.raft.client_write(record).await {
            Ok(response) => Ok(response.data),
            Err(openraft::error::RaftError::APIError(
                openraft::error::ClientWriteError::ForwardToLeader(forward),
            )) => Err(ControllerError::NotController {
                leader: forward.leader_id.map(|l| l as i32),
            }),
            Err(error) => Err(quorum_error(error)),
        }
    }
}

/// The failure in openraft's running state, if any: [`Fatal::Stopped`] is a shutdown.
fn failure_of(running: &Result<(), Fatal<u64>>) -> Option<String> {
    match running {
        Ok(()) | Err(Fatal::Stopped) => None,
        Err(fatal) => Some(fatal.to_string()),
    }
}

/// The metadata quorum as its leader describes it (Kafka's DescribeQuorum).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuorumDescription {
    pub leader_id: i32,
    /// The Raft term.
    pub leader_epoch: i32,
    pub high_watermark: i64,
    /// Every voter and its log end offset as the leader knows it.
    pub voters: Vec<(i32, i64)>,
}

impl std::fmt::Debug for Quorum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quorum")
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{ErrorSubject, ErrorVerb, StorageError};

    #[test]
    fn only_an_error_is_a_failure_not_a_shutdown_nor_a_dropped_core() {
        assert_eq!(
            failure_of(&Ok(())),
            None,
            "running, or dropped with its runtime"
        );
        assert_eq!(failure_of(&Err(Fatal::Stopped)), None, "shut down");
        assert_eq!(failure_of(&Err(Fatal::Panicked)), Some("panicked".into()));
        let io = std::io::Error::other("disk gone");
        let storage = StorageError::from_io_error(ErrorSubject::Logs, ErrorVerb::Write, io);
        let failure = failure_of(&Err(Fatal::StorageError(storage))).expect("a failure");
        assert!(failure.contains("disk gone"), "{failure}");
    }
}
