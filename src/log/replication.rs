//! The log operations replication needs: appending a leader's batches on a follower,
//! exactly as the leader stored them, and truncating the log's end to the point where it
//! diverges from the leader's.
//!
//! Truncation never shrinks a file that readers may still have mapped (a fetch response
//! can hold zero-copy bytes of a segment): the kept prefix of the segment holding the
//! truncation point is copied to a new file that replaces the old one by rename, and
//! later segments are unlinked. Mappings of the old files stay valid until dropped.

use std::io::Write;
use std::path::Path;

use super::batch::{self, BatchHeader, BatchIter};
use super::checkpoint::remove_if_exists;
use super::error::LogError;
use super::partition_log::{AppendInfo, Log};
use super::segment::{file_name, OpenMode, Segment};
use crate::ids::{LeaderEpoch, Offset};

impl Log {
    /// Appends batches fetched from the leader as they are: their base offsets must not go
    /// back (a compacted leader's log has gaps, and batches the cleaner rewrote hold fewer
    /// records than offsets), their CRCs must hold; their leader epochs enter the epoch
    /// cache.
    /// Producer state follows the batches without sequence checks (the leader made them).
    pub fn append_as_follower(&mut self, records: &[u8]) -> Result<Option<AppendInfo>, LogError> {
        self.check_roll_syncs()?;
        let mut first_offset = None;
        let (mut last_offset, mut leader_epoch) = (Offset::UNKNOWN, LeaderEpoch::UNKNOWN);
        for (position, header) in BatchIter::new(records) {
            let bytes = &records[position..position + header.size];
            self.check_follower_batch(bytes, &header)?;
            self.append_replicated_batch(bytes, &header)?;
            first_offset.get_or_insert(Offset(header.base_offset));
            last_offset = Offset(header.last_offset());
            leader_epoch = LeaderEpoch(header.partition_leader_epoch);
        }
        self.check_invariants();
        Ok(first_offset.map(|base_offset| AppendInfo {
            base_offset,
            last_offset,
            duplicate: false,
            leader_epoch,
            log_append_time_ms: -1,
        }))
    }

    fn check_follower_batch(&self, bytes: &[u8], header: &BatchHeader) -> Result<(), LogError> {
        if header.size != bytes.len() || header.magic != batch::MAGIC_V2 {
            return Err(LogError::InvalidBatch {
                reason: "replicated batch is not one whole record batch v2",
            });
        }
        if header.last_offset_delta < 0 {
            return Err(LogError::InvalidBatch {
                reason: "negative last offset delta",
            });
        }
        if header.record_count < 0 || header.record_count > header.last_offset_delta + 1 {
            return Err(LogError::InvalidBatch {
                reason: "record count does not fit the batch's offsets",
            });
        }
        batch::check_crc(bytes, header)?;
        if Offset(header.base_offset) < self.log_end_offset() {
            return Err(LogError::NonContiguousOffset {
                expected: self.log_end_offset(),
                found: Offset(header.base_offset),
            });
        }
        Ok(())
    }

    fn append_replicated_batch(
        &mut self,
        bytes: &[u8],
        header: &BatchHeader,
    ) -> Result<(), LogError> {
        if bytes.len() > self.config().segment.segment_bytes {
            let max = self.config().segment.segment_bytes;
            return Err(LogError::BatchLargerThanSegment {
                size: bytes.len(),
                max,
            });
        }
        let active = self.segments().active();
        if active.size() > 0 && !active.has_room_for(bytes.len()) {
            self.roll()?;
        }
        self.epoch_cache_mut().maybe_assign(
            LeaderEpoch(header.partition_leader_epoch),
            Offset(header.base_offset),
        )?;
        let segment = self.segments_mut().active_mut();
        let written = segment.append_unchanged(bytes)?;
        self.follow_producers(bytes, &written)?;
        self.count_unflushed(i64::from(written.record_count))
    }

    /// Records that `leader_epoch` starts at `start_offset` (a new leader does this when it
    /// takes over, before its first append).
    pub fn assign_leader_epoch(
        &mut self,
        leader_epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<bool, LogError> {
        self.epoch_cache_mut()
            .maybe_assign(leader_epoch, start_offset)
    }

    /// Removes every record at or after `offset` (and the batch holding `offset`, if it
    /// starts before it); the epoch cache forgets epochs starting there. Returns whether
    /// any record was removed. Offsets below the log start are never removed.
    ///
    /// Even when no record goes, the epoch cache forgets the epochs that start at the log
    /// end: a replica that led briefly without appending keeps such an entry, and fetching
    /// with it as its last epoch would make the leader report the same divergence for ever
    /// (Kafka's UnifiedLog.truncateTo does the same for this case).
    pub fn truncate_to(&mut self, offset: Offset) -> Result<bool, LogError> {
        let offset = offset.max(self.log_start_offset());
        if offset >= self.log_end_offset() {
            let end = self.log_end_offset();
            self.epoch_cache_mut().truncate_from_end(end)?;
            return Ok(false);
        }
        let dir = self.dir().to_path_buf();
        let config = self.config().segment;
        // The segment holding `offset` becomes the active one; every later one goes first,
        // so that a crash part-way leaves a contiguous prefix for the next start.
        let holding = self.segments().starting_at_or_before(offset.0).max(1) - 1;
        let removed = self.segments_mut().keep_through(holding);
        for segment in &removed {
            for path in segment.paths(&dir) {
                remove_if_exists(&path)?;
            }
        }
        drop(removed);
        let replacement = rewrite_prefix(&dir, self.segments().active(), offset.0, config)?;
        drop(self.segments_mut().replace_active(replacement));
        let end = self.log_end_offset();
        self.epoch_cache_mut().truncate_from_end(end)?;
        self.reload_producers()?;
        self.lower_recovery_point(end);
        tracing::info!(dir = %dir.display(), offset = offset.0, log_end_offset = end.0, "truncated log");
        self.check_invariants();
        Ok(true)
    }
}

/// Replaces `segment` by a copy of its batches that end before `offset`, opened as the
/// active segment (its indexes rebuilt).
fn rewrite_prefix(
    dir: &Path,
    segment: &Segment,
    offset: i64,
    config: super::segment::SegmentConfig,
) -> Result<Segment, LogError> {
    let base_offset = segment.base_offset();
    let kept = segment
        .batches_from(base_offset)
        .take_while(|(_, header)| header.last_offset() < offset)
        .last()
        .map_or(0, |(position, header)| position + header.size);
    let prefix = segment.bytes(0, kept);
    let log_path = dir.join(file_name(base_offset, "log"));
    let tmp_path = dir.join(format!("{}.truncating", file_name(base_offset, "log")));
    let io = |path: &Path, e| LogError::io(path, e);
    let mut tmp = std::fs::File::create(&tmp_path).map_err(|e| io(&tmp_path, e))?;
    tmp.write_all(&prefix).map_err(|e| io(&tmp_path, e))?;
    super::fsync::sync_all(&tmp).map_err(|e| io(&tmp_path, e))?;
    drop(tmp);
    let [_, index, time_index, _] = segment.paths(dir);
    std::fs::rename(&tmp_path, &log_path).map_err(|e| io(&log_path, e))?;
    remove_if_exists(&index)?;
    remove_if_exists(&time_index)?;
    let mode = OpenMode {
        active: true,
        recover: true,
    };
    let (segment, _) = Segment::open(dir, base_offset, config, mode)?;
    Ok(segment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use crate::log::config::test_config;
    use crate::log::OpenOptions;

    fn open(dir: &Path) -> Log {
        Log::open(dir, test_config(1 << 10, 64), OpenOptions::default()).expect("open")
    }

    #[test]
    fn truncation_keeps_whole_batches_before_the_offset_across_segments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path());
        for epoch in 0..40 {
            log.append_as_leader(&encode_batch(3, -1, -1, 0), LeaderEpoch(epoch / 10))
                .expect("append");
        }
        assert!(log.segments().len() > 2, "several segments");
        assert!(log.truncate_to(Offset(31)).expect("truncate"));
        assert_eq!(
            log.log_end_offset(),
            Offset(30),
            "the batch holding 31 goes whole"
        );
        // Epoch 1 began at offset 30 (the eleventh batch): it goes with its records.
        assert_eq!(log.epoch_cache().latest_epoch(), Some(LeaderEpoch(0)));
        // Appends continue at the new end, and the log reopens to the same state.
        log.append_as_leader(&encode_batch(2, -1, -1, 0), LeaderEpoch(5))
            .expect("append");
        assert_eq!(log.log_end_offset(), Offset(32));
        log.close().expect("close");
        drop(log);
        let log = open(dir.path());
        assert_eq!(log.log_end_offset(), Offset(32));
        assert_eq!(
            log.epoch_cache().end_offset_for(LeaderEpoch(3), Offset(32)),
            (LeaderEpoch(0), Offset(30))
        );
    }

    #[test]
    fn truncation_at_the_log_end_forgets_an_epoch_that_holds_no_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path());
        log.append_as_leader(&encode_batch(3, -1, -1, 0), LeaderEpoch(0))
            .expect("append");
        // Led at epoch 1 without appending: the epoch starts at the log end.
        log.assign_leader_epoch(LeaderEpoch(1), Offset(3))
            .expect("assign");
        assert!(
            !log.truncate_to(Offset(3)).expect("truncate"),
            "no record removed"
        );
        assert_eq!(log.epoch_cache().latest_epoch(), Some(LeaderEpoch(0)));
        drop(log);
        let log = open(dir.path());
        assert_eq!(
            log.epoch_cache().latest_epoch(),
            Some(LeaderEpoch(0)),
            "persisted"
        );
    }

    #[test]
    fn a_follower_appends_the_leaders_batches_unchanged_and_only_contiguously() {
        let leader_dir = tempfile::tempdir().expect("tempdir");
        let mut leader = open(leader_dir.path());
        for epoch in [0, 0, 2] {
            leader
                .append_as_leader(&encode_batch(4, -1, -1, 0), LeaderEpoch(epoch))
                .expect("append");
        }
        let fetched = leader
            .read(Offset(0), Offset(12), 1 << 20, true)
            .expect("read");
        let follower_dir = tempfile::tempdir().expect("tempdir");
        let mut follower = open(follower_dir.path());
        let info = follower
            .append_as_follower(&fetched)
            .expect("append")
            .expect("some");
        assert_eq!(
            (info.base_offset, info.last_offset),
            (Offset(0), Offset(11))
        );
        assert_eq!(
            follower
                .read(Offset(0), Offset(12), 1 << 20, true)
                .expect("read"),
            fetched
        );
        assert_eq!(
            follower.epoch_cache().entries(),
            leader.epoch_cache().entries()
        );
        let again = follower.append_as_follower(&fetched);
        assert!(matches!(again, Err(LogError::NonContiguousOffset { .. })));
    }
}
