//! The log of one partition: its ordered segments, the active one last, plus the leader
//! epoch cache and the producer state rebuilt from it.
//!
//! Thread safety: a `Log` is owned by one partition behind a lock; appends need `&mut`,
//! reads `&`. Bytes returned by reads point into the segment maps and stay valid after the
//! lock is released.
//! Invariant: log_start_offset <= log_end_offset, and segments are contiguous.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::batch::{self, BatchHeader};
use super::config::{LogConfig, OpenOptions};
use super::epoch_cache::EpochCache;
use super::error::LogError;
use super::producer_state::{ProducerStateTable, SequenceCheck};
use super::roll_sync::RollSyncs;
use super::segment::Segment;
use super::segments::Segments;
use crate::clock::system_now_ms as now_ms;
use crate::ids::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};

/// Where an appended (or de-duplicated) batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    /// True when the batch was a retry of one already in the log and nothing was written.
    pub duplicate: bool,
    /// The leader epoch the append was made at (a follower's: its batches' epoch).
    pub leader_epoch: LeaderEpoch,
    /// The broker's time stamped on the batch (LogAppendTime topics), else -1.
    pub log_append_time_ms: i64,
}

/// One partition's log.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    /// Sorted by base offset, each ending where the next begins.
    segments: Segments,
    log_start_offset: Offset,
    /// Offsets below it are flushed to disk (written to `recovery-point-offset-checkpoint`).
    recovery_point: Offset,
    /// Records appended since the last flush (for `flush.messages`).
    unflushed_messages: i64,
    /// When the log was last flushed (for `flush.ms`).
    last_flush_ms: i64,
    epoch_cache: EpochCache,
    /// Producers and their transactions (loaded when the log is opened or truncated, see
    /// `producer_recovery.rs`).
    producers: ProducerStateTable,
    /// The offset of the latest producer snapshot written or loaded.
    last_snapshot_offset: i64,
    /// Where the time of each flush goes (the broker's flush histogram), once given.
    flush_timer: Option<prometheus::Histogram>,
    /// The fsyncs of rolled segments, run after the append that rolled them.
    rolls: RollSyncs,
}

impl Log {
    /// Opens the log in `dir`, creating it if needed. After an unclean shutdown every
    /// segment from the one holding the recovery point on is re-scanned; a segment whose
    /// tail is cut makes every later segment go (as Kafka's LogLoader does).
    pub fn open(dir: &Path, config: LogConfig, options: OpenOptions) -> Result<Log, LogError> {
        let segments = super::recovery::open_segments(dir, config.segment, options)?;
        let first_base = Offset(segments.first().base_offset());
        let log_end_offset = Offset(segments.active().next_offset());
        let log_start_offset = options
            .log_start_offset
            .unwrap_or_default()
            .clamp(first_base, log_end_offset);
        let epoch_cache = EpochCache::load(dir, log_end_offset)?;
        let (producers, last_snapshot_offset) =
            super::recovery::load_producers(dir, &segments, log_start_offset.0)?;
        let log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            recovery_point: log_end_offset,
            unflushed_messages: 0,
            last_flush_ms: now_ms(),
            epoch_cache,
            producers,
            last_snapshot_offset,
            flush_timer: None,
            rolls: RollSyncs::default(),
        };
        log.check_invariants();
        Ok(log)
    }

    /// The producers of this partition and their transactions.
    pub fn producers(&self) -> &ProducerStateTable {
        &self.producers
    }

    /// The producer state to change, and the active segment (whose `.txnindex` it writes).
    pub(super) fn producers_and_active(&mut self) -> (&mut ProducerStateTable, &Segment) {
        (&mut self.producers, self.segments.active())
    }

    /// Replaces the producer state by one loaded from the snapshot at `snapshot_offset`.
    pub(super) fn set_producers(&mut self, producers: ProducerStateTable, snapshot_offset: i64) {
        self.producers = producers;
        self.last_snapshot_offset = snapshot_offset;
    }

    /// The offset of the latest producer snapshot written or loaded.
    pub(super) fn last_snapshot_offset(&self) -> i64 {
        self.last_snapshot_offset
    }

    /// Records that a producer snapshot was written at `offset`.
    pub(super) fn set_last_snapshot_offset(&mut self, offset: i64) {
        self.last_snapshot_offset = offset;
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first offset still in the log.
    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    /// The offset the next appended record gets (LEO).
    pub fn log_end_offset(&self) -> Offset {
        Offset(self.active().next_offset())
    }

    /// Offsets below this are on disk.
    pub fn recovery_point(&self) -> Offset {
        Offset(self.rolls.recovery_point(self.recovery_point.0))
    }

    /// The leader epoch cache.
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epoch_cache
    }

    /// The segments: the sealed ones, oldest first, and the active one.
    pub fn segments(&self) -> &Segments {
        &self.segments
    }

    /// The bytes of every segment's records (Kafka's `Log.size`).
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size() as u64).sum()
    }

    fn active(&self) -> &Segment {
        self.segments.active()
    }

    /// Validates one batch sent by a producer (exactly one per partition, as Produce v3+
    /// requires), de-duplicates retries, then appends it stamped with `leader_epoch`.
    pub fn append_as_leader(
        &mut self,
        records: &[u8],
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, LogError> {
        self.rolls.check()?;
        let header = self.validate_client_batch(records)?;
        if let SequenceCheck::Duplicate(original) = self.producers().check(&header)? {
            return Ok(AppendInfo {
                base_offset: Offset(original.first_offset),
                last_offset: Offset(original.last_offset),
                duplicate: true,
                leader_epoch,
                log_append_time_ms: -1,
            });
        }
        if records.len() > self.config.segment.segment_bytes {
            let max = self.config.segment.segment_bytes;
            return Err(LogError::BatchLargerThanSegment {
                size: records.len(),
                max,
            });
        }
        let active = self.active();
        let due =
            active.is_due_for_time_roll(now_ms(), header.max_timestamp, self.config.segment_ms);
        if active.size() > 0 && (due || !active.has_room_for(records.len())) {
            self.roll()?;
        }
        let base_offset = self.log_end_offset();
        self.epoch_cache.maybe_assign(leader_epoch, base_offset)?;
        let segment = self.segments.active_mut();
        let log_append_time = self.config.log_append_time.then(now_ms);
        let written = segment.append(records, base_offset.0, leader_epoch.0, log_append_time)?;
        self.record_producer_batch(&written, super::control::parse(records, &written))?;
        self.unflushed_messages += i64::from(written.record_count);
        if self.unflushed_messages >= self.config.flush_messages {
            self.flush()?;
        }
        self.check_invariants();
        Ok(AppendInfo {
            base_offset,
            last_offset: Offset(written.last_offset()),
            duplicate: false,
            leader_epoch,
            log_append_time_ms: log_append_time.unwrap_or(-1),
        })
    }

    fn validate_client_batch(&self, records: &[u8]) -> Result<BatchHeader, LogError> {
        let Some(first) = BatchHeader::parse(records) else {
            if records.is_empty() {
                return Err(LogError::BatchCount { count: 0 });
            }
            return Err(LogError::InvalidBatch {
                reason: "truncated batch header",
            });
        };
        if first.size < records.len() {
            let count = batch::BatchIter::new(records).count();
            return Err(LogError::BatchCount { count });
        }
        if first.size > self.config.max_message_bytes {
            let max = self.config.max_message_bytes;
            return Err(LogError::MessageTooLarge {
                size: first.size,
                max,
            });
        }
        let header = batch::validate(records)?;
        self.check_timestamps(records, &header)?;
        if header.is_control() {
            return Err(LogError::ControlBatchFromClient {
                producer_id: header.producer_id,
            });
        }
        if self.config.compaction.compact {
            let indexes = super::records::keyless_records(records, &header)?;
            if !indexes.is_empty() {
                let partition = self.dir.file_name().unwrap_or_default();
                return Err(LogError::NullKeyInCompactedTopic {
                    partition: partition.to_string_lossy().into_owned(),
                    indexes,
                });
            }
        }
        Ok(header)
    }

    /// Checks CreateTime timestamps against the accepted window (KIP-937, Kafka 3.6+), and
    /// names every record outside it (KIP-467). The header bounds the batch: its max
    /// timestamp every record from above, its base timestamp the first record; records are
    /// read only when that does not settle it (a lower bound is set, or a bound is crossed).
    fn check_timestamps(&self, records: &[u8], header: &BatchHeader) -> Result<(), LogError> {
        const LOG_APPEND_TIME: i16 = 1 << 3;
        if self.config.log_append_time || header.attributes & LOG_APPEND_TIME != 0 {
            return Ok(());
        }
        let now = now_ms();
        let min = now.saturating_sub(self.config.timestamp_before_max_ms);
        let max = now.saturating_add(self.config.timestamp_after_max_ms);
        let lower_bound_set = self.config.timestamp_before_max_ms < i64::MAX;
        let header_fits = [header.base_timestamp, header.max_timestamp]
            .iter()
            .all(|t| (min..=max).contains(t));
        if header_fits && !lower_bound_set {
            return Ok(());
        }
        let offending: Vec<(i32, i64, i64)> = super::records::timestamps(records, header)?
            .into_iter()
            .enumerate()
            .filter(|(_, (_, t))| *t >= 0 && !(min..=max).contains(t))
            .map(|(index, (offset_delta, t))| (index as i32, offset_delta, t))
            .collect();
        match offending.is_empty() {
            true => Ok(()),
            false => Err(LogError::InvalidTimestamp {
                records: offending,
                min,
                max,
            }),
        }
    }

    /// Seals (trims) the active segment and starts a new one at the log end offset. The
    /// sealed segment and the directory are synced on a thread of their own
    /// ([`super::roll_sync`]); the recovery point reaches the new segment once they are.
    pub fn roll(&mut self) -> Result<(), LogError> {
        self.rolls.check()?;
        let base_offset = self.log_end_offset();
        let sealed = self.active_mut().seal_deferred()?;
        let segment = Segment::create(&self.dir, base_offset.0, self.config.segment)?;
        tracing::debug!(dir = %self.dir.display(), base_offset = base_offset.0, "rolled a new segment");
        self.segments.roll(segment);
        // The snapshot's fsync joins the sealed segment's, off the partition's lock; the
        // recovery point passes `base_offset` only once both are done.
        let (sync, snapshot) = match self.take_producer_snapshot_unsynced() {
            Ok(Some(path)) => (sealed.and_file(path), Ok(())),
            Ok(None) => (sealed, Ok(())),
            Err(error) => (sealed, Err(error)),
        };
        self.rolls.start(sync, self.dir.clone(), base_offset.0);
        snapshot
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments.active_mut()
    }

    /// Whole batches from the one holding `offset`, stopping before `max_offset` (the high
    /// watermark for consumers) and after `max_bytes` — the first batch always whole when
    /// `min_one`. Zero-copy.
    pub fn read(
        &self,
        offset: Offset,
        max_offset: Offset,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<Bytes, LogError> {
        self.check_offset(offset)?;
        if offset >= max_offset {
            // Nothing readable (a reader caught up): no segment is searched.
            return Ok(Bytes::new());
        }
        let Some(segment) = self.segments.holding(offset.0) else {
            return Ok(Bytes::new());
        };
        Ok(segment.read(offset.0, max_offset.0, max_bytes, min_one))
    }

    /// Fails with `OffsetOutOfRange` unless `log_start_offset <= offset <= log_end_offset`.
    pub fn check_offset(&self, offset: Offset) -> Result<(), LogError> {
        let log_end_offset = self.log_end_offset();
        if offset < self.log_start_offset || offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset,
            });
        }
        Ok(())
    }

    /// Writes all dirty pages to disk (the rolled segments' syncs still pending first); the
    /// recovery point moves to the log end.
    pub fn flush(&mut self) -> Result<(), LogError> {
        let started = std::time::Instant::now();
        self.rolls.finish()?;
        self.active().flush()?;
        if let Some(timer) = &self.flush_timer {
            timer.observe(crate::metrics::millis_since(started));
        }
        self.recovery_point = self.log_end_offset();
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms();
        Ok(())
    }

    /// Records the time of every later flush in `timer`, in milliseconds.
    pub fn time_flushes(&mut self, timer: prometheus::Histogram) {
        self.flush_timer = Some(timer);
    }

    /// Flushes if data has stayed unflushed for longer than `flush.ms`; returns whether it
    /// did.
    pub fn maybe_flush_by_time(&mut self, now_ms: i64) -> Result<bool, LogError> {
        let due = self.unflushed_messages > 0
            && now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_ms;
        if due {
            self.flush()?;
        }
        Ok(due)
    }

    /// Mutable access to the epoch cache, for follower appends and truncation.
    pub(super) fn epoch_cache_mut(&mut self) -> &mut EpochCache {
        &mut self.epoch_cache
    }

    /// Follows a batch written as a follower (`bytes`: the whole batch) in the producer
    /// state.
    pub(super) fn follow_producers(
        &mut self,
        bytes: &[u8],
        header: &BatchHeader,
    ) -> Result<(), LogError> {
        self.record_producer_batch(header, super::control::parse(bytes, header))
    }

    /// Forgets idle producers (`producer.id.expiration.ms`); returns how many went.
    pub fn expire_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.expire(now_ms, expiration_ms)
    }

    /// Forgets aborted transactions the cleaner removed every batch of (their markers are
    /// about to go).
    pub(super) fn forget_aborted(&mut self, gone: &[super::producer_state::AbortedTransaction]) {
        self.producers.forget_aborted(gone);
    }

    /// Forgets completed transactions whose markers are below `high_watermark`.
    pub fn retire_stable_transactions(&mut self, high_watermark: Offset) {
        self.producers.retire_stable(high_watermark.0);
    }

    /// The last stable offset: the high watermark, or the first offset of the earliest
    /// transaction not yet decided below it (read_committed consumers stop there).
    pub fn last_stable_offset(&self, high_watermark: Offset) -> Offset {
        self.producers()
            .first_unstable_offset(high_watermark.0)
            .map_or(high_watermark, |first| {
                Offset(first).clamp(self.log_start_offset.min(high_watermark), high_watermark)
            })
    }

    /// Appends a transaction marker the coordinator asked for (WriteTxnMarkers) as
    /// leader: it is checked against the producer's epoch and the last coordinator epoch
    /// seen, and ends the producer's open transaction here.
    pub fn append_marker_as_leader(
        &mut self,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        marker: super::control::Marker,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, LogError> {
        self.rolls.check()?;
        self.producers()
            .check_marker(producer_id.0, producer_epoch.0, marker.coordinator_epoch)?;
        let batch = super::control::encode(producer_id.0, producer_epoch.0, marker, now_ms());
        let base_offset = self.log_end_offset();
        let active = self.active();
        if active.size() > 0 && !active.has_room_for(batch.len()) {
            self.roll()?;
        }
        self.epoch_cache.maybe_assign(leader_epoch, base_offset)?;
        let segment = self.segments.active_mut();
        let log_append_time = self.config.log_append_time.then(now_ms);
        let written = segment.append(&batch, base_offset.0, leader_epoch.0, log_append_time)?;
        self.record_producer_batch(&written, Some(marker))?;
        self.count_unflushed(1)?;
        self.check_invariants();
        Ok(AppendInfo {
            base_offset,
            last_offset: base_offset,
            duplicate: false,
            leader_epoch,
            log_append_time_ms: log_append_time.unwrap_or(-1),
        })
    }

    /// Counts records written since the last flush and flushes per `flush.messages`.
    pub(super) fn count_unflushed(&mut self, records: i64) -> Result<(), LogError> {
        self.unflushed_messages += records;
        if self.unflushed_messages >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(())
    }

    /// Moves the recovery point back to `offset` after a truncation below it.
    pub(super) fn lower_recovery_point(&mut self, offset: Offset) {
        self.recovery_point = self.recovery_point().min(offset);
        self.rolls.truncated();
    }

    /// Fails when an earlier roll's fsync failed (the directory then goes offline).
    pub(super) fn check_roll_syncs(&self) -> Result<(), LogError> {
        self.rolls.check()
    }

    /// Mutable access to the segments, for retention, truncation and the cleaner's swap.
    pub(super) fn segments_mut(&mut self) -> &mut Segments {
        &mut self.segments
    }

    /// Moves the log start offset forward (never back); returns whether it moved.
    pub(super) fn maybe_advance_log_start_offset(&mut self, offset: Offset) -> bool {
        let advanced = offset > self.log_start_offset;
        if advanced {
            self.log_start_offset = offset;
            self.producers.forget_aborted_before(offset.0);
        }
        advanced
    }

    /// The configuration the log was opened with (or last given).
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Applies a changed topic configuration: later appends, rolls, flushes and retention
    /// follow it; segments already made keep their preallocated size.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// Flushes and trims the active segment so that a clean restart trusts the files.
    pub fn close(&mut self) -> Result<(), LogError> {
        self.rolls.finish()?;
        self.active_mut().seal()?;
        self.recovery_point = self.log_end_offset();
        self.take_producer_snapshot()
    }

    /// Checks the log's invariants (debug builds).
    pub fn check_invariants(&self) {
        debug_assert!(
            self.log_start_offset <= self.log_end_offset(),
            "start <= end"
        );
        for (segment, next) in self.segments.iter().zip(self.segments.iter().skip(1)) {
            // Holds after cleaning too: a cleaned segment keeps its group's last batch.
            debug_assert_eq!(segment.next_offset(), next.base_offset(), "contiguous");
        }
        self.epoch_cache.check_invariants();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use crate::log::config::test_config;
    use std::io::{Seek, SeekFrom, Write};

    fn clean() -> OpenOptions {
        OpenOptions {
            clean: true,
            ..OpenOptions::default()
        }
    }

    fn config(segment_bytes: usize) -> LogConfig {
        test_config(segment_bytes, 64)
    }

    #[test]
    fn appends_roll_into_new_segments_and_reads_span_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), config(300), clean()).expect("open");
        for _ in 0..10 {
            log.append_as_leader(&encode_batch(2, -1, -1, 0), LeaderEpoch(0))
                .expect("append");
        }
        assert!(log.segments().len() > 1, "small segments must roll");
        assert_eq!(log.log_end_offset(), Offset(20));
        for offset in 0..20 {
            let bytes = log
                .read(Offset(offset), Offset(20), 1 << 20, true)
                .expect("read");
            let header = crate::log::batch::BatchHeader::parse(&bytes).expect("a batch");
            assert!(header.base_offset <= offset && offset <= header.last_offset());
        }
        log.close().expect("close");
        drop(log);
        let reopened = Log::open(dir.path(), config(300), clean()).expect("reopen");
        assert_eq!(reopened.log_end_offset(), Offset(20));
    }

    #[test]
    fn a_rolled_segment_is_synced_after_the_roll_and_a_flush_waits_for_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), config(300), clean()).expect("open");
        let start = log.recovery_point();
        while log.segments().len() < 2 {
            log.append_as_leader(&encode_batch(2, -1, -1, 0), LeaderEpoch(0))
                .expect("append");
        }
        let rolled_at = log.segments().active().base_offset();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while log.recovery_point() < Offset(rolled_at) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(start < Offset(rolled_at));
        assert_eq!(
            log.recovery_point(),
            Offset(rolled_at),
            "synced through the sealed segment"
        );
        while log.segments().len() < 3 {
            log.append_as_leader(&encode_batch(2, -1, -1, 0), LeaderEpoch(0))
                .expect("append");
        }
        log.flush().expect("flush");
        assert_eq!(log.recovery_point(), log.log_end_offset());
        log.close().expect("close");
        drop(log);
        let reopened = Log::open(dir.path(), config(300), clean()).expect("reopen");
        assert_eq!(reopened.segments().len(), 3);
    }

    #[test]
    fn a_torn_tail_is_cut_off_after_an_unclean_stop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), config(1 << 16), clean()).expect("open");
        log.append_as_leader(&encode_batch(3, -1, -1, 0), LeaderEpoch(0))
            .expect("append");
        let valid = log.segments().first().size();
        drop(log);
        let path = dir.path().join("00000000000000000000.log");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("file");
        file.seek(SeekFrom::Start(valid as u64)).expect("seek");
        let torn = encode_batch(5, -1, -1, 0);
        file.write_all(&torn[..torn.len() - 7]).expect("write");
        drop(file);
        let mut log =
            Log::open(dir.path(), config(1 << 16), OpenOptions::default()).expect("recover");
        assert_eq!(log.log_end_offset(), Offset(3));
        let info = log
            .append_as_leader(&encode_batch(1, -1, -1, 0), LeaderEpoch(0))
            .expect("append");
        assert_eq!(info.base_offset, Offset(3));
        drop(log);
        let log =
            Log::open(dir.path(), config(1 << 16), OpenOptions::default()).expect("recover again");
        assert_eq!(log.log_end_offset(), Offset(4));
    }

    #[test]
    fn reads_stop_before_max_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), config(1 << 16), clean()).expect("open");
        log.append_as_leader(&encode_batch(2, -1, -1, 0), LeaderEpoch(0))
            .expect("append");
        log.append_as_leader(&encode_batch(2, -1, -1, 0), LeaderEpoch(0))
            .expect("append");
        let bytes = log.read(Offset(0), Offset(2), 1 << 20, true).expect("read");
        let header = crate::log::batch::BatchHeader::parse(&bytes).expect("batch");
        assert_eq!(bytes.len(), header.size, "only the batch below max_offset");
        assert!(
            log.read(Offset(5), Offset(4), 100, true).is_err(),
            "beyond the log end"
        );
    }
}

#[cfg(test)]
mod recovery_tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use crate::log::config::test_config;

    #[test]
    fn a_crash_after_a_time_roll_keeps_the_new_segment() {
        let config = LogConfig {
            segment_ms: 1000,
            ..test_config(1 << 16, 64)
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let clean = OpenOptions {
            clean: true,
            ..OpenOptions::default()
        };
        let mut log = Log::open(dir.path(), config, clean).expect("open");
        log.append_as_leader(&encode_batch(3, -1, -1, 0), LeaderEpoch(0))
            .expect("append");
        log.close().expect("close");
        let point = log.recovery_point();
        drop(log);
        let mut log = Log::open(dir.path(), config, clean).expect("reopen");
        log.append_as_leader(&encode_batch(2, -1, -1, 5000), LeaderEpoch(0))
            .expect("append");
        assert_eq!(
            log.segments().len(),
            2,
            "a batch 5 s after the first rolls at segment.ms 1 s"
        );
        drop(log);
        let crashed = OpenOptions {
            clean: false,
            recovery_point: Some(point),
            log_start_offset: None,
        };
        let log = Log::open(dir.path(), config, crashed).expect("recover");
        assert_eq!(log.log_end_offset(), Offset(5));
    }
}

#[cfg(test)]
mod damage_tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use crate::log::config::test_config;

    #[test]
    fn a_damaged_index_is_rebuilt_not_trusted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clean = OpenOptions {
            clean: true,
            ..OpenOptions::default()
        };
        let mut log = Log::open(dir.path(), test_config(1 << 16, 1), clean).expect("open");
        for _ in 0..10 {
            log.append_as_leader(&encode_batch(2, -1, -1, 0), LeaderEpoch(0))
                .expect("append");
        }
        log.close().expect("close");
        drop(log);
        let index = dir.path().join("00000000000000000000.index");
        let mut bytes = std::fs::read(&index).expect("index");
        assert!(bytes.len() >= 16, "the test needs index entries");
        bytes[7] ^= 0x55;
        std::fs::write(&index, &bytes).expect("damage");
        let log = Log::open(dir.path(), test_config(1 << 16, 1), clean).expect("reopen");
        for offset in 0..20 {
            let read = log
                .read(Offset(offset), Offset(20), 1 << 20, true)
                .expect("read");
            let header = crate::log::batch::BatchHeader::parse(&read).expect("a batch");
            assert!(header.base_offset <= offset && offset <= header.last_offset());
        }
    }
}

#[cfg(test)]
mod damage_properties {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use crate::log::config::test_config;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Goal: after a crash that cut the active segment anywhere or flipped any bit in
        /// it, recovery keeps exactly the whole valid batches before the damage, and the
        /// log accepts appends again. Method: model the batch boundaries.
        #[test]
        fn recovery_keeps_the_valid_prefix(
            counts in proptest::collection::vec(1i32..6, 1..12),
            damage_at in 0.0f64..1.0,
            flip in any::<bool>(),
            bit in 0u8..8,
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = Log::open(dir.path(), test_config(1 << 16, 64), OpenOptions::default())
                .expect("open");
            let mut ends = Vec::new();
            for count in &counts {
                log.append_as_leader(&encode_batch(*count, -1, -1, 0), LeaderEpoch(0)).expect("append");
                ends.push((log.segments().first().size(), log.log_end_offset()));
            }
            let size = log.segments().first().size();
            drop(log);
            let path = dir.path().join("00000000000000000000.log");
            let mut bytes = std::fs::read(&path).expect("read");
            let at = ((size as f64) * damage_at) as usize;
            if flip {
                bytes[at] ^= 1 << bit;
            } else {
                bytes.truncate(at);
            }
            std::fs::write(&path, &bytes).expect("damage");
            let mut log = Log::open(dir.path(), test_config(1 << 16, 64), OpenOptions::default())
                .expect("recover");
            // A flip inside the 12-byte offset/length prefix or the CRC'd body of the batch
            // holding `at` invalidates it; earlier batches end at or before `at`.
            let expected = ends.iter().take_while(|(end, _)| *end <= at).last().map_or(Offset(0), |e| e.1);
            let leo = log.log_end_offset();
            let start_of_damaged = ends.iter().map(|e| e.0).filter(|end| *end <= at).max().unwrap_or(0);
            let in_leader_epoch = (12..16).contains(&(at - start_of_damaged));
            if flip && in_leader_epoch {
                // The partition leader epoch is not covered by the CRC: nothing is lost.
                prop_assert_eq!(leo, ends.last().map_or(Offset(0), |e| e.1));
            } else {
                prop_assert_eq!(leo, expected);
            }
            let info = log.append_as_leader(&encode_batch(1, -1, -1, 0), LeaderEpoch(0)).expect("append");
            prop_assert_eq!(info.base_offset, leo);
        }
    }
}
