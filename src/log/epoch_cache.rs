//! The leader epoch cache of one partition (LeaderEpochFileCache in Apache Kafka): the
//! start offset of every leader epoch the log holds, persisted in the partition's
//! `leader-epoch-checkpoint` as `epoch start_offset` lines.
//!
//! Invariant: entries increase strictly in epoch and do not decrease in start offset.

use std::path::{Path, PathBuf};

use super::checkpoint;
use super::error::LogError;
use crate::ids::{LeaderEpoch, Offset};

/// The checkpoint file's name inside a partition directory.
pub const FILE_NAME: &str = "leader-epoch-checkpoint";

/// One (epoch, start offset) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

/// The cache and its file.
#[derive(Debug)]
pub struct EpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
    /// The file still holds entries that [`EpochCache::load`] dropped. It is rewritten at
    /// the next change or append, before the log grows past them and one could pass for
    /// the epoch of records appended later.
    file_behind: bool,
}

impl EpochCache {
    /// Loads the cache from `dir` (empty if the file does not exist) for a log that ends
    /// at `log_end_offset`: entries starting at or after it are dropped (an epoch taken
    /// with nothing appended, or records lost in a crash) in memory only; the file follows
    /// at the next [`EpochCache::maybe_assign`] (every append makes one) or truncation.
    /// Rewriting it here cost two fsyncs per partition on every start, and a restarted
    /// leader rewrites it anyway when it takes its new epoch; until then a crash leaves
    /// the dropped entries in the file, and the next load drops them again.
    pub fn load(dir: &Path, log_end_offset: Offset) -> Result<Self, LogError> {
        let path = dir.join(FILE_NAME);
        let mut entries = Vec::new();
        for line in checkpoint::read(&path)?.unwrap_or_default() {
            let mut parts = line.split_whitespace().map(str::parse::<i64>);
            match (parts.next(), parts.next()) {
                (Some(Ok(epoch)), Some(Ok(start_offset))) => {
                    let entry = EpochEntry {
                        epoch: LeaderEpoch(i32::try_from(epoch).unwrap_or(i32::MAX)),
                        start_offset: Offset(start_offset),
                    };
                    let follows = entries.last().is_none_or(|last: &EpochEntry| {
                        last.epoch < entry.epoch && last.start_offset <= entry.start_offset
                    });
                    if !follows || epoch < 0 || epoch > i64::from(i32::MAX) {
                        return Err(LogError::CorruptFile {
                            path,
                            reason: format!("leader epoch entry {line:?} out of order"),
                        });
                    }
                    entries.push(entry);
                }
                _ => {
                    return Err(LogError::CorruptFile {
                        path,
                        reason: format!("bad leader epoch entry {line:?}"),
                    })
                }
            }
        }
        let loaded = entries.len();
        entries.retain(|e| e.start_offset < log_end_offset);
        let cache = EpochCache {
            path,
            file_behind: entries.len() != loaded,
            entries,
        };
        cache.check_invariants();
        Ok(cache)
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, dropping entries it supersedes, and
    /// persists the change. Returns whether anything changed. An epoch older than the
    /// latest is refused: the history of epochs only grows at its end.
    pub fn maybe_assign(
        &mut self,
        epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<bool, LogError> {
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                if self.file_behind {
                    self.persist()?;
                }
                return Ok(false);
            }
            if epoch < last.epoch {
                return Err(LogError::StaleLeaderEpoch {
                    epoch,
                    start_offset,
                    latest: last.epoch,
                });
            }
        }
        self.entries
            .retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.check_invariants();
        self.persist()?;
        Ok(true)
    }

    /// The epoch of the record at `offset`: that of the last entry starting at or before
    /// it (None below the first entry).
    pub fn epoch_at(&self, offset: Offset) -> Option<LeaderEpoch> {
        let n = self.entries.partition_point(|e| e.start_offset <= offset);
        n.checked_sub(1).map(|n| self.entries[n].epoch)
    }

    /// The end offset of `requested` epoch as OffsetForLeaderEpoch answers it: the start
    /// of the next higher epoch, or `log_end_offset` for the latest epoch; (-1, -1) when
    /// unknown. Returns (epoch, end offset).
    pub fn end_offset_for(
        &self,
        requested: LeaderEpoch,
        log_end_offset: Offset,
    ) -> (LeaderEpoch, Offset) {
        const UNKNOWN: (LeaderEpoch, Offset) = (LeaderEpoch::UNKNOWN, Offset::UNKNOWN);
        if requested.0 < 0 {
            return UNKNOWN;
        }
        match self.latest_epoch() {
            None => return UNKNOWN,
            Some(latest) if latest == requested => return (requested, log_end_offset),
            _ => {}
        }
        let Some(higher) = self.entries.iter().position(|e| e.epoch > requested) else {
            return UNKNOWN;
        };
        match higher.checked_sub(1) {
            None => (requested, self.entries[higher].start_offset),
            Some(floor) => (self.entries[floor].epoch, self.entries[higher].start_offset),
        }
    }

    /// Removes entries that start at or after `offset` (log truncation) and persists.
    pub fn truncate_from_end(&mut self, offset: Offset) -> Result<(), LogError> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < offset);
        if self.entries.len() != before || self.file_behind {
            self.persist()?;
        }
        Ok(())
    }

    fn persist(&mut self) -> Result<(), LogError> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset))
            .collect();
        checkpoint::write(&self.path, &lines)?;
        self.file_behind = false;
        Ok(())
    }

    /// Checks that entries increase (debug builds).
    pub fn check_invariants(&self) {
        for pair in self.entries.windows(2) {
            debug_assert!(pair[0].epoch < pair[1].epoch, "epochs must increase");
            debug_assert!(
                pair[0].start_offset <= pair[1].start_offset,
                "starts must not decrease"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> (tempfile::TempDir, EpochCache) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = EpochCache::load(dir.path(), Offset(i64::MAX)).expect("load");
        for (epoch, start) in entries {
            cache
                .maybe_assign(LeaderEpoch(*epoch), Offset(*start))
                .expect("assign");
        }
        (dir, cache)
    }

    #[test]
    fn end_offset_follows_kafkas_rule() {
        let (_dir, cache) = cache(&[(1, 0), (3, 10), (5, 20)]);
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(5), Offset(30)),
            (LeaderEpoch(5), Offset(30))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(3), Offset(30)),
            (LeaderEpoch(3), Offset(20))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(4), Offset(30)),
            (LeaderEpoch(3), Offset(20))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(0), Offset(30)),
            (LeaderEpoch(0), Offset(0))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(6), Offset(30)),
            (LeaderEpoch(-1), Offset(-1))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(-1), Offset(30)),
            (LeaderEpoch(-1), Offset(-1))
        );
    }

    #[test]
    fn assign_is_persisted_and_reloaded() {
        let (dir, cache) = cache(&[(0, 0), (2, 7)]);
        drop(cache);
        let reloaded = EpochCache::load(dir.path(), Offset(i64::MAX)).expect("reload");
        assert_eq!(reloaded.entries().len(), 2);
        assert_eq!(
            reloaded.entries()[1],
            EpochEntry {
                epoch: LeaderEpoch(2),
                start_offset: Offset(7)
            }
        );
    }

    #[test]
    fn an_older_epoch_is_refused_and_changes_nothing() {
        let (_dir, mut cache) = cache(&[(0, 0), (3, 10)]);
        let refused = cache.maybe_assign(LeaderEpoch(2), Offset(12));
        assert!(matches!(
            refused,
            Err(LogError::StaleLeaderEpoch {
                latest: LeaderEpoch(3),
                ..
            })
        ));
        assert_eq!(cache.entries().len(), 2);
    }

    #[test]
    fn a_checkpoint_with_epochs_out_of_order_is_refused_as_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        for body in ["0\n2\n3 10\n1 20\n", "0\n2\n1 10\n2 5\n", "0\n1\n-4 0\n"] {
            std::fs::write(dir.path().join(FILE_NAME), body).expect("write");
            let loaded = EpochCache::load(dir.path(), Offset(i64::MAX));
            assert!(
                matches!(loaded, Err(LogError::CorruptFile { .. })),
                "{body:?}"
            );
        }
    }

    #[test]
    fn load_drops_entries_at_the_log_end_without_rewriting_the_file() {
        let (dir, cache) = cache(&[(0, 0), (2, 7), (3, 9)]);
        drop(cache);
        let before = std::fs::read(dir.path().join(FILE_NAME)).expect("read");
        let mut loaded = EpochCache::load(dir.path(), Offset(7)).expect("load");
        assert_eq!(loaded.latest_epoch(), Some(LeaderEpoch(0)));
        assert_eq!(
            std::fs::read(dir.path().join(FILE_NAME)).expect("read"),
            before
        );
        // The next change writes the file without the dropped entries.
        loaded
            .maybe_assign(LeaderEpoch(4), Offset(7))
            .expect("assign");
        let reloaded = EpochCache::load(dir.path(), Offset(i64::MAX)).expect("reload");
        let epochs: Vec<i32> = reloaded.entries().iter().map(|e| e.epoch.0).collect();
        assert_eq!(epochs, [0, 4]);
    }

    #[test]
    fn an_append_in_the_latest_epoch_rewrites_a_file_still_holding_dropped_entries() {
        // Epoch 2 started at 7 here, then its records were lost; the next leader's log has
        // more of epoch 0, which this replica appends. Were the file left as it was, a
        // crash after those appends would load epoch 2 as the epoch of offsets 7 and on.
        let (dir, cache) = cache(&[(0, 0), (2, 7)]);
        drop(cache);
        let mut loaded = EpochCache::load(dir.path(), Offset(7)).expect("load");
        assert!(!loaded
            .maybe_assign(LeaderEpoch(0), Offset(7))
            .expect("append at epoch 0"));
        let reloaded = EpochCache::load(dir.path(), Offset(20)).expect("reload after more appends");
        assert_eq!(reloaded.entries(), loaded.entries());
        assert_eq!(reloaded.epoch_at(Offset(10)), Some(LeaderEpoch(0)));
    }

    #[test]
    fn assign_of_the_same_epoch_is_a_no_op() {
        let (_dir, mut cache) = cache(&[(0, 0)]);
        assert!(!cache
            .maybe_assign(LeaderEpoch(0), Offset(5))
            .expect("assign"));
    }
}
