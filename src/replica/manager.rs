//! The replica manager: every partition this broker hosts, created and removed as metadata
//! images arrive, with their logs opened from (and closed back to) the log directory.
//!
//! On start it reads Kafka's clean-shutdown marker (`.kafka_cleanshutdown`): without it,
//! each log's active segment is re-scanned. On a clean stop it closes every log and writes
//! the marker again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use dashmap::DashMap;

use super::checkpoints;
use super::cleaner::LogCleaner;
use super::error::ReplicaError;
use super::log_dirs::{is_dir_failure, LogDir, LogDirs};
use super::log_mover::{self, FutureReplica, Moves};
use super::parallel;
use super::partition::{
    Partition, ReplicationChanges, TopicPartition, THROTTLED_AS_FOLLOWER, THROTTLED_AS_LEADER,
};
use super::quota::{self, ReplicationQuotas};
use crate::clock::Clock;
use crate::config::{topic, BrokerConfig, LiveConfig};
use crate::ids::{BrokerId, LeaderEpoch, Offset};
use crate::log::checkpoint::{write_atomically, write_unsynced};
use crate::log::segment::SegmentConfig;
use crate::log::CompactionConfig;
use crate::log::{Log, LogConfig, LogError, OpenOptions};
use crate::metadata::uuid_text::base64url;
use crate::metadata::{MetadataImage, PartitionImage, TopicImage};
use crate::metrics::Metrics;
use crate::peer::Outbound;

/// Kafka's clean-shutdown marker file name.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// The per-partition file that records the topic id.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// All partitions hosted here.
#[derive(Debug)]
pub struct ReplicaManager {
    config: Arc<BrokerConfig>,
    /// The configuration in force: `config` with the dynamic broker configs of the last
    /// image applied (topic defaults, the cleaner's, throttles, connection limits).
    live: LiveConfig,
    partitions: DashMap<TopicPartition, Arc<Partition>>,
    /// `log.dirs`, with the checkpoints each held at start (a follower starts from its
    /// checkpointed high watermark; a leader recomputes its own).
    log_dirs: LogDirs,
    /// Partitions assigned here whose log could not be opened because its directory had
    /// failed: they answer KAFKA_STORAGE_ERROR like the offline replicas that were open.
    unopened: DashMap<TopicPartition, Arc<LogDir>>,
    /// The image the hosted partitions were last brought in line with.
    pub(super) image: RwLock<Arc<MetadataImage>>,
    /// Serializes [`ReplicaManager::apply_image`] (called by request handlers and by the
    /// metadata follower).
    applying: Mutex<()>,
    cleaner: Arc<LogCleaner>,
    /// The time every hosted partition reads.
    clock: Clock,
    /// Moved whenever a hosted partition appends as leader, and after every image applied
    /// (follower fetches park on it).
    changes: ReplicationChanges,
    /// The broker's instruments (each log's flushes are timed into them).
    metrics: Arc<Metrics>,
    /// This node's side of the test faults on links to leaders it follows.
    outbound: Outbound,
    /// Replicas being moved to another of `log.dirs` (AlterReplicaLogDirs).
    moves: Moves,
    /// What throttled replicas moved recently (`quota`).
    quotas: ReplicationQuotas,
    /// Bumped after every image applied: the hosted partitions and their roles may have
    /// changed (the fetchers' grouping by leader is rebuilt then, not every round).
    pub(super) roles_version: std::sync::atomic::AtomicU64,
    /// The followed partitions by leader, as of a roles version (`replica_fetchers`).
    pub(super) followed: Mutex<super::replica_fetchers::Followed>,
    /// What this process last wrote to each checkpoint file: an unchanged one is not
    /// rewritten (an idle broker of thousands of partitions rewrote three files every 5 s).
    checkpointed: Mutex<HashMap<PathBuf, Vec<(TopicPartition, Offset)>>>,
}

/// Stops the log cleaner's running round when the maintenance task ends or is aborted.
struct StopCleanerOnDrop(Arc<LogCleaner>);

impl Drop for StopCleanerOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The log configuration of a topic: broker defaults overridden by topic configs.
pub fn log_config(broker: &BrokerConfig, topic_image: &TopicImage) -> LogConfig {
    let n = |key| topic::number(broker, &topic_image.configs, key).max(0) as usize;
    let ms = |key| topic::number(broker, &topic_image.configs, key).max(0);
    LogConfig {
        segment: SegmentConfig {
            segment_bytes: n("segment.bytes").max(1024),
            segment_index_bytes: n("segment.index.bytes").max(64),
            index_interval_bytes: n("index.interval.bytes"),
        },
        max_message_bytes: n("max.message.bytes"),
        timestamp_before_max_ms: ms("message.timestamp.before.max.ms"),
        timestamp_after_max_ms: ms("message.timestamp.after.max.ms"),
        log_append_time: topic::value(broker, &topic_image.configs, "message.timestamp.type")
            == "LogAppendTime",
        segment_ms: ms("segment.ms"),
        flush_messages: ms("flush.messages").max(1),
        flush_ms: ms("flush.ms"),
        retention_ms: topic::number(broker, &topic_image.configs, "retention.ms"),
        retention_bytes: topic::number(broker, &topic_image.configs, "retention.bytes"),
        cleanup_delete: topic::has_cleanup_policy(broker, &topic_image.configs, "delete"),
        compaction: CompactionConfig {
            compact: topic::has_cleanup_policy(broker, &topic_image.configs, "compact"),
            delete_retention_ms: ms("delete.retention.ms"),
            min_cleanable_dirty_ratio: topic::fraction(
                broker,
                &topic_image.configs,
                "min.cleanable.dirty.ratio",
            ),
            min_compaction_lag_ms: ms("min.compaction.lag.ms"),
            max_compaction_lag_ms: ms("max.compaction.lag.ms"),
        },
        min_insync_replicas: n("min.insync.replicas").max(1),
    }
}

fn partition_dir(log_dir: &Path, tp: &TopicPartition) -> PathBuf {
    log_dir.join(format!("{}-{}", tp.topic, tp.partition))
}

impl ReplicaManager {
    /// Prepares the manager; partitions are opened by [`ReplicaManager::apply_image`] and
    /// read `clock`; their flushes are timed into `metrics`.
    pub fn open(
        config: Arc<BrokerConfig>,
        clock: Clock,
        metrics: Arc<Metrics>,
        outbound: Outbound,
    ) -> Result<Self, LogError> {
        if let Err(error) = log_mover::recover_moves(&config.log_dirs) {
            tracing::error!(%error, "cannot clean up replica moves left by the last run");
        }
        let log_dirs = LogDirs::open(&config.log_dirs)?;
        let cleaner = Arc::new(LogCleaner::open(&config)?);
        Ok(ReplicaManager {
            live: LiveConfig::new(Arc::clone(&config)),
            config,
            partitions: DashMap::new(),
            log_dirs,
            unopened: DashMap::new(),
            image: RwLock::new(Arc::new(MetadataImage::default())),
            applying: Mutex::new(()),
            cleaner,
            clock,
            changes: ReplicationChanges::default(),
            metrics,
            outbound,
            moves: Moves::default(),
            quotas: ReplicationQuotas::default(),
            roles_version: Default::default(),
            followed: Default::default(),
            checkpointed: Default::default(),
        })
    }

    /// A version moved by every change a follower's fetch could see here: see
    /// [`ReplicationChanges`], plus one per failed log directory.
    pub fn replication_version(&self) -> u64 {
        let failed = self.offline_dir_count() as u64;
        self.changes.version().wrapping_add(failed)
    }

    /// A receiver that sees every later append as leader here, and every image applied.
    pub fn subscribe_log_ends(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The clock the hosted partitions read.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// This node's side of the test faults on its outbound links.
    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }

    /// The broker's log directories.
    pub fn log_dirs(&self) -> &LogDirs {
        &self.log_dirs
    }

    /// Every partition assigned here whose replica is on the failed directory `dir`.
    pub fn offline_partitions_in(&self, dir: &LogDir) -> Vec<TopicPartition> {
        let open = self.partitions_in(dir).into_iter();
        let unopened = self
            .unopened
            .iter()
            .filter(|p| p.value().path == dir.path)
            .map(|p| p.key().clone());
        open.map(|p| p.topic_partition.clone())
            .chain(unopened)
            .collect()
    }

    /// The hosted partitions whose log directory is `dir`.
    pub fn partitions_in(&self, dir: &LogDir) -> Vec<Arc<Partition>> {
        self.partitions
            .iter()
            .filter(|p| p.value().log_dir().path == dir.path)
            .map(|p| Arc::clone(p.value()))
            .collect()
    }

    /// The partition `topic`-`partition`, if hosted here; a partition of the cluster hosted
    /// elsewhere is NOT_LEADER_OR_FOLLOWER (with its leader), an unknown one
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn partition(&self, topic: &str, partition: i32) -> Result<Arc<Partition>, ReplicaError> {
        let tp = TopicPartition {
            topic: topic.to_string(),
            partition,
        };
        // The hosted partitions first: every fetch of thousands of partitions looks each up.
        let offline_dir = match self.partitions.get(&tp) {
            Some(found) if !found.is_offline() => return Ok(Arc::clone(found.value())),
            Some(found) => Some(found.log_dir().path.clone()),
            None => self.unopened.get(&tp).map(|dir| dir.path.clone()),
        };
        if let Some(log_dir) = offline_dir {
            return Err(ReplicaError::LogDirOffline {
                topic: tp.topic,
                partition,
                log_dir,
            });
        }
        let image = Arc::clone(&self.image.read().unwrap_or_else(PoisonError::into_inner));
        match image.topic(topic).and_then(|t| t.partition(partition)) {
            Some(elsewhere) => Err(ReplicaError::NotLeaderOrFollower {
                topic: tp.topic,
                partition,
                leader: BrokerId(elsewhere.leader),
                leader_epoch: LeaderEpoch(elsewhere.leader_epoch),
            }),
            None => Err(ReplicaError::UnknownTopicOrPartition {
                topic: tp.topic,
                partition,
            }),
        }
    }

    /// The partition `topic`-`partition` if this broker leads it (what clients may produce
    /// to and consume from); NOT_LEADER_OR_FOLLOWER otherwise.
    pub fn leader_partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, ReplicaError> {
        let found = self.partition(topic, partition)?;
        found.check_leader()?;
        Ok(found)
    }

    /// Whether partition `index` of `topic_image` has a replica on this broker.
    fn hosts(&self, topic_image: &TopicImage, index: i32) -> bool {
        topic_image
            .partition(index)
            .is_some_and(|p| p.replicas.contains(&self.config.node_id))
    }

    /// Brings the hosted partitions in line with `image`: opens logs of new partitions with
    /// a replica here, updates leaders and epochs, and removes (and deletes from disk)
    /// partitions of deleted topics or no longer assigned here.
    pub fn apply_image(&self, image: &Arc<MetadataImage>) -> Result<(), ReplicaError> {
        let _applying = self.applying.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = std::mem::replace(
            &mut *self.image.write().unwrap_or_else(PoisonError::into_inner),
            Arc::clone(image),
        );
        let stale: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|p| {
                image.topic(&p.key().topic).is_none_or(|t| {
                    t.topic_id != p.value().topic_id || !self.hosts(t, p.key().partition)
                })
            })
            .map(|p| p.key().clone())
            .collect();
        for tp in stale {
            self.remove_partition(&tp);
        }
        let broker_reconfigured = self.live.update(image.broker_layers(self.config.node_id));
        let live = self.live.get();
        if broker_reconfigured {
            self.cleaner.reconfigure(&live);
        }
        let mut missing = Vec::new();
        let mut changing = Vec::new();
        for topic_image in image.topics.values() {
            let reconfigured = broker_reconfigured
                || previous
                    .topic(&topic_image.name)
                    .is_some_and(|old| old.configs != topic_image.configs);
            let config = log_config(&live, topic_image);
            for (index, wanted) in topic_image.partitions.iter().enumerate() {
                let tp = TopicPartition {
                    topic: topic_image.name.clone(),
                    partition: index as i32,
                };
                if !self.hosts(topic_image, tp.partition) {
                    continue;
                }
                match self.partitions.get(&tp) {
                    // A replica on a failed log directory takes no role until a restart.
                    Some(hosted) if hosted.is_offline() => {}
                    Some(hosted) => {
                        if reconfigured {
                            hosted.set_log_config(config);
                        }
                        hosted.set_throttles(self.throttles(topic_image, tp.partition, wanted));
                        changing.push((Arc::clone(hosted.value()), wanted));
                    }
                    None => missing.push((tp, topic_image)),
                }
            }
        }
        self.take_roles(&changing);
        let opened = self.open_partitions(&missing);
        self.roles_version
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        // Parked follower fetches read again: a partition may have changed its role.
        self.changes.log_end_moved();
        opened
    }

    /// How many images were applied (a change says roles may have changed).
    pub fn roles_version(&self) -> u64 {
        self.roles_version
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Gives each hosted partition its role in the new image, many at once (a new leader
    /// epoch costs a checkpoint's fsyncs). A partition that cannot take its role logs why.
    fn take_roles(&self, changing: &[(Arc<Partition>, &PartitionImage)]) {
        let node_id = self.local_id();
        parallel::for_all(changing, |(partition, wanted)| {
            if let Err(error) = partition.apply_partition_image(node_id, wanted) {
                tracing::error!(partition = %partition.topic_partition, %error,
                    "cannot take the partition's new role");
            }
        });
    }

    /// Which replication throttles apply to this broker's replica of partition `index` of
    /// `topic`: as leader when the leader list names it, as follower when the follower
    /// list names it and it is out of the ISR.
    fn throttles(&self, topic: &TopicImage, index: i32, wanted: &PartitionImage) -> u8 {
        let me = self.config.node_id;
        let listed = |key: &str| {
            topic
                .configs
                .get(key)
                .is_some_and(|list| quota::names(list, index, me))
        };
        let mut throttles = 0;
        if listed("leader.replication.throttled.replicas") {
            throttles |= THROTTLED_AS_LEADER;
        }
        if listed("follower.replication.throttled.replicas") && !wanted.isr.contains(&me) {
            throttles |= THROTTLED_AS_FOLLOWER;
        }
        throttles
    }

    /// What throttled replicas moved recently, as leader and as follower.
    pub fn replication_quotas(&self) -> &ReplicationQuotas {
        &self.quotas
    }

    /// Whether replication throttle `which` ([`THROTTLED_AS_LEADER`] or
    /// [`THROTTLED_AS_FOLLOWER`]) is over its rate now.
    pub fn throttle_exceeded(&self, which: u8) -> bool {
        let (quota, key) = match which {
            THROTTLED_AS_LEADER => (&self.quotas.leader, "leader.replication.throttled.rate"),
            _ => (&self.quotas.follower, "follower.replication.throttled.rate"),
        };
        quota.is_exceeded(quota::rate(&self.live.get(), key), self.clock.now_ms())
    }

    /// Every partition hosted here on a live log directory.
    pub fn hosted(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .iter()
            .filter(|p| !p.value().is_offline())
            .map(|p| Arc::clone(p.value()))
            .collect()
    }

    /// How many of `log.dirs` have failed.
    pub fn offline_dir_count(&self) -> usize {
        self.log_dirs
            .all()
            .iter()
            .filter(|d| d.is_offline())
            .count()
    }

    /// Replicas assigned here whose log directory failed (open or never opened).
    pub fn offline_count(&self) -> usize {
        let open = self.partitions.iter().filter(|p| p.value().is_offline());
        open.count() + self.unopened.len()
    }

    /// The broker's configuration as started (static keys).
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// This broker's id (`node.id`).
    pub fn local_id(&self) -> BrokerId {
        BrokerId(self.config.node_id)
    }

    /// The broker's configuration in force, dynamic broker configs applied.
    pub fn live_config(&self) -> Arc<BrokerConfig> {
        self.live.get()
    }

    /// Changes of the configuration in force.
    pub fn subscribe_config(&self) -> tokio::sync::watch::Receiver<Arc<BrokerConfig>> {
        self.live.subscribe()
    }

    /// Opens logs on as many threads as there are cores (recovery is CPU and I/O bound;
    /// a broker with thousands of partitions starts in parallel, as Kafka's
    /// `num.recovery.threads.per.data.dir` does).
    fn open_partitions(
        &self,
        missing: &[(TopicPartition, &Arc<TopicImage>)],
    ) -> Result<(), ReplicaError> {
        parallel::for_each(missing, |(tp, topic_image)| {
            self.open_and_host(tp, topic_image)
        })
    }

    /// Opens `tp` and hosts it; a partition whose log directory failed is left unopened
    /// (and offline), any other failure to open is an error.
    fn open_and_host(&self, tp: &TopicPartition, image: &TopicImage) -> Result<(), ReplicaError> {
        if self.unopened.contains_key(tp) {
            return Ok(());
        }
        let offline = |dir: &Arc<LogDir>, error: &ReplicaError| {
            tracing::error!(partition = %tp, %error, "replica offline: its log directory failed");
            self.unopened.insert(tp.clone(), Arc::clone(dir));
        };
        let log_dir = match self.log_dir_for(tp) {
            Ok(dir) => dir,
            Err(error) => {
                let failed = self.log_dirs.holding(tp).or(self.log_dirs.all().first());
                if let Some(dir) = failed {
                    offline(dir, &error);
                }
                return Ok(());
            }
        };
        match self.open_partition(tp, image, Arc::clone(&log_dir)) {
            Ok(partition) => {
                self.partitions.insert(tp.clone(), Arc::new(partition));
                Ok(())
            }
            Err(error) if log_dir.is_offline() => {
                offline(&log_dir, &error);
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    fn open_partition(
        &self,
        tp: &TopicPartition,
        image: &TopicImage,
        log_dir: Arc<LogDir>,
    ) -> Result<Partition, ReplicaError> {
        let dir = partition_dir(&log_dir.path, tp);
        let wrap = |source| {
            if is_dir_failure(&source) {
                log_dir.fail(&source);
            }
            ReplicaError::Log {
                topic: tp.topic.clone(),
                partition: tp.partition,
                source,
            }
        };
        let options = OpenOptions {
            clean: log_dir.clean_start,
            recovery_point: log_dir.recovery_points.get(tp).copied(),
            log_start_offset: log_dir.log_start_offsets.get(tp).copied(),
        };
        let mut log =
            Log::open(&dir, log_config(&self.live.get(), image), options).map_err(wrap)?;
        log.time_flushes(self.metrics.log_flush_ms.clone());
        // Producers that expired while the broker was down go now, as Kafka drops them
        // when it loads the snapshot, not at the next maintenance round.
        let expired = log.expire_producers(self.clock.now_ms(), self.producer_expiration_ms());
        if expired > 0 {
            tracing::debug!(topic = %tp.topic, partition = tp.partition, expired,
                "producers idle past producer.id.expiration.ms forgotten at open");
        }
        // For Kafka's tools (highwater never reads it back): written without fsyncs, two
        // of a new partition's five, and rewritten at the next open if a crash lost or
        // cut it, as Kafka flushes its own later.
        let metadata_path = dir.join(PARTITION_METADATA_FILE);
        let text = format!("version: 0\ntopic_id: {}\n", base64url(image.topic_id));
        if std::fs::read(&metadata_path).ok().as_deref() != Some(text.as_bytes()) {
            write_unsynced(&metadata_path, text.as_bytes()).map_err(wrap)?;
        }
        let high_watermark = log_dir.high_watermarks.get(tp).copied();
        let wanted = image.partition(tp.partition);
        let role = wanted.map_or((BrokerId::NONE, LeaderEpoch(0)), |p| {
            (BrokerId(p.leader), LeaderEpoch(p.leader_epoch))
        });
        let partition = Partition::new(
            tp.clone(),
            image.topic_id,
            role,
            log,
            log_dir,
            (self.clock.clone(), self.changes.clone()),
        );
        partition.restore_high_watermark(high_watermark);
        if let Some(wanted) = wanted {
            partition.set_throttles(self.throttles(image, tp.partition, wanted));
            partition.apply_partition_image(self.local_id(), wanted)?;
        }
        Ok(partition)
    }

    /// The log directory of `tp`: the one holding its log, else the live one with the
    /// fewest partitions. A log on a failed directory is not opened elsewhere.
    fn log_dir_for(&self, tp: &TopicPartition) -> Result<Arc<LogDir>, ReplicaError> {
        let chosen = match self.log_dirs.holding(tp) {
            Some(dir) => Some(dir),
            None => self.log_dirs.for_new_log(|dir| {
                self.partitions
                    .iter()
                    .filter(|p| p.value().log_dir().path == dir.path)
                    .count()
            }),
        };
        match chosen {
            Some(dir) if !dir.is_offline() => Ok(Arc::clone(dir)),
            Some(dir) => Err(ReplicaError::LogDirOffline {
                topic: tp.topic.clone(),
                partition: tp.partition,
                log_dir: dir.path.clone(),
            }),
            None => Err(ReplicaError::NoLogDirOnline {
                topic: tp.topic.clone(),
                partition: tp.partition,
            }),
        }
    }

    /// Writes the recovery points, high watermarks and moved log start offsets of every
    /// partition to the checkpoint files of its log directory; a directory whose files
    /// cannot be written goes offline.
    pub fn write_checkpoints(&self) -> Result<(), LogError> {
        let mut result = Ok(());
        for dir in self.log_dirs.all().iter().filter(|d| !d.is_offline()) {
            if let Err(error) = self.write_dir_checkpoints(dir) {
                if is_dir_failure(&error) {
                    dir.fail(&error);
                }
                result = Err(error);
            }
        }
        result
    }

    fn write_dir_checkpoints(&self, dir: &LogDir) -> Result<(), LogError> {
        let (mut recovery, mut high_watermarks, mut starts) = (Vec::new(), Vec::new(), Vec::new());
        for partition in self.partitions_in(dir) {
            let tp = partition.topic_partition.clone();
            let log = partition.log();
            recovery.push((tp.clone(), log.recovery_point()));
            high_watermarks.push((tp.clone(), partition.high_watermark()));
            if log.segments().first().base_offset() < log.log_start_offset().0 {
                starts.push((tp, log.log_start_offset()));
            }
        }
        let path = &dir.path;
        self.write_checkpoint(path.join(checkpoints::RECOVERY_POINT_FILE), recovery)?;
        self.write_checkpoint(path.join(checkpoints::HIGH_WATERMARK_FILE), high_watermarks)?;
        self.write_checkpoint(path.join(checkpoints::LOG_START_OFFSET_FILE), starts)
    }

    /// Writes `offsets` to the checkpoint at `path` unless this process last wrote the same.
    fn write_checkpoint(
        &self,
        path: PathBuf,
        offsets: Vec<(TopicPartition, Offset)>,
    ) -> Result<(), LogError> {
        let mut written = self
            .checkpointed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if written.get(&path) == Some(&offsets) {
            return Ok(());
        }
        // Forgotten first: after a failed write the file's content is unknown.
        written.remove(&path);
        checkpoints::write_offsets(&path, &offsets)?;
        written.insert(path, offsets);
        Ok(())
    }

    /// Runs retention, the flush policy, the checkpoints and the log cleaner on their
    /// intervals until the task is dropped (LogManager's scheduled tasks in Apache Kafka).
    pub async fn run_maintenance(&self) {
        let interval = |key: &str| {
            self.config
                .get(key)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(60_000)
        };
        let retention_every = interval("log.retention.check.interval.ms");
        let checkpoint_every = interval("log.flush.offset.checkpoint.interval.ms")
            .min(interval("replica.high.watermark.checkpoint.interval.ms"));
        let tick = retention_every
            .min(checkpoint_every)
            .min(self.cleaner.backoff_ms())
            .clamp(10, 1000);
        let mut ticker = tokio::time::interval(std::time::Duration::from_millis(tick));
        let (mut last_retention, mut last_checkpoint, mut last_cleaning) = (0u64, 0u64, 0u64);
        let mut elapsed = 0u64;
        let _stop_cleaner = StopCleanerOnDrop(Arc::clone(&self.cleaner));
        let mut cleaning: Vec<tokio::task::JoinHandle<()>> = Vec::new();
        loop {
            ticker.tick().await;
            elapsed += tick;
            cleaning.retain(|c| !c.is_finished());
            let due = elapsed - last_cleaning >= self.cleaner.backoff_ms();
            if self.cleaner.enabled && due && cleaning.len() < self.cleaner.threads() {
                last_cleaning = elapsed;
                let free = self.cleaner.threads() - cleaning.len();
                cleaning.extend((0..free).map(|_| self.spawn_cleaning()));
            }
            if elapsed - last_retention >= retention_every {
                last_retention = elapsed;
                self.maintain_partitions();
            }
            if elapsed - last_checkpoint >= checkpoint_every {
                last_checkpoint = elapsed;
                if let Err(error) = self.write_checkpoints() {
                    tracing::error!(%error, "cannot write checkpoints");
                }
            }
        }
    }

    /// Starts one log cleaner round on a blocking thread (off the tokio workers); rounds
    /// running at once (`log.cleaner.threads`) each take another partition.
    fn spawn_cleaning(&self) -> tokio::task::JoinHandle<()> {
        let cleaner = Arc::clone(&self.cleaner);
        let partitions = self.hosted();
        let now = self.clock.now_ms();
        tokio::task::spawn_blocking(move || {
            cleaner.clean_filthiest(&partitions, now);
        })
    }

    /// `producer.id.expiration.ms`.
    fn producer_expiration_ms(&self) -> i64 {
        self.live
            .get()
            .parse::<i64>("producer.id.expiration.ms")
            .unwrap_or(86_400_000)
    }

    fn maintain_partitions(&self) {
        let now = self.clock.now_ms();
        let producer_expiration_ms = self.producer_expiration_ms();
        for partition in self.hosted() {
            if let Err(error) = partition.maintain(now, producer_expiration_ms) {
                let tp = &partition.topic_partition;
                tracing::error!(topic = %tp.topic, partition = tp.partition, %error, "retention failed");
            }
        }
    }

    fn remove_partition(&self, tp: &TopicPartition) {
        if let Some((_, future)) = self.moves.remove(tp) {
            future.cancel();
        }
        let Some((_, partition)) = self.partitions.remove(tp) else {
            return;
        };
        let dir = partition.log().dir().to_path_buf();
        drop(partition);
        if let Err(error) = std::fs::remove_dir_all(&dir) {
            tracing::error!(topic = %tp.topic, partition = tp.partition, %error, "cannot delete log");
        } else {
            tracing::info!(topic = %tp.topic, partition = tp.partition, "deleted partition log");
        }
    }

    /// Closes every log cleanly and writes the clean-shutdown marker, naming this
    /// process's `broker_epoch`, in every live log directory whose logs all closed.
    pub fn shutdown(&self, broker_epoch: i64) -> Result<(), ReplicaError> {
        self.cleaner.stop();
        for future in self.moves.iter() {
            future.value().cancel();
        }
        let checkpointed = self.write_checkpoints();
        if let Err(error) = &checkpointed {
            tracing::error!(%error, "cannot write checkpoints");
        }
        for dir in self.log_dirs.all().iter().filter(|d| !d.is_offline()) {
            // Closing flushes and fsyncs each log: many at once, as they were opened. Every
            // log is closed even after one fails; then the directory is not marked clean.
            let failed = AtomicBool::new(false);
            parallel::for_all(&self.partitions_in(dir), |partition| {
                if let Err(error) = partition.close() {
                    tracing::error!(partition = %partition.topic_partition, %error,
                        "cannot close partition log cleanly");
                    failed.store(true, Ordering::Relaxed);
                }
            });
            if checkpointed.is_ok() && !failed.load(Ordering::Relaxed) {
                let marker = dir.path.join(CLEAN_SHUTDOWN_FILE);
                let content = format!(r#"{{"version":0,"brokerEpoch":{broker_epoch}}}"#);
                write_atomically(&marker, content.as_bytes()).map_err(|source| {
                    ReplicaError::Log {
                        topic: String::new(),
                        partition: -1,
                        source,
                    }
                })?;
            }
        }
        Ok(())
    }

    /// The broker epoch the last clean shutdown named, if every log directory had its
    /// marker and they agree; -1 otherwise (a crash, a directory lost or added).
    pub fn previous_broker_epoch(&self) -> i64 {
        let mut epochs = self.log_dirs.all().iter().map(|d| d.clean_shutdown_epoch);
        let first = epochs.next().unwrap_or(-1);
        match epochs.all(|e| e == first) {
            true => first,
            false => -1,
        }
    }

    /// Moves `tp`'s replica to the log directory `path` in the background (Kafka's
    /// AlterReplicaLogDirs): nothing to do when it is there already; a move under way
    /// elsewhere is cancelled (and so is one back to where it is).
    pub fn alter_log_dir(&self, tp: &TopicPartition, path: &Path) -> Result<(), ReplicaError> {
        let dest = self
            .log_dirs
            .named(path)
            .ok_or_else(|| ReplicaError::LogDirNotFound {
                path: path.display().to_string(),
            })?;
        let offline = |log_dir: &LogDir| ReplicaError::LogDirOffline {
            topic: tp.topic.clone(),
            partition: tp.partition,
            log_dir: log_dir.path.clone(),
        };
        if dest.is_offline() {
            return Err(offline(dest));
        }
        let partition = self.partitions.get(tp).map(|p| Arc::clone(p.value()));
        let Some(partition) = partition else {
            return Err(ReplicaError::ReplicaNotAvailable {
                topic: tp.topic.clone(),
                partition: tp.partition,
            });
        };
        if partition.is_offline() {
            return Err(offline(&partition.log_dir()));
        }
        let moving_there = self
            .moves
            .get(tp)
            .is_some_and(|f| Arc::ptr_eq(&f.dest, dest));
        if moving_there {
            return Ok(());
        }
        if Arc::ptr_eq(&partition.log_dir(), dest) {
            if let Some((_, future)) = self.moves.remove(tp) {
                future.cancel();
            }
            return Ok(());
        }
        let timer = self.metrics.log_flush_ms.clone();
        log_mover::start(partition, Arc::clone(dest), &self.moves, timer);
        Ok(())
    }

    /// Every move under way, by partition.
    pub fn future_replicas(&self) -> Vec<(TopicPartition, Arc<FutureReplica>)> {
        let moves = self.moves.iter();
        moves
            .map(|f| (f.key().clone(), Arc::clone(f.value())))
            .collect()
    }

    /// Number of hosted partitions.
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    /// Whether no partition is hosted.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }
}
