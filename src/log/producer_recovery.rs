//! How a log's producer state survives restarts and truncations (the persistence half of
//! Kafka's ProducerStateManager and LogLoader): loaded (by `recovery.rs`) from the latest
//! producer snapshot and the segments' `.txnindex` files, then brought to the log end by
//! replaying only the batch headers after the snapshot; a snapshot is written at every
//! roll (at the new segment's base offset) and at clean shutdown (at the log end), and
//! each ABORT marker's transaction goes to the `.txnindex` of the segment holding the
//! marker.
//!
//! Snapshots above the log end (left by a crash or a truncation) and below the first
//! segment (retention) are deleted; a snapshot that fails its checks is deleted and an
//! older one used, or the whole log replayed. Index entries before the snapshot are trusted
//! (they were fsynced before it was written); later ones are found again by the replay.

use std::path::PathBuf;

use super::batch::BatchHeader;
use super::control::Marker;
use super::error::LogError;
use super::partition_log::Log;
use super::producer_snapshot;
use super::recovery::{load_producers, record};

impl Log {
    /// Follows a batch just appended to the active segment in the producer state (and the
    /// segment's `.txnindex`).
    pub(super) fn record_producer_batch(
        &mut self,
        header: &BatchHeader,
        marker: Option<Marker>,
    ) -> Result<(), LogError> {
        let (producers, active) = self.producers_and_active();
        record(producers, active, header, marker)
    }

    /// Writes a producer snapshot at the log end offset, unless one is there already.
    pub(super) fn take_producer_snapshot(&mut self) -> Result<(), LogError> {
        self.write_producer_snapshot(true).map(|_| ())
    }

    /// Writes a producer snapshot at the log end offset, unless one is there already, and
    /// does not sync it: returns its path, for the caller to sync (a roll's sync thread).
    pub(super) fn take_producer_snapshot_unsynced(&mut self) -> Result<Option<PathBuf>, LogError> {
        self.write_producer_snapshot(false)
    }

    fn write_producer_snapshot(&mut self, durable: bool) -> Result<Option<PathBuf>, LogError> {
        let offset = self.log_end_offset().0;
        if self.last_snapshot_offset() == offset {
            return Ok(None);
        }
        let entries = self.producers().snapshot_entries();
        let written = match durable {
            true => producer_snapshot::write(self.dir(), offset, &entries).map(|()| None),
            false => producer_snapshot::write_unsynced(self.dir(), offset, &entries).map(Some),
        }?;
        tracing::debug!(dir = %self.dir().display(), offset, producers = entries.len(),
            durable, "wrote producer snapshot");
        self.set_last_snapshot_offset(offset);
        Ok(written)
    }

    /// Reloads the producer state after the log's end was truncated.
    pub(super) fn reload_producers(&mut self) -> Result<(), LogError> {
        let (table, from) = load_producers(self.dir(), self.segments(), self.log_start_offset().0)?;
        self.set_producers(table, from);
        Ok(())
    }

    /// Deletes the snapshots below the first segment (after retention deleted segments).
    pub(super) fn delete_snapshots_before_first_segment(&self) -> Result<(), LogError> {
        let first_base = self.segments().first().base_offset();
        producer_snapshot::delete_where(self.dir(), |offset| offset < first_base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{LeaderEpoch, Offset};
    use crate::log::batch::tests::encode_batch;
    use crate::log::cleaner::transaction_tests::{end_txn, txn_batch};
    use crate::log::config::{test_config, OpenOptions};
    use crate::log::producer_state::{ProducerView, SequenceCheck};
    use std::path::Path;

    fn open(dir: &Path) -> Log {
        Log::open(dir, test_config(400, 64), OpenOptions::default()).expect("open")
    }

    fn append(log: &mut Log, batch: &[u8]) -> i64 {
        log.append_as_leader(batch, LeaderEpoch(0))
            .expect("append")
            .base_offset
            .into()
    }

    /// What a restart must keep: every producer, the last stable offset and the aborted
    /// transactions a read_committed fetch is told of.
    fn state(log: &Log) -> (Vec<ProducerView>, i64, Vec<(i64, i64, i64)>) {
        let end = log.log_end_offset();
        let aborted = log
            .producers()
            .aborted_between(0, end.0)
            .iter()
            .map(|a| (a.producer_id, a.first_offset, a.last_offset))
            .collect();
        (
            log.producers().describe(),
            log.last_stable_offset(end).0,
            aborted,
        )
    }

    /// An idempotent producer (1), an aborted transaction (2), a committed one (3) and an
    /// open one (4), over several segments.
    fn write_producers(log: &mut Log) {
        for n in 0..4 {
            append(log, &encode_batch(3, 1, n * 3, 1_000));
        }
        append(log, &txn_batch(2, 0, &[(1, Some(1)), (2, Some(2))]));
        append(log, &txn_batch(3, 0, &[(3, Some(3))]));
        append(log, &txn_batch(2, 2, &[(4, Some(4))]));
        end_txn(log, 2, false);
        end_txn(log, 3, true);
        append(log, &txn_batch(4, 0, &[(5, Some(5))]));
        append(log, &encode_batch(3, 1, 12, 1_000));
        assert!(log.segments().len() > 2, "the test needs several segments");
    }

    /// Goal: after a clean shutdown the producer state comes back from the snapshot at the
    /// log end, with no batch read, and behaves as before (a retry is still a duplicate).
    /// Method: write producers, close, reopen, compare; the snapshot and `.txnindex` files
    /// are on disk.
    #[test]
    fn a_clean_restart_loads_the_snapshot_at_the_log_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path());
        write_producers(&mut log);
        let before = state(&log);
        let end = log.log_end_offset();
        log.close().expect("close");
        drop(log);
        assert!(producer_snapshot::path(dir.path(), end.0).exists());
        let indexed: usize = log_files(dir.path(), "txnindex");
        assert_eq!(indexed, 1, "one segment holds the ABORT marker");
        let log = open(dir.path());
        assert_eq!(log.last_snapshot_offset(), end.0, "loaded from the log end");
        assert_eq!(state(&log), before);
        assert_eq!(
            before.1, before.0[3].current_txn_start_offset,
            "LSO held by 4"
        );
        assert_eq!(before.2.len(), 1, "one aborted transaction");
        let retry = BatchHeader::parse(&encode_batch(3, 1, 12, 1_000)).expect("header");
        assert!(matches!(
            log.producers().check(&retry),
            Ok(SequenceCheck::Duplicate(_))
        ));
    }

    fn log_files(dir: &Path, suffix: &str) -> usize {
        std::fs::read_dir(dir)
            .expect("dir")
            .filter(|e| {
                let name = e.as_ref().expect("entry").file_name();
                name.to_string_lossy().ends_with(suffix)
            })
            .count()
    }

    /// Goal: after a crash the state is the snapshot of the last roll plus the replayed
    /// tail, the same as before the crash; a `.txnindex` entry written after that snapshot
    /// is found again, not doubled. Method: drop the log without closing it, reopen.
    #[test]
    fn a_crash_replays_only_the_batches_after_the_last_roll() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path());
        write_producers(&mut log);
        let before = state(&log);
        let last_roll = log.segments().active().base_offset();
        drop(log);
        let log = open(dir.path());
        assert_eq!(log.last_snapshot_offset(), last_roll);
        assert_eq!(state(&log), before);
        drop(log);
        let log = open(dir.path());
        assert_eq!(state(&log), before, "a second crash changes nothing");
    }

    /// Goal: retention deleting every batch of a producer keeps its state across a restart
    /// (Kafka keeps it in the snapshots), so its next batch is in sequence and a gap is
    /// still refused. Method: producer 1 writes first, others fill later segments, the
    /// first segments go, restart.
    #[test]
    fn retention_keeps_the_state_of_producers_whose_batches_it_deletes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path());
        append(&mut log, &encode_batch(3, 1, 0, 1_000));
        for _ in 0..12 {
            append(&mut log, &encode_batch(3, -1, -1, 1_000));
        }
        let end = log.log_end_offset();
        log.delete_records(end - 1, end).expect("delete records");
        assert!(
            log.segments().first().base_offset() > 0,
            "producer 1's segment went"
        );
        drop(log);
        let mut log = open(dir.path());
        assert_eq!(log.producers().describe()[0].last_sequence, 2);
        let gap = BatchHeader::parse(&encode_batch(1, 1, 5, 1_000)).expect("header");
        assert!(log.producers().check(&gap).is_err(), "a gap is refused");
        append(&mut log, &encode_batch(1, 1, 3, 1_000));
    }

    /// Goal: a follower truncated below an ABORT marker loses that aborted transaction in
    /// memory and in its `.txnindex` (the transaction is open again, holding the LSO), and a
    /// damaged snapshot falls back to an older one. Method: abort, truncate at the marker,
    /// reopen with the latest snapshot damaged.
    #[test]
    fn a_truncation_below_a_marker_reopens_its_transaction() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path());
        for n in 0..6 {
            append(&mut log, &encode_batch(3, 1, n * 3, 1_000));
        }
        let first = append(&mut log, &txn_batch(2, 0, &[(1, Some(1))]));
        let marker = end_txn(&mut log, 2, false);
        assert_eq!(state(&log).2, [(2, first, marker)]);
        log.truncate_to(Offset(marker)).expect("truncate");
        assert!(state(&log).2.is_empty(), "the abort is gone");
        assert_eq!(log.last_stable_offset(log.log_end_offset()), Offset(first));
        let active = log.segments().active();
        assert!(active.txn_index().entries().expect("entries").is_empty());
        log.close().expect("close");
        let end = log.log_end_offset();
        drop(log);
        let snapshot = producer_snapshot::path(dir.path(), end.0);
        let mut bytes = std::fs::read(&snapshot).expect("read");
        bytes[12] ^= 0xff;
        std::fs::write(&snapshot, bytes).expect("damage");
        let log = open(dir.path());
        assert!(
            log.last_snapshot_offset() < end.0,
            "an older snapshot was used"
        );
        assert!(!snapshot.exists(), "the damaged one was deleted");
        assert_eq!(log.last_stable_offset(log.log_end_offset()), Offset(first));
    }
}
