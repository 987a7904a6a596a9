//! Moves a replica between this broker's log directories (AlterReplicaLogDirs, KIP-113),
//! as Kafka's ReplicaAlterLogDirsThread does, while the partition keeps serving.
//!
//! A *future* log, `<dest>/<topic>-<partition>.<id>-future`, is filled from the current
//! log as a follower fills its log from a leader: batches are copied unchanged (offsets,
//! leader epochs, producer state and transaction index follow them). A copy is checked
//! against the current log before each step with the leader-epoch rule: when the current
//! log still holds the epoch of the future log's last batch at that batch's last offset,
//! everything below is the same; otherwise (the current log was truncated as a follower,
//! or retention removed what had not been copied) the copy starts again.
//!
//! Once caught up, the swap happens under the partition log's write lock (appends wait
//! for it): the rest is copied, the log start moved, the future log closed and fsynced,
//! the current directory renamed to `<topic>-<partition>.<id>-delete`, the future one to
//! `<dest>/<topic>-<partition>`, the log reopened there and put in place, and the old
//! directory removed after the lock is released. A crash leaves at most a `-future` and a
//! `-delete` directory: at start [`recover_moves`] removes them, or completes a move that
//! had renamed the current directory away but not yet the future one into place.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use super::log_dirs::{is_dir_failure, LogDir};
use super::partition::{Partition, TopicPartition};
use crate::ids::{LeaderEpoch, Offset};
use crate::log::checkpoint::sync_dir;
use crate::log::{Log, LogConfig, LogError, OpenOptions};

/// Bytes copied per step outside the lock.
const COPY_CHUNK_BYTES: usize = 1 << 20;
/// The name ending of a future log's directory, and of a replaced one awaiting deletion.
const FUTURE_SUFFIX: &str = "-future";
const DELETE_SUFFIX: &str = "-delete";

/// A move in progress: the future log's place and how far it has got (DescribeLogDirs
/// lists it with `is_future_key`).
#[derive(Debug)]
pub struct FutureReplica {
    pub dest: Arc<LogDir>,
    pub dir: PathBuf,
    log_end_offset: AtomicI64,
    size: AtomicU64,
    cancelled: AtomicBool,
}

impl FutureReplica {
    /// The future log's end offset so far.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }

    /// The future log's bytes so far.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// Stops the move: the future log is removed, the replica stays where it is.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}

/// The moves in progress, by partition.
pub type Moves = Arc<DashMap<TopicPartition, Arc<FutureReplica>>>;

/// Why a move ended without its swap.
#[derive(Debug, thiserror::Error)]
enum MoveError {
    #[error("cancelled")]
    Cancelled,
    #[error("the future log's directory failed: {0}")]
    Future(LogError),
    #[error("the current log failed: {0}")]
    Current(LogError),
}

/// Starts moving `partition` to `dest` on a blocking thread; registered in `moves` until
/// it ends. `flush_timer` times the reopened log's flushes.
pub fn start(
    partition: Arc<Partition>,
    dest: Arc<LogDir>,
    moves: &Moves,
    flush_timer: prometheus::Histogram,
) {
    let tp = partition.topic_partition.clone();
    let name = format!(
        "{}-{}.{}{FUTURE_SUFFIX}",
        tp.topic,
        tp.partition,
        uuid::Uuid::new_v4().simple()
    );
    let future = Arc::new(FutureReplica {
        dir: dest.path.join(name),
        dest,
        log_end_offset: AtomicI64::new(0),
        size: AtomicU64::new(0),
        cancelled: AtomicBool::new(false),
    });
    if let Some(previous) = moves.insert(tp.clone(), Arc::clone(&future)) {
        previous.cancel();
    }
    let moves = Arc::clone(moves);
    tokio::task::spawn_blocking(move || {
        tracing::info!(partition = %tp, to = %future.dest.path.display(),
            "moving the replica to another log directory");
        let outcome = run(&partition, &future, flush_timer);
        moves.remove_if(&tp, |_, f| Arc::ptr_eq(f, &future));
        match outcome {
            Ok(()) => tracing::info!(partition = %tp, to = %future.dest.path.display(),
                "replica moved to the other log directory"),
            Err(MoveError::Cancelled) => tracing::info!(partition = %tp,
                to = %future.dest.path.display(), "replica move cancelled"),
            Err(error) => tracing::error!(partition = %tp, to = %future.dest.path.display(),
                %error, "replica move failed; the replica stays in its directory"),
        }
        if let Err(error) = remove_dir_if_exists(&future.dir) {
            tracing::error!(partition = %tp, dir = %future.dir.display(), %error,
                "cannot remove the future log");
        }
    });
}

fn run(
    partition: &Partition,
    future: &FutureReplica,
    flush_timer: prometheus::Histogram,
) -> Result<(), MoveError> {
    let config = *partition.log().config();
    let mut copy = Copy::create(partition, future, config)?;
    loop {
        if future.is_cancelled() || partition.is_offline() {
            return Err(MoveError::Cancelled);
        }
        let log = partition.log();
        let step = copy.step(&log, future)?;
        drop(log);
        match step {
            Step::Copied => continue,
            Step::Restart => {}
            Step::CaughtUp => match swap(partition, future, copy, &flush_timer)? {
                Swap::Done => return Ok(()),
                Swap::Restart => {}
            },
        }
        copy = Copy::create(partition, future, config)?;
    }
}

/// How a swap ended.
enum Swap {
    Done,
    /// The current log changed under the lock: the copy starts again.
    Restart,
}

/// What one copy step did.
enum Step {
    Copied,
    Restart,
    CaughtUp,
}

/// The future log and the last batch copied into it (its last offset and leader epoch).
struct Copy {
    log: Log,
    last: Option<(Offset, LeaderEpoch)>,
}

impl Copy {
    /// An empty future log in `future.dir` (any earlier attempt removed first).
    fn create(
        partition: &Partition,
        future: &FutureReplica,
        config: LogConfig,
    ) -> Result<Copy, MoveError> {
        let fail = |e: LogError| future_failure(future, e);
        remove_dir_if_exists(&future.dir).map_err(fail)?;
        let log = Log::open(&future.dir, config, OpenOptions::default()).map_err(fail)?;
        let current_dir = partition.log().dir().to_path_buf();
        let metadata = super::manager::PARTITION_METADATA_FILE;
        if let Ok(bytes) = std::fs::read(current_dir.join(metadata)) {
            crate::log::checkpoint::write_atomically(&future.dir.join(metadata), &bytes)
                .map_err(fail)?;
        }
        future.log_end_offset.store(0, Ordering::Release);
        future.size.store(0, Ordering::Release);
        Ok(Copy { log, last: None })
    }

    /// Copies the next chunk of `current` (read-locked by the caller) into the future log,
    /// or tells that the copy must start again or has caught up.
    fn step(&mut self, current: &Log, future: &FutureReplica) -> Result<Step, MoveError> {
        if !self.matches(current) {
            tracing::info!(partition = %current.dir().display(),
                "the current log changed under the copy; starting it again");
            return Ok(Step::Restart);
        }
        let from = self.log.log_end_offset().max(current.log_start_offset());
        if from >= current.log_end_offset() {
            return Ok(Step::CaughtUp);
        }
        let end = current.log_end_offset();
        let chunk = current
            .read(from, end, COPY_CHUNK_BYTES, true)
            .map_err(MoveError::Current)?;
        if chunk.is_empty() {
            // Nothing at `from` although the log goes on: never swap with a hole.
            return Err(MoveError::Current(LogError::OffsetOutOfRange {
                offset: from,
                log_start_offset: current.log_start_offset(),
                log_end_offset: end,
            }));
        }
        let appended = self
            .log
            .append_as_follower(&chunk)
            .map_err(|e| future_failure(future, e))?;
        if let Some(info) = appended {
            self.last = Some((info.last_offset, info.leader_epoch));
        }
        future
            .log_end_offset
            .store(self.log.log_end_offset().0, Ordering::Release);
        future
            .size
            .store(self.log.size_in_bytes(), Ordering::Release);
        Ok(Step::Copied)
    }

    /// Whether everything copied so far is still the current log's (the leader-epoch rule:
    /// the same epoch at the same offset means the same records up to there), and what is
    /// left to copy still exists.
    fn matches(&self, current: &Log) -> bool {
        // What retention removed from the current log before it was copied is below the
        // log start the future log takes at the swap: copying goes on from the start.
        let end = self.log.log_end_offset();
        end <= current.log_end_offset()
            && self.last.is_none_or(|(last_offset, epoch)| {
                current.epoch_cache().epoch_at(last_offset) == Some(epoch)
            })
    }
}

/// Completes the move under the current log's write lock.
fn swap(
    partition: &Partition,
    future: &FutureReplica,
    mut copy: Copy,
    flush_timer: &prometheus::Histogram,
) -> Result<Swap, MoveError> {
    let mut current = partition.log_mut_for_roles();
    loop {
        if future.is_cancelled() || partition.is_offline() {
            return Err(MoveError::Cancelled);
        }
        match copy.step(&current, future)? {
            Step::Copied => {}
            Step::Restart => return Ok(Swap::Restart),
            Step::CaughtUp => break,
        }
    }
    let fail = |e: LogError| future_failure(future, e);
    let start = current.log_start_offset();
    copy.log
        .delete_records(start, partition.high_watermark())
        .map_err(fail)?;
    copy.log.flush().map_err(fail)?;
    copy.log.close().map_err(fail)?;
    let config = *copy.log.config();
    drop(copy);
    let current_dir = current.dir().to_path_buf();
    let name = current_dir.file_name().unwrap_or_default().to_owned();
    let final_dir = future.dest.path.join(&name);
    let deleted = current_dir.with_file_name(format!(
        "{}.{}{DELETE_SUFFIX}",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    rename_synced(&current_dir, &deleted).map_err(MoveError::Current)?;
    if let Err(error) = rename_synced(&future.dir, &final_dir) {
        // Put the current log back where it was; it is still whole.
        rename_synced(&deleted, &current_dir).map_err(MoveError::Current)?;
        return Err(fail(error));
    }
    let options = OpenOptions {
        clean: true,
        recovery_point: None,
        log_start_offset: Some(start),
    };
    let mut reopened = Log::open(&final_dir, config, options).map_err(fail)?;
    reopened.time_flushes(flush_timer.clone());
    let old = std::mem::replace(&mut *current, reopened);
    partition.set_log_dir(Arc::clone(&future.dest));
    partition.replication_changed();
    drop(current);
    drop(old);
    remove_dir_if_exists(&deleted).map_err(MoveError::Current)?;
    Ok(Swap::Done)
}

/// Takes the destination directory offline after an I/O error there.
fn future_failure(future: &FutureReplica, error: LogError) -> MoveError {
    if is_dir_failure(&error) {
        future.dest.fail(&error);
    }
    MoveError::Future(error)
}

fn rename_synced(from: &Path, to: &Path) -> Result<(), LogError> {
    std::fs::rename(from, to).map_err(|e| LogError::io(from, e))?;
    for parent in [from.parent(), to.parent()].into_iter().flatten() {
        sync_dir(parent)?;
    }
    Ok(())
}

fn remove_dir_if_exists(dir: &Path) -> Result<(), LogError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(dir, e)),
    }
}

/// At start, before any log is opened: removes every `-delete` directory and every
/// `-future` one, except a future log whose partition has no current log in any of
/// `dirs` (a crash between the swap's two renames): that one becomes the current log.
pub fn recover_moves(dirs: &[PathBuf]) -> Result<(), LogError> {
    let mut futures = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(DELETE_SUFFIX) {
                tracing::info!(dir = %entry.path().display(), "removing a replaced log");
                remove_dir_if_exists(&entry.path())?;
            } else if let Some(current) = future_of(&name) {
                futures.push((entry.path(), dir.join(current)));
            }
        }
    }
    for (future, current) in futures {
        let name = current.file_name().unwrap_or_default();
        if dirs.iter().any(|d| d.join(name).is_dir()) {
            tracing::info!(dir = %future.display(), "removing an unfinished replica move");
            remove_dir_if_exists(&future)?;
        } else {
            tracing::warn!(dir = %future.display(),
                "completing a replica move interrupted during its swap");
            rename_synced(&future, &current)?;
        }
    }
    Ok(())
}

/// `<topic>-<partition>` of a future log's directory name `<topic>-<partition>.<id>-future`.
fn future_of(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(FUTURE_SUFFIX)?;
    let (current, id) = stem.rsplit_once('.')?;
    (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn future_dir_names_give_their_partition() {
        let id = uuid::Uuid::new_v4().simple().to_string();
        assert_eq!(future_of(&format!("t.x-3.{id}-future")), Some("t.x-3"));
        assert_eq!(future_of("t-3"), None);
        assert_eq!(future_of("t-3.abc-future"), None);
    }

    #[test]
    fn recovery_removes_unfinished_moves_and_completes_an_interrupted_swap() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        let id = uuid::Uuid::new_v4().simple();
        // t-0 still has its current log in a: its future in b goes.
        std::fs::create_dir(a.path().join("t-0")).expect("mkdir");
        std::fs::create_dir(b.path().join(format!("t-0.{id}-future"))).expect("mkdir");
        // t-1's current log was renamed away: its future in b takes its place.
        std::fs::create_dir(a.path().join(format!("t-1.{id}-delete"))).expect("mkdir");
        let future = b.path().join(format!("t-1.{id}-future"));
        std::fs::create_dir(&future).expect("mkdir");
        std::fs::write(future.join("00000000000000000000.log"), b"").expect("write");
        recover_moves(&[a.path().to_path_buf(), b.path().to_path_buf()]).expect("recover");
        let names = |d: &Path| {
            let mut n: Vec<String> = std::fs::read_dir(d)
                .expect("list")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(a.path()), ["t-0"]);
        assert_eq!(names(b.path()), ["t-1"]);
        assert!(b.path().join("t-1/00000000000000000000.log").exists());
    }
}
