//! Swapping a cleaned segment in for the group of segments it replaces, crash-safely
//! (Kafka's replaceSegments, in our own words); `recovery.rs` finishes or undoes a
//! half-done swap when a log is opened.
//!
//! On disk, for a group whose first segment starts at X:
//! 1. the cleaner writes and fsyncs `X.log.cleaned`, `X.index.cleaned`,
//!    `X.timeindex.cleaned`, `X.txnindex.cleaned` (a crash now: `.cleaned` files are
//!    deleted on open);
//! 2. the index files are renamed to `.swap`, then the log: **`X.log.swap` existing is the
//!    commit point** (a crash before it: stray `.swap` indexes are deleted on open);
//! 3. the other segments of the group are deleted, then the `.swap` files are renamed over
//!    X's files, the log last. On open, an `X.log.swap` means: delete every segment whose
//!    base offset lies in (X, last offset of the swap log] — exactly the group, since a
//!    cleaned segment keeps its group's last batch — drop X's indexes (rebuilt), rename a
//!    `X.txnindex.swap` over X's (aborted transactions cannot be rebuilt from the cleaned
//!    log) and rename the swap log to `X.log`.
//!
//! Readers holding bytes of a replaced segment keep its mapping; unlinking or renaming over
//! its files does not disturb them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkpoint::{remove_if_exists, sync_dir};
use super::cleaner::CleanedSegment;
use super::error::LogError;
use super::partition_log::Log;
use super::recovery::LOG_LAST;
use super::segment::{file_name, temporary_paths, OpenMode, Segment, FILE_KINDS};

/// One step of a swap on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileStep {
    Rename(PathBuf, PathBuf),
    Remove(PathBuf),
    SyncDir(PathBuf),
}

impl FileStep {
    fn run(&self) -> Result<(), LogError> {
        match self {
            FileStep::Rename(from, to) => {
                std::fs::rename(from, to).map_err(|e| LogError::io(from, e))
            }
            FileStep::Remove(path) => remove_if_exists(path),
            FileStep::SyncDir(dir) => sync_dir(dir),
        }
    }
}

/// The steps that swap the `.cleaned` segment at `base_offset` in for it and for the
/// segments at `others`, in the crash-safe order of the module comment.
pub fn swap_steps(dir: &Path, base_offset: i64, others: &[i64]) -> Vec<FileStep> {
    let cleaned = temporary_paths(dir, base_offset, "cleaned");
    let swap = temporary_paths(dir, base_offset, "swap");
    let mut steps = vec![FileStep::SyncDir(dir.to_path_buf())];
    for n in LOG_LAST {
        steps.push(FileStep::Rename(cleaned[n].clone(), swap[n].clone()));
    }
    steps.push(FileStep::SyncDir(dir.to_path_buf()));
    for base in others {
        for n in LOG_LAST {
            steps.push(FileStep::Remove(dir.join(file_name(*base, FILE_KINDS[n]))));
        }
    }
    for n in LOG_LAST {
        let target = dir.join(file_name(base_offset, FILE_KINDS[n]));
        steps.push(FileStep::Rename(swap[n].clone(), target));
    }
    steps.push(FileStep::SyncDir(dir.to_path_buf()));
    steps
}

/// Runs the first `count` steps (all of them outside tests).
pub fn run_steps(steps: &[FileStep], count: usize) -> Result<(), LogError> {
    steps.iter().take(count).try_for_each(FileStep::run)
}

impl Log {
    /// Swaps `cleaned` in for the segments it replaces, if they are still there unchanged
    /// (retention may have deleted some meanwhile); returns whether it did.
    pub fn replace_with_cleaned(&mut self, cleaned: CleanedSegment) -> Result<bool, LogError> {
        self.replace_with_cleaned_steps(cleaned, usize::MAX)
    }

    /// [`Log::replace_with_cleaned`], stopping after `steps` file steps (crash tests).
    pub(crate) fn replace_with_cleaned_steps(
        &mut self,
        cleaned: CleanedSegment,
        steps: usize,
    ) -> Result<bool, LogError> {
        let dir = self.dir().to_path_buf();
        let CleanedSegment {
            segment,
            replaced,
            aborted_without_batches,
            ..
        } = cleaned;
        let base_offset = segment.base_offset();
        drop(segment);
        // The group is still there, sealed (a later segment follows it), and unchanged.
        let sealed = self.segments().sealed();
        let start = sealed.iter().position(|s| s.base_offset() == base_offset);
        let unchanged = start.filter(|i| {
            let current = &sealed[*i..];
            current.len() >= replaced.len()
                && current
                    .iter()
                    .zip(&replaced)
                    .all(|(s, (base, size, file))| {
                        s.base_offset() == *base
                            && s.size() == *size
                            && Arc::ptr_eq(&s.log_file(), file)
                    })
        });
        let Some(start) = unchanged else {
            for path in temporary_paths(&dir, base_offset, "cleaned") {
                remove_if_exists(&path)?;
            }
            tracing::info!(dir = %dir.display(), base_offset,
                "segments changed while cleaning: cleaned segment discarded");
            return Ok(false);
        };
        let others: Vec<i64> = replaced.iter().skip(1).map(|(base, ..)| *base).collect();
        let group = &self.segments().sealed()[start..start + replaced.len()];
        write_cleaned_txn_index(&dir, base_offset, group, &aborted_without_batches)?;
        let plan = swap_steps(&dir, base_offset, &others);
        run_steps(&plan, steps)?;
        if steps < plan.len() {
            return Ok(false);
        }
        let mode = OpenMode {
            active: false,
            recover: false,
        };
        let (swapped, _) = Segment::open(&dir, base_offset, self.config().segment, mode)?;
        let replaced_sealed = self
            .segments_mut()
            .replace_sealed(start..start + replaced.len(), swapped);
        debug_assert!(replaced_sealed, "`unchanged` found the group sealed");
        self.forget_aborted(&aborted_without_batches);
        self.check_invariants();
        Ok(true)
    }
}

/// Writes the cleaned segment's `.txnindex.cleaned` (empty when no entry is left, so that
/// the swap replaces the old index): the entries of the segments of `group`, without the
/// aborted transactions the cleaner removed every batch of.
fn write_cleaned_txn_index(
    dir: &Path,
    base_offset: i64,
    group: &[Segment],
    gone: &[super::txn_index::AbortedTransaction],
) -> Result<(), LogError> {
    let mut bytes = Vec::new();
    for segment in group {
        for entry in segment.txn_index().entries()? {
            if !gone.iter().any(|g| {
                g.producer_id == entry.transaction.producer_id
                    && g.last_offset == entry.transaction.last_offset
            }) {
                bytes.extend_from_slice(&entry.encode());
            }
        }
    }
    let [.., txn_index] = temporary_paths(dir, base_offset, "cleaned");
    super::checkpoint::write_atomically(&txn_index, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::LeaderEpoch;
    use crate::log::cleaner::tests::{all_records, compact_config, keyed_batch};
    use crate::log::config::OpenOptions;
    use crate::log::offset_map::OffsetMap;
    use kafka_protocol::records::Compression;
    use std::sync::atomic::AtomicBool;

    /// A compacted log of several small sealed segments where key `i % 3` is written 24
    /// times, reopened with segments large enough for the cleaner to group them.
    fn dirty_log(dir: &Path) -> Log {
        let mut log = Log::open(dir, compact_config(300), OpenOptions::default()).expect("open");
        for i in 0..24u8 {
            let batch = keyed_batch(&[(Some(i % 3), Some(i))], Compression::None);
            log.append_as_leader(&batch, LeaderEpoch(0))
                .expect("append");
        }
        log.roll().expect("roll");
        drop(log);
        Log::open(dir, compact_config(1 << 16), OpenOptions::default()).expect("reopen")
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
            .collect()
    }

    /// Goal: a crash at any step of a swap leaves a log that reopens consistent: no
    /// temporary files, the same log end offset, increasing offsets, and either every
    /// original record or exactly the cleaned ones. Method: stop the swap after each of
    /// its file steps, drop the log as a crash would, reopen without the clean marker.
    #[test]
    fn a_crash_at_any_step_of_a_swap_rolls_back_or_completes() {
        let reference = tempfile::tempdir().expect("tempdir");
        let original = all_records(&dirty_log(reference.path()));
        let mut step = 0;
        loop {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = dirty_log(dir.path());
            let end = log.log_end_offset();
            let stop = AtomicBool::new(false);
            let plan = log.cleaning_plan(&log.log_to_clean(None, end, 0));
            let mut map = OffsetMap::new(64);
            let end_offset = plan.build_offset_map(&mut map, &stop).expect("map");
            let group = plan.groups(end_offset).remove(0);
            assert!(
                group.len() > 1,
                "the test needs a group of several segments"
            );
            let mut transactions = plan.transactions();
            let cleaned = plan
                .clean_group(&group, &map, &mut transactions, 0, &stop)
                .expect("clean");
            let others: Vec<i64> = group.iter().skip(1).map(|s| s.base_offset).collect();
            let total = swap_steps(dir.path(), group[0].base_offset, &others).len();
            let swapped = log
                .replace_with_cleaned_steps(cleaned, step)
                .expect("steps");
            let expected_after = swapped.then(|| all_records(&log));
            drop(log);
            let mut log = Log::open(dir.path(), compact_config(1 << 16), OpenOptions::default())
                .expect("reopen after the crash");
            assert!(
                leftovers(dir.path()).is_empty(),
                "step {step}: {:?}",
                leftovers(dir.path())
            );
            assert_eq!(log.log_end_offset(), end, "step {step}");
            let records = all_records(&log);
            assert!(records.windows(2).all(|w| w[0].0 < w[1].0), "step {step}");
            // steps 0-4: sync, index, time index, transaction index, log renamed
            let committed = step >= 5;
            if committed {
                assert!(
                    records.len() < original.len(),
                    "step {step}: the swap completed"
                );
                for record in &records {
                    assert!(
                        original.contains(record),
                        "step {step}: {record:?} kept as written"
                    );
                }
            } else {
                assert_eq!(records, original, "step {step}: the swap rolled back");
            }
            if let Some(after) = expected_after {
                assert_eq!(records, after);
            }
            let next = keyed_batch(&[(Some(0), Some(99))], Compression::None);
            assert_eq!(
                log.append_as_leader(&next, LeaderEpoch(0))
                    .expect("append")
                    .base_offset,
                end
            );
            if step >= total {
                break;
            }
            step += 1;
        }
    }
}
