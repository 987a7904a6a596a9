//! The fsyncs of a rolled segment run after the append that rolled it, on a thread of
//! their own, as Kafka schedules its `flush-log` task on a roll: an append that fills a
//! segment does not hold the partition while the whole segment reaches the disk.
//!
//! The recovery point reaches a rolled segment's end only once that segment and every one
//! rolled before it are synced (never before: a crash in between recovers from the older
//! point, as after any crash). An explicit flush or a close syncs whatever is still pending
//! itself before it moves the recovery point to the log end. A truncation keeps syncs that
//! were under way from moving the recovery point. A failed sync fails the log's next
//! append or roll with the I/O error, so its directory goes offline as after any failed
//! write.

use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::error::LogError;

/// What syncs one sealed segment: its files (handles on them, valid even once the segment
/// is deleted), and files named by path, synced if they are still there when the sync runs
/// — its transaction index if it has unsynced entries, the producer snapshot the roll wrote.
#[derive(Debug)]
pub struct SegmentSync {
    files: Vec<(PathBuf, File)>,
    by_path: Vec<PathBuf>,
}

impl SegmentSync {
    pub fn new(files: Vec<(PathBuf, File)>, txn_index: Option<PathBuf>) -> Self {
        let by_path = txn_index.into_iter().collect();
        SegmentSync { files, by_path }
    }

    /// Syncs `path` too (if it still exists then).
    pub fn and_file(mut self, path: PathBuf) -> Self {
        self.by_path.push(path);
        self
    }

    fn run(&self) -> Result<(), LogError> {
        for (path, file) in &self.files {
            super::fsync::sync_data(file).map_err(|e| LogError::io(path, e))?;
        }
        for path in &self.by_path {
            match File::open(path) {
                Ok(file) => super::fsync::sync_all(&file).map_err(|e| LogError::io(path, e))?,
                // Deleted meanwhile (retention, a truncation): nothing left to keep.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(path, e)),
            }
        }
        Ok(())
    }
}

/// One roll's syncs: the sealed segment's files, then the directory (which now names the
/// new segment).
#[derive(Debug)]
struct Job {
    segment: SegmentSync,
    dir: PathBuf,
    done: AtomicBool,
}

impl Job {
    fn run(&self) -> Result<(), LogError> {
        if self.done.load(Ordering::Acquire) {
            return Ok(());
        }
        self.segment.run()?;
        super::checkpoint::sync_dir(&self.dir)?;
        self.done.store(true, Ordering::Release);
        Ok(())
    }
}

#[derive(Debug)]
struct Pending {
    job: Arc<Job>,
    /// The new segment's base: everything before it is on disk once this job and every
    /// earlier one are done.
    through: i64,
    generation: u64,
}

#[derive(Debug)]
struct State {
    /// Moved on by every truncation: a job of an older generation moves nothing.
    generation: u64,
    /// Where the syncs done so far let the recovery point be (-1: nowhere yet).
    synced_through: i64,
    /// In roll order.
    pending: VecDeque<Pending>,
    /// The first sync that failed: its path, kind and message.
    failure: Option<(PathBuf, std::io::ErrorKind, String)>,
}

/// The roll syncs of one log.
#[derive(Debug, Clone)]
pub struct RollSyncs {
    state: Arc<Mutex<State>>,
}

impl Default for RollSyncs {
    fn default() -> Self {
        RollSyncs {
            state: Arc::new(Mutex::new(State {
                generation: 0,
                synced_through: -1,
                pending: VecDeque::new(),
                failure: None,
            })),
        }
    }
}

impl RollSyncs {
    /// Syncs `segment` and `dir` on a thread of their own (at once in a process that skips
    /// its fsyncs); once done (and every earlier roll too), the recovery point may reach
    /// `through`.
    pub fn start(&self, segment: SegmentSync, dir: PathBuf, through: i64) {
        let job = self.enqueue(segment, dir, through);
        if super::fsync::skipped() {
            // Nothing reaches the disk on purpose: no thread to wait for.
            return self.complete(&job, job.run());
        }
        let syncs = self.clone();
        let run = {
            let job = Arc::clone(&job);
            move || syncs.complete(&job, job.run())
        };
        if let Err(error) = std::thread::Builder::new()
            .name("highwater-roll-sync".into())
            .spawn(run)
        {
            tracing::warn!(%error, "cannot start a thread for a roll's fsyncs; syncing inline");
            self.complete(&job, job.run());
        }
    }

    fn enqueue(&self, segment: SegmentSync, dir: PathBuf, through: i64) -> Arc<Job> {
        let job = Arc::new(Job {
            segment,
            dir,
            done: AtomicBool::new(false),
        });
        let mut state = self.lock();
        let generation = state.generation;
        state.pending.push_back(Pending {
            job: Arc::clone(&job),
            through,
            generation,
        });
        job
    }

    /// Runs every pending sync here and now (before the recovery point moves past them).
    pub fn finish(&self) -> Result<(), LogError> {
        let jobs: Vec<Arc<Job>> = self
            .lock()
            .pending
            .iter()
            .map(|p| Arc::clone(&p.job))
            .collect();
        for job in jobs {
            let result = job.run();
            self.complete(&job, result);
        }
        self.check()
    }

    /// The recovery point: `stored` (what flushes and closes set), or further where the
    /// roll syncs done since let it be.
    pub fn recovery_point(&self, stored: i64) -> i64 {
        stored.max(self.lock().synced_through)
    }

    /// After a truncation: syncs under way no longer move the recovery point (they still
    /// run, and a flush still waits for them).
    pub fn truncated(&self) {
        let mut state = self.lock();
        state.generation += 1;
        state.synced_through = -1;
    }

    /// The failure of an earlier sync, if one failed.
    pub fn check(&self) -> Result<(), LogError> {
        match &self.lock().failure {
            None => Ok(()),
            Some((path, kind, message)) => Err(LogError::io(
                path.clone(),
                std::io::Error::new(*kind, message.clone()),
            )),
        }
    }

    fn complete(&self, job: &Arc<Job>, result: Result<(), LogError>) {
        let mut state = self.lock();
        if let Err(error) = result {
            tracing::error!(dir = %job.dir.display(), %error, "a rolled segment's fsync failed");
            if state.failure.is_none() {
                state.failure = Some(failure_of(&error, &job.dir));
            }
            return;
        }
        while let Some(front) = state.pending.front() {
            if !front.job.done.load(Ordering::Acquire) {
                break;
            }
            let (through, generation) = (front.through, front.generation);
            state.pending.pop_front();
            if generation == state.generation {
                state.synced_through = state.synced_through.max(through);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn failure_of(error: &LogError, dir: &std::path::Path) -> (PathBuf, std::io::ErrorKind, String) {
    match error {
        LogError::Io { path, source } => (path.clone(), source.kind(), source.to_string()),
        other => (
            dir.to_path_buf(),
            std::io::ErrorKind::Other,
            other.to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(syncs: &RollSyncs, dir: &std::path::Path, through: i64) -> Arc<Job> {
        syncs.enqueue(SegmentSync::new(vec![], None), dir.to_path_buf(), through)
    }

    #[test]
    fn the_recovery_point_moves_only_through_syncs_done_in_roll_order() {
        let dir = tempfile::tempdir().expect("dir");
        let syncs = RollSyncs::default();
        let (first, second) = (job(&syncs, dir.path(), 100), job(&syncs, dir.path(), 200));
        assert_eq!(syncs.recovery_point(10), 10);
        syncs.complete(&second, second.run());
        assert_eq!(
            syncs.recovery_point(10),
            10,
            "not past an earlier roll not synced"
        );
        syncs.complete(&first, first.run());
        assert_eq!(syncs.recovery_point(10), 200);
        assert_eq!(syncs.recovery_point(300), 300, "a flush went further");
    }

    #[test]
    fn a_truncation_keeps_syncs_under_way_from_moving_the_recovery_point() {
        let dir = tempfile::tempdir().expect("dir");
        let syncs = RollSyncs::default();
        let before = job(&syncs, dir.path(), 100);
        syncs.truncated();
        syncs.complete(&before, before.run());
        assert_eq!(syncs.recovery_point(50), 50);
        let after = job(&syncs, dir.path(), 80);
        syncs.finish().expect("finish");
        assert!(after.done.load(Ordering::Acquire));
        assert_eq!(syncs.recovery_point(50), 80);
    }

    #[test]
    fn a_failed_sync_fails_what_comes_next_and_moves_nothing() {
        let syncs = RollSyncs::default();
        let gone = std::path::Path::new("/nonexistent/highwater-roll-sync");
        let failing = job(&syncs, gone, 100);
        syncs.complete(&failing, failing.run());
        assert_eq!(syncs.recovery_point(0), 0);
        let error = syncs.check().expect_err("the failure");
        assert!(error.to_string().contains("highwater-roll-sync"), "{error}");
        assert!(syncs.finish().is_err());
    }

    #[test]
    fn a_file_named_to_a_roll_is_part_of_its_sync_unless_deleted_meanwhile() {
        let dir = tempfile::tempdir().expect("dir");
        let syncs = RollSyncs::default();
        let deleted = SegmentSync::new(vec![], None).and_file(dir.path().join("gone.snapshot"));
        let fine = syncs.enqueue(deleted, dir.path().to_path_buf(), 100);
        syncs.complete(&fine, fine.run());
        assert_eq!(
            syncs.recovery_point(0),
            100,
            "a deleted file has nothing to keep"
        );
        let not_a_dir = dir.path().join("file");
        std::fs::write(&not_a_dir, b"x").expect("write");
        let unopenable = SegmentSync::new(vec![], None).and_file(not_a_dir.join("a.snapshot"));
        let failing = syncs.enqueue(unopenable, dir.path().to_path_buf(), 200);
        syncs.complete(&failing, failing.run());
        assert_eq!(syncs.recovery_point(0), 100, "not past the failed sync");
        assert!(syncs.check().is_err());
    }
}
