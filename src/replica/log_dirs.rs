//! The broker's log directories (`log.dirs`), each of which fails on its own, as in Kafka
//! (KIP-112): an I/O error on a directory takes it offline for the rest of the process.
//! Its replicas then answer KAFKA_STORAGE_ERROR, are neither fetched nor led nor written,
//! and are reported to the controller, which moves their leaderships and takes them out
//! of their ISRs; replicas in the other directories are served as before. A restart with
//! the disk mended brings the directory back.
//!
//! Each directory keeps its own checkpoints (recovery points, high watermarks, log start
//! offsets) and clean-shutdown marker, read once at start.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use super::checkpoints;
use super::manager::CLEAN_SHUTDOWN_FILE;
use super::partition::TopicPartition;
use crate::ids::Offset;
use crate::log::LogError;

/// One log directory and whether it still works.
#[derive(Debug)]
pub struct LogDir {
    pub path: PathBuf,
    offline: AtomicBool,
    /// Bumped (through the shared channel) when a directory goes offline.
    failures: watch::Sender<u64>,
    /// Whether the last stop left the clean-shutdown marker here.
    pub clean_start: bool,
    /// The broker epoch that marker names (Kafka's `brokerEpoch`), -1 without one.
    pub clean_shutdown_epoch: i64,
    /// Read from this directory's checkpoint files at start.
    pub recovery_points: HashMap<TopicPartition, Offset>,
    pub log_start_offsets: HashMap<TopicPartition, Offset>,
    pub high_watermarks: HashMap<TopicPartition, Offset>,
}

/// The `brokerEpoch` of a clean-shutdown marker (`{"version":0,"brokerEpoch":N}`), or -1
/// when it has none or cannot be read (the log is still whole: only KIP-966's eligibility
/// after a restart is given up).
fn marker_epoch(marker: &Path) -> i64 {
    let parsed = std::fs::read(marker)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    let epoch = parsed.and_then(|v| v.get("brokerEpoch").and_then(serde_json::Value::as_i64));
    if epoch.is_none() {
        tracing::warn!(marker = %marker.display(), "clean-shutdown marker without a broker epoch");
    }
    epoch.unwrap_or(-1)
}

/// Whether `dir` holds any partition's log (the metadata log aside): a new directory has
/// nothing to recover, so start-up does not say it recovers.
fn holds_partition_logs(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != "__cluster_metadata-0")
}

impl LogDir {
    /// Opens `path` (created if missing): its marker is consumed and its checkpoints read.
    fn open(path: &Path, failures: watch::Sender<u64>) -> Result<LogDir, LogError> {
        std::fs::create_dir_all(path).map_err(|e| LogError::io(path, e))?;
        let marker = path.join(CLEAN_SHUTDOWN_FILE);
        let clean_start = marker.exists();
        let mut clean_shutdown_epoch = -1;
        if clean_start {
            clean_shutdown_epoch = marker_epoch(&marker);
            std::fs::remove_file(&marker).map_err(|e| LogError::io(&marker, e))?;
        } else if holds_partition_logs(path) {
            tracing::info!(log_dir = %path.display(), "no clean-shutdown marker: recovering logs");
        }
        let read = |name: &str| checkpoints::read_offsets(&path.join(name));
        Ok(LogDir {
            path: path.to_path_buf(),
            offline: AtomicBool::new(false),
            failures,
            clean_start,
            clean_shutdown_epoch,
            recovery_points: read(checkpoints::RECOVERY_POINT_FILE)?,
            log_start_offsets: read(checkpoints::LOG_START_OFFSET_FILE)?,
            high_watermarks: read(checkpoints::HIGH_WATERMARK_FILE)?,
        })
    }

    /// A directory of its own, not part of a broker's set (tests, tools).
    pub fn standalone(path: &Path) -> LogDir {
        let (failures, _) = watch::channel(0);
        LogDir::offline_or_not(path, failures, false)
    }

    fn offline_or_not(path: &Path, failures: watch::Sender<u64>, offline: bool) -> LogDir {
        LogDir {
            path: path.to_path_buf(),
            offline: AtomicBool::new(offline),
            failures,
            clean_start: false,
            clean_shutdown_epoch: -1,
            recovery_points: HashMap::new(),
            log_start_offsets: HashMap::new(),
            high_watermarks: HashMap::new(),
        }
    }

    /// Whether this directory failed.
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// Takes this directory offline after `error` (logged once, at the first failure).
    pub fn fail(&self, error: &LogError) {
        if self.offline.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(log_dir = %self.path.display(), %error,
            "log directory failed: its replicas go offline until a restart");
        self.failures.send_modify(|n| *n += 1);
    }
}

/// Whether `error` means the directory itself failed (as opposed to bad input).
pub fn is_dir_failure(error: &LogError) -> bool {
    matches!(error, LogError::Io { .. })
}

/// Every log directory of this broker.
#[derive(Debug)]
pub struct LogDirs {
    dirs: Vec<Arc<LogDir>>,
    failures: watch::Sender<u64>,
}

impl LogDirs {
    /// Opens every directory of `paths`; one that cannot be opened starts offline, unless
    /// none can (then the broker cannot start).
    pub fn open(paths: &[PathBuf]) -> Result<LogDirs, LogError> {
        let (failures, _) = watch::channel(0);
        let mut dirs = Vec::with_capacity(paths.len());
        let mut last_error = None;
        for path in paths {
            match LogDir::open(path, failures.clone()) {
                Ok(dir) => dirs.push(Arc::new(dir)),
                Err(error) => {
                    tracing::error!(log_dir = %path.display(), %error,
                        "log directory cannot be opened: offline");
                    let offline = LogDir::offline_or_not(path, failures.clone(), true);
                    dirs.push(Arc::new(offline));
                    last_error = Some(error);
                }
            }
        }
        match (dirs.iter().any(|d| !d.is_offline()), last_error) {
            (false, Some(error)) => Err(error),
            _ => Ok(LogDirs { dirs, failures }),
        }
    }

    /// Every directory, in `log.dirs` order.
    pub fn all(&self) -> &[Arc<LogDir>] {
        &self.dirs
    }

    /// The directory configured as `path` (as written in `log.dirs`, or the same place
    /// written absolute).
    pub fn named(&self, path: &Path) -> Option<&Arc<LogDir>> {
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let wanted = absolute(path);
        self.dirs.iter().find(|d| absolute(&d.path) == wanted)
    }

    /// A receiver that sees every directory failure.
    pub fn subscribe_failures(&self) -> watch::Receiver<u64> {
        self.failures.subscribe()
    }

    /// The directory holding `tp`'s log (`<dir>/<topic>-<partition>`), if one has it.
    pub fn holding(&self, tp: &TopicPartition) -> Option<&Arc<LogDir>> {
        let name = format!("{}-{}", tp.topic, tp.partition);
        self.dirs.iter().find(|d| d.path.join(&name).is_dir())
    }

    /// The live directory for a new log: the one with the fewest partitions hosted
    /// (`hosted(dir)`), the first of equals, as Kafka's LogManager chooses. With one
    /// directory live (the usual case) nothing is counted: `hosted` walks every partition,
    /// which made creating N partitions cost O(N²).
    pub fn for_new_log(&self, hosted: impl Fn(&LogDir) -> usize) -> Option<&Arc<LogDir>> {
        let mut live = self.dirs.iter().filter(|d| !d.is_offline());
        let first = live.next()?;
        match live.next() {
            None => Some(first),
            Some(second) => [first, second]
                .into_iter()
                .chain(live)
                .min_by_key(|d| hosted(d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_log_goes_to_the_live_directory_with_fewest_partitions_counted_only_if_several() {
        let dirs: Vec<tempfile::TempDir> =
            (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
        let all = LogDirs::open(&paths).expect("open");
        let counted = std::cell::Cell::new(0);
        let hosted = |dir: &LogDir| {
            counted.set(counted.get() + 1);
            // The first directory holds 5, the other two 2 each.
            if dir.path == paths[0] {
                5
            } else {
                2
            }
        };
        let chosen = all.for_new_log(hosted).expect("a live dir");
        assert_eq!(chosen.path, paths[1], "fewest, first of equals");
        assert_eq!(counted.get(), 3);
        let one = LogDirs::open(&paths[..1]).expect("open");
        counted.set(0);
        assert_eq!(one.for_new_log(hosted).expect("live").path, paths[0]);
        assert_eq!(counted.get(), 0, "one live directory: nothing counted");
    }

    #[test]
    fn a_clean_shutdown_marker_names_its_broker_epoch_and_a_damaged_one_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |content: &[u8]| {
            std::fs::write(dir.path().join(CLEAN_SHUTDOWN_FILE), content).expect("marker");
            let (failures, _) = watch::channel(0);
            LogDir::open(dir.path(), failures).expect("open")
        };
        let clean = open(br#"{"version":0,"brokerEpoch":42}"#);
        assert!(clean.clean_start);
        assert_eq!(clean.clean_shutdown_epoch, 42);
        assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists(), "consumed");
        for damaged in [&b"{\"version\":0"[..], b"", b"{\"brokerEpoch\":\"x\"}"] {
            let opened = open(damaged);
            assert!(opened.clean_start, "the logs are still whole");
            assert_eq!(opened.clean_shutdown_epoch, -1, "{damaged:?}");
        }
        let (failures, _) = watch::channel(0);
        let crashed = LogDir::open(dir.path(), failures).expect("open");
        assert_eq!(
            (crashed.clean_start, crashed.clean_shutdown_epoch),
            (false, -1)
        );
    }
}
