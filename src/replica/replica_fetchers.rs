//! Runs the follower side of replication for this broker: one fetch loop per leader broker
//! that leads a partition this broker follows, each with its own connection, started when
//! the metadata makes this broker a follower there and ended when it no longer follows
//! anything on that leader. Loops borrow the manager; nothing is spawned.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::fetch_session::FetchSession;
use super::fetcher::fetch_round;
use super::manager::ReplicaManager;
use super::partition::{Partition, Role, THROTTLED_AS_FOLLOWER};
use super::tcp_link::TcpLink;
use crate::ids::BrokerId;

/// The followed partitions by leader, and the roles version and failed log directories
/// they were grouped at.
#[derive(Debug, Default)]
pub struct Followed {
    key: Option<(u64, usize)>,
    by_leader: HashMap<BrokerId, Vec<Arc<Partition>>>,
}

/// How long a follower's fetch waits at the leader for new data.
const REPLICA_FETCH_WAIT_MS: i32 = 500;
/// Pause after a failed round (leader down or moved) before the next.
const REPLICA_FETCH_BACKOFF: Duration = Duration::from_millis(200);
/// Pause of a fetcher whose every partition waits for the follower throttle.
const THROTTLED_PAUSE: Duration = Duration::from_millis(100);
/// How often the set of leaders to fetch from is re-read from the partitions.
const RECONCILE_INTERVAL: Duration = Duration::from_millis(200);

impl ReplicaManager {
    /// Partitions hosted here that follow `leader`.
    pub fn followed_partitions(&self, leader: BrokerId) -> Vec<Arc<Partition>> {
        self.with_followed(|by_leader| by_leader.get(&leader).cloned().unwrap_or_default())
    }

    /// Leaders (other brokers) of the partitions this broker follows.
    fn followed_leaders(&self) -> HashSet<BrokerId> {
        let local = self.local_id();
        self.with_followed(|by_leader| {
            by_leader
                .keys()
                .copied()
                .filter(|l| l.0 >= 0 && *l != local)
                .collect()
        })
    }

    /// Runs `f` on the followed partitions grouped by leader, regrouped only when an image
    /// was applied or a log directory failed since the last time: a fetcher of thousands
    /// of partitions does not walk every hosted partition each round.
    fn with_followed<T>(&self, f: impl FnOnce(&HashMap<BrokerId, Vec<Arc<Partition>>>) -> T) -> T {
        let key = (
            self.roles_version.load(Ordering::Acquire),
            self.offline_dir_count(),
        );
        let mut followed = self.followed.lock().unwrap_or_else(PoisonError::into_inner);
        if followed.key != Some(key) {
            let mut by_leader: HashMap<BrokerId, Vec<Arc<Partition>>> = HashMap::new();
            for partition in self.hosted() {
                let followed = match partition.state().role {
                    Role::Follower { leader } => Some(leader),
                    Role::Leader(_) => None,
                };
                if let Some(leader) = followed {
                    by_leader.entry(leader).or_default().push(partition);
                }
            }
            *followed = Followed {
                key: Some(key),
                by_leader,
            };
        }
        f(&followed.by_leader)
    }

    /// The address clients use for broker `node_id`, from the latest image.
    fn broker_address(&self, node_id: BrokerId) -> Option<String> {
        let image = Arc::clone(&self.image.read().unwrap_or_else(PoisonError::into_inner));
        image
            .broker(node_id.0)
            .map(|b| format!("{}:{}", b.host, b.port))
    }

    /// Fetches from every leader this broker follows, until the task is dropped.
    pub async fn run_fetchers(&self) {
        let mut running: HashSet<BrokerId> = HashSet::new();
        let mut loops = FuturesUnordered::new();
        let mut reconcile = tokio::time::interval(RECONCILE_INTERVAL);
        loop {
            tokio::select! {
                Some(leader) = loops.next(), if !loops.is_empty() => {
                    running.remove(&leader);
                }
                _ = reconcile.tick() => {
                    for leader in self.followed_leaders() {
                        if running.insert(leader) {
                            loops.push(self.fetch_loop(leader));
                        }
                    }
                }
            }
        }
    }

    /// Fetches from `leader` while this broker follows anything there; returns `leader`.
    async fn fetch_loop(&self, leader: BrokerId) -> BrokerId {
        let local = self.local_id();
        let mut link: Option<(String, TcpLink)> = None;
        let mut session = FetchSession::default();
        tracing::info!(%leader, "replica fetcher started");
        loop {
            let mut partitions = self.followed_partitions(leader);
            if partitions.is_empty() {
                tracing::info!(%leader, "replica fetcher stopped: nothing left to follow");
                return leader;
            }
            // Throttled replicas out of the ISR wait while the follower quota is exceeded
            // (Kafka's shouldFollowerThrottle).
            if self.throttle_exceeded(THROTTLED_AS_FOLLOWER) {
                partitions.retain(|p| !p.is_throttled(THROTTLED_AS_FOLLOWER));
                if partitions.is_empty() {
                    tokio::time::sleep(THROTTLED_PAUSE).await;
                    continue;
                }
            }
            let Some(address) = self.broker_address(leader) else {
                tokio::time::sleep(REPLICA_FETCH_BACKOFF).await;
                continue;
            };
            if link.as_ref().is_none_or(|(a, _)| *a != address) {
                link = Some((
                    address.clone(),
                    TcpLink::new(self.outbound().clone(), address),
                ));
            }
            let Some((_, tcp)) = link.as_mut() else {
                continue;
            };
            let round = fetch_round(
                tcp,
                &mut session,
                (local, leader),
                &partitions,
                REPLICA_FETCH_WAIT_MS,
            )
            .await;
            if let Ok(round) = &round {
                let now = self.clock().now_ms();
                let quota = &self.replication_quotas().follower;
                quota.record(round.throttled_bytes, now);
            }
            match round {
                Ok(round) if round.errors == 0 => {}
                Ok(_) => tokio::time::sleep(REPLICA_FETCH_BACKOFF).await,
                Err(error) => {
                    tracing::debug!(%leader, %error, "replica fetch round failed");
                    tokio::time::sleep(REPLICA_FETCH_BACKOFF).await;
                }
            }
        }
    }
}
