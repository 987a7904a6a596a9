//! The log cleaner's scheduling (LogCleaner and LogCleanerManager in Apache Kafka): every
//! `log.cleaner.backoff.ms` the compacted partition with the highest dirty ratio above its
//! `min.cleanable.dirty.ratio` (or with dirty records older than `max.compaction.lag.ms`)
//! is cleaned, and its next first dirty offset saved in `cleaner-offset-checkpoint`.
//!
//! Thread safety: a round runs on a blocking thread (never a tokio worker), one at a time.
//! It holds a partition's read lock only to measure and plan, and its write lock only to
//! swap each cleaned segment in, so produce and fetch go on while it reads and writes.
//! `stop` ends a round early (shutdown); half-written `.cleaned` files are removed when the
//! log is next opened.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::checkpoints;
use super::error::ReplicaError;
use super::partition::{Partition, TopicPartition};
use crate::config::BrokerConfig;
use crate::ids::Offset;
use crate::log::cleaner::{CleaningStats, LogToClean};
use crate::log::offset_map::{self, OffsetMap};
use crate::log::LogError;

/// The broker's log cleaner.
#[derive(Debug)]
pub struct LogCleaner {
    /// `log.cleaner.enable`.
    pub enabled: bool,
    /// `log.cleaner.backoff.ms`: the pause between two looks for a log to clean (dynamic).
    backoff_ms: AtomicU64,
    /// Keys one round may map (`log.cleaner.dedupe.buffer.size` shared by the threads, per
    /// entry cost; dynamic).
    map_entries_max: AtomicUsize,
    /// `log.cleaner.threads`: partitions cleaned at once (dynamic).
    threads: AtomicUsize,
    /// Partitions being cleaned now: a round never picks one another round holds.
    in_progress: Mutex<HashSet<TopicPartition>>,
    path: PathBuf,
    /// First dirty offset per partition, as last written to `path`.
    first_dirty_offsets: Mutex<HashMap<TopicPartition, Offset>>,
    /// Partitions whose cleaning failed: skipped until restart, so that one bad log does
    /// not take every round (LogCleanerManager's uncleanable partitions in Kafka).
    uncleanable: Mutex<HashSet<TopicPartition>>,
    stop: AtomicBool,
}

/// Releases a round's partition however the round ends.
struct Done<'a>(&'a LogCleaner, TopicPartition);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.release(&self.1);
    }
}

impl LogCleaner {
    /// Reads the broker keys and `cleaner-offset-checkpoint`.
    pub fn open(config: &BrokerConfig) -> Result<Self, LogError> {
        let path = config
            .metadata_log_dir
            .join(checkpoints::CLEANER_OFFSET_FILE);
        let first_dirty_offsets = checkpoints::read_offsets(&path)?;
        let cleaner = LogCleaner {
            enabled: config.get("log.cleaner.enable") != Some("false"),
            backoff_ms: AtomicU64::new(0),
            map_entries_max: AtomicUsize::new(0),
            threads: AtomicUsize::new(1),
            in_progress: Mutex::new(HashSet::new()),
            path,
            first_dirty_offsets: Mutex::new(first_dirty_offsets),
            uncleanable: Mutex::new(HashSet::new()),
            stop: AtomicBool::new(false),
        };
        cleaner.reconfigure(config);
        Ok(cleaner)
    }

    /// Takes the cleaner's dynamic keys from `config` (`log.cleaner.backoff.ms`,
    /// `log.cleaner.dedupe.buffer.size`, `log.cleaner.threads`, each thread mapping its share
    /// of the buffer as in Kafka); a round under way keeps the values it began with.
    pub fn reconfigure(&self, config: &BrokerConfig) {
        let number = |key: &str, default: u64| {
            config
                .get(key)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(default)
        };
        let buffer_bytes = number("log.cleaner.dedupe.buffer.size", 134_217_728) as usize;
        let backoff_ms = number("log.cleaner.backoff.ms", 15_000).max(1);
        self.backoff_ms.store(backoff_ms, Ordering::Relaxed);
        let threads = number("log.cleaner.threads", 1).max(1) as usize;
        self.threads.store(threads, Ordering::Relaxed);
        let entries = (buffer_bytes / threads / offset_map::ENTRY_BYTES).max(1);
        self.map_entries_max.store(entries, Ordering::Relaxed);
    }

    /// `log.cleaner.threads` in force.
    pub fn threads(&self) -> usize {
        self.threads.load(Ordering::Relaxed)
    }

    /// `log.cleaner.backoff.ms` in force.
    pub fn backoff_ms(&self) -> u64 {
        self.backoff_ms.load(Ordering::Relaxed)
    }

    /// Asks a running round to stop at its next batch.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn checkpoint_of(&self, tp: &TopicPartition) -> Option<Offset> {
        let offsets = self
            .first_dirty_offsets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        offsets.get(tp).copied()
    }

    /// The compacted partition to clean now, if any: the highest dirty ratio among those due.
    fn filthiest(
        &self,
        partitions: &[Arc<Partition>],
        now_ms: i64,
        busy: &HashSet<TopicPartition>,
    ) -> Option<(Arc<Partition>, LogToClean)> {
        let mut best: Option<(Arc<Partition>, LogToClean)> = None;
        let uncleanable = self
            .uncleanable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for partition in partitions {
            let tp = &partition.topic_partition;
            if uncleanable.contains(tp) || busy.contains(tp) {
                continue;
            }
            let high_watermark = partition.high_watermark();
            let log = partition.log();
            let compaction = log.config().compaction;
            if !compaction.compact {
                continue;
            }
            let checkpoint = self.checkpoint_of(&partition.topic_partition);
            let to_clean = log.log_to_clean(checkpoint, high_watermark, now_ms);
            let better = best
                .as_ref()
                .is_none_or(|(_, b)| to_clean.ratio() > b.ratio());
            if to_clean.is_due(compaction.min_cleanable_dirty_ratio) && better {
                best = Some((Arc::clone(partition), to_clean));
            }
        }
        best
    }

    /// Cleans the filthiest partition, if one is due, and saves its checkpoint. Blocking:
    /// call it from a blocking thread.
    pub fn clean_filthiest(&self, partitions: &[Arc<Partition>], now_ms: i64) {
        let picked = {
            let mut busy = self
                .in_progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let picked = self.filthiest(partitions, now_ms, &busy);
            if let Some((partition, _)) = &picked {
                busy.insert(partition.topic_partition.clone());
            }
            picked
        };
        let Some((partition, to_clean)) = picked else {
            return;
        };
        let tp = partition.topic_partition.clone();
        let _done = Done(self, tp.clone());
        let started = Instant::now();
        match self.clean(&partition, &to_clean, now_ms) {
            Ok(stats) => {
                tracing::info!(topic = %tp.topic, partition = tp.partition,
                    bytes_before = stats.bytes_before, bytes_after = stats.bytes_after,
                    segments = stats.segments_swapped, first_dirty_offset = %stats.end_offset,
                    dirty_ratio = to_clean.ratio(), duration_ms = started.elapsed().as_millis() as u64,
                    "cleaned log");
                self.save_checkpoint(&tp, stats.end_offset, partitions);
            }
            Err(ReplicaError::Log {
                source: LogError::CleaningAborted { .. },
                ..
            }) => {
                tracing::info!(topic = %tp.topic, partition = tp.partition, "cleaning aborted");
            }
            Err(error) => {
                tracing::error!(topic = %tp.topic, partition = tp.partition, %error,
                    "log cleaning failed: partition marked uncleanable until restart");
                self.uncleanable
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(tp);
            }
        }
    }

    /// One round on one partition: plan under the read lock, map and write without a
    /// lock, swap each cleaned segment in under the write lock.
    fn clean(
        &self,
        partition: &Partition,
        to_clean: &LogToClean,
        now_ms: i64,
    ) -> Result<CleaningStats, ReplicaError> {
        let wrap = |e| partition.log_error(e);
        let plan = partition.log().cleaning_plan(to_clean);
        let mut map = OffsetMap::new(self.map_entries_max.load(Ordering::Relaxed));
        let end_offset = plan.build_offset_map(&mut map, &self.stop).map_err(wrap)?;
        let mut stats = CleaningStats {
            end_offset: Offset(end_offset),
            ..CleaningStats::default()
        };
        let mut transactions = plan.transactions();
        for group in plan.groups(end_offset) {
            let cleaned = plan
                .clean_group(&group, &map, &mut transactions, now_ms, &self.stop)
                .map_err(wrap)?;
            stats.bytes_before += cleaned.bytes_before;
            stats.bytes_after += cleaned.bytes_after;
            if partition.replace_with_cleaned(cleaned)? {
                stats.segments_swapped += 1;
            }
        }
        Ok(stats)
    }

    /// Records `tp`'s first dirty offset and rewrites the checkpoint file with the
    /// partitions still hosted.
    /// Ends a round's hold on its partition.
    fn release(&self, tp: &TopicPartition) {
        let mut busy = self
            .in_progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        busy.remove(tp);
    }

    fn save_checkpoint(&self, tp: &TopicPartition, offset: Offset, partitions: &[Arc<Partition>]) {
        let mut offsets = self
            .first_dirty_offsets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        offsets.insert(tp.clone(), offset);
        offsets.retain(|tp, _| partitions.iter().any(|p| &p.topic_partition == tp));
        let mut entries: Vec<(TopicPartition, Offset)> =
            offsets.iter().map(|(tp, o)| (tp.clone(), *o)).collect();
        entries.sort();
        if let Err(error) = checkpoints::write_offsets(&self.path, &entries) {
            tracing::error!(topic = %tp.topic, partition = tp.partition, %error,
                "cannot write cleaner-offset-checkpoint");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigMap;
    use crate::ids::{BrokerId, LeaderEpoch};
    use crate::log::cleaner::tests::{compact_config, keyed_batch};
    use crate::log::config::OpenOptions;
    use crate::log::{Log, LogConfig};
    use kafka_protocol::records::Compression;

    fn broker_config(dir: &std::path::Path) -> BrokerConfig {
        let mut map = ConfigMap::new();
        map.insert("log.dirs".into(), dir.display().to_string());
        map.insert("listeners".into(), "127.0.0.1:0".into());
        BrokerConfig::from_map(map).expect("config")
    }

    /// A compacted partition with 20 dirty records over 2 keys; with `garbage`, one
    /// stored batch whose records cannot be read (its CRC is valid).
    fn partition(root: &std::path::Path, name: &str, garbage: bool) -> Arc<Partition> {
        let dir = root.join(format!("{name}-0"));
        let delete_config = LogConfig {
            compaction: Default::default(),
            ..compact_config(300)
        };
        let mut log = Log::open(&dir, delete_config, OpenOptions::default()).expect("open");
        for i in 0..20u8 {
            let mut batch = keyed_batch(&[(Some(i % 2), Some(i))], Compression::None);
            if garbage && i == 3 {
                let end = batch.len();
                batch[61..end].fill(0xff);
                let crc = crc32c::crc32c(&batch[21..]);
                batch[17..21].copy_from_slice(&crc.to_be_bytes());
            }
            log.append_as_leader(&batch, LeaderEpoch(0))
                .expect("append");
        }
        log.roll().expect("roll");
        drop(log);
        let log = Log::open(&dir, compact_config(300), OpenOptions::default()).expect("reopen");
        let tp = TopicPartition {
            topic: name.into(),
            partition: 0,
        };
        let log_dir = Arc::new(crate::replica::log_dirs::LogDir::standalone(&dir));
        Arc::new(Partition::new(
            tp,
            uuid::Uuid::nil(),
            (BrokerId(1), LeaderEpoch(0)),
            log,
            log_dir,
            (crate::clock::Clock::system(), Default::default()),
        ))
    }

    /// Goal: a partition whose cleaning fails is skipped afterwards and the others still
    /// get cleaned, with their first dirty offset checkpointed. Method: two partitions,
    /// the first holding an unreadable batch, two rounds.
    #[test]
    fn a_log_that_cannot_be_cleaned_does_not_block_the_others() {
        let root = tempfile::tempdir().expect("tempdir");
        let cleaner = LogCleaner::open(&broker_config(root.path())).expect("cleaner");
        let bad = partition(root.path(), "bad", true);
        let good = partition(root.path(), "good", false);
        let partitions = [Arc::clone(&bad), Arc::clone(&good)];
        cleaner.clean_filthiest(&partitions, 10_000);
        assert!(cleaner.checkpoint_of(&bad.topic_partition).is_none());
        let marked = cleaner.uncleanable.lock().expect("lock").clone();
        assert!(
            marked.contains(&bad.topic_partition),
            "the first round tried the bad log"
        );
        cleaner.clean_filthiest(&partitions, 10_000);
        let end = good.log().log_end_offset();
        assert_eq!(cleaner.checkpoint_of(&good.topic_partition), Some(end));
        let text = std::fs::read_to_string(root.path().join(checkpoints::CLEANER_OFFSET_FILE))
            .expect("checkpoint file");
        assert_eq!(text, format!("0\n1\ngood 0 {end}\n"));
        let sizes: usize = good.log().segments().iter().map(|s| s.size()).sum();
        let bad_sizes: usize = bad.log().segments().iter().map(|s| s.size()).sum();
        assert!(
            sizes < bad_sizes,
            "the good log shrank: {sizes} vs {bad_sizes}"
        );
    }

    /// Goal: rounds running at once (`log.cleaner.threads`) never take the same partition,
    /// and a round's partition is free again once it ends. Method: hold one partition as a
    /// running round would, pick; then release it.
    #[test]
    fn a_partition_being_cleaned_is_not_picked_by_another_round() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut config = broker_config(root.path());
        config
            .values
            .insert("log.cleaner.threads".into(), "2".into());
        let cleaner = LogCleaner::open(&config).expect("cleaner");
        assert_eq!(cleaner.threads(), 2);
        let a = partition(root.path(), "a", false);
        let b = partition(root.path(), "b", false);
        let partitions = [Arc::clone(&a), Arc::clone(&b)];
        let busy = HashSet::from([a.topic_partition.clone()]);
        let picked = cleaner
            .filthiest(&partitions, 10_000, &busy)
            .expect("one is due");
        assert_eq!(picked.0.topic_partition, b.topic_partition);
        let both = HashSet::from([a.topic_partition.clone(), b.topic_partition.clone()]);
        assert!(cleaner.filthiest(&partitions, 10_000, &both).is_none());
        cleaner.clean_filthiest(&partitions, 10_000);
        assert!(
            cleaner.in_progress.lock().expect("lock").is_empty(),
            "released when the round ended"
        );
    }
}
