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
use super::epoch_cache::EpochCache;
use super::error::LogError;
use super::producer_state::{ProducerStateTable, SequenceCheck};
use super::segment::{Segment, SegmentConfig};

/// The configuration a log needs (resolved from broker defaults and topic overrides).
#[derive(Debug, Clone, Copy)]
pub struct LogConfig {
    pub segment: SegmentConfig,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a CreateTime timestamp may be.
    pub timestamp_after_max_ms: i64,
}

/// Where an appended (or de-duplicated) batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// True when the batch was a retry of one already in the log and nothing was written.
    pub duplicate: bool,
}

/// One partition's log.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    /// Invariant: non-empty, sorted by base offset, each ending where the next begins.
    segments: Vec<Segment>,
    log_start_offset: i64,
    epoch_cache: EpochCache,
    producers: ProducerStateTable,
}

fn segment_base_offsets(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let path = entry.map_err(|e| LogError::io(dir, e))?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        match stem.parse::<i64>() {
            Ok(base) if stem.len() == 20 => bases.push(base),
            _ => {
                return Err(LogError::CorruptFile {
                    path,
                    reason: "segment file name is not a 20-digit offset".into(),
                })
            }
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

impl Log {
    /// Opens the log in `dir`, creating it if needed. After an unclean shutdown
    /// (`clean == false`) the active segment is re-scanned and its torn tail cut off.
    pub fn open(dir: &Path, config: LogConfig, clean: bool) -> Result<Log, LogError> {
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        let bases = segment_base_offsets(dir)?;
        let mut segments = Vec::with_capacity(bases.len().max(1));
        for (n, base) in bases.iter().enumerate() {
            let active = n + 1 == bases.len();
            let mut segment_config = config.segment;
            if !active {
                segment_config.segment_bytes = 0;
            }
            segments.push(Segment::open(dir, *base, segment_config, active && !clean)?);
        }
        if segments.is_empty() {
            segments.push(Segment::create(dir, 0, config.segment)?);
        }
        let log_start_offset = segments[0].base_offset();
        let mut epoch_cache = EpochCache::load(dir)?;
        let log_end_offset = segments.last().map_or(0, Segment::next_offset);
        epoch_cache.truncate_from_end(log_end_offset)?;
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            epoch_cache,
            producers: ProducerStateTable::default(),
        };
        log.rebuild_producer_state();
        log.check_invariants();
        Ok(log)
    }

    fn rebuild_producer_state(&mut self) {
        let mut producers = ProducerStateTable::default();
        for segment in &self.segments {
            for (_, header) in segment.batches_from(segment.base_offset()) {
                producers.update(&header);
            }
        }
        self.producers = producers;
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The offset the next appended record gets (LEO).
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    /// The leader epoch cache.
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epoch_cache
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    fn active(&self) -> &Segment {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    /// Validates one batch sent by a producer (exactly one per partition, as Produce v3+
    /// requires), de-duplicates retries, then appends it stamped with `leader_epoch`.
    pub fn append_as_leader(
        &mut self,
        records: &[u8],
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        let header = self.validate_client_batch(records)?;
        if let SequenceCheck::Duplicate(original) = self.producers.check(&header)? {
            return Ok(AppendInfo {
                base_offset: original.first_offset,
                last_offset: original.last_offset,
                duplicate: true,
            });
        }
        if !self.active().has_room_for(records.len()) {
            self.roll()?;
        }
        let base_offset = self.log_end_offset();
        self.epoch_cache.maybe_assign(leader_epoch, base_offset)?;
        let segment = self
            .segments
            .last_mut()
            .expect("a log always has an active segment");
        let written = segment.append(records, base_offset, leader_epoch);
        self.producers.update(&written);
        self.check_invariants();
        Ok(AppendInfo {
            base_offset,
            last_offset: written.last_offset(),
            duplicate: false,
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
        self.check_timestamps(&header)?;
        if header.is_transactional() || header.is_control() {
            return Err(LogError::TransactionsUnsupported {
                producer_id: header.producer_id,
            });
        }
        Ok(header)
    }

    /// Checks CreateTime timestamps against the accepted window (KIP-937, Kafka 3.6+). The
    /// batch's max timestamp bounds every record from above; its base timestamp (the first
    /// record's) stands for the earliest, as only the header is read.
    fn check_timestamps(&self, header: &BatchHeader) -> Result<(), LogError> {
        const LOG_APPEND_TIME: i16 = 1 << 3;
        if header.attributes & LOG_APPEND_TIME != 0 {
            return Ok(());
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let min = now.saturating_sub(self.config.timestamp_before_max_ms);
        let max = now.saturating_add(self.config.timestamp_after_max_ms);
        for timestamp in [header.base_timestamp, header.max_timestamp] {
            if timestamp < min || timestamp > max {
                return Err(LogError::InvalidTimestamp {
                    timestamp,
                    min,
                    max,
                });
            }
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one at the log end offset.
    pub fn roll(&mut self) -> Result<(), LogError> {
        let base_offset = self.log_end_offset();
        self.active().seal()?;
        let segment = Segment::create(&self.dir, base_offset, self.config.segment)?;
        super::checkpoint::sync_dir(&self.dir)?;
        tracing::debug!(dir = %self.dir.display(), base_offset, "rolled a new segment");
        self.segments.push(segment);
        Ok(())
    }

    /// Whole batches from the one holding `offset`, stopping before `max_offset` (the high
    /// watermark for consumers) and after `max_bytes` — the first batch always whole when
    /// `min_one`. Zero-copy.
    pub fn read(
        &self,
        offset: i64,
        max_offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<Bytes, LogError> {
        self.check_offset(offset)?;
        let n = self.segments.partition_point(|s| s.base_offset() <= offset);
        let Some(segment) = n.checked_sub(1).map(|n| &self.segments[n]) else {
            return Ok(Bytes::new());
        };
        Ok(segment.read(offset, max_offset, max_bytes, min_one))
    }

    /// Fails with `OffsetOutOfRange` unless `log_start_offset <= offset <= log_end_offset`.
    pub fn check_offset(&self, offset: i64) -> Result<(), LogError> {
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

    /// Writes all dirty pages to disk.
    pub fn flush(&self) -> Result<(), LogError> {
        self.active().flush()
    }

    /// Flushes and trims the active segment so that a clean restart trusts the files.
    pub fn close(&self) -> Result<(), LogError> {
        self.active().seal()
    }

    /// Checks the log's invariants (debug builds).
    pub fn check_invariants(&self) {
        debug_assert!(!self.segments.is_empty(), "a log has an active segment");
        debug_assert!(
            self.log_start_offset <= self.log_end_offset(),
            "start <= end"
        );
        for pair in self.segments.windows(2) {
            debug_assert_eq!(pair[0].next_offset(), pair[1].base_offset(), "contiguous");
        }
        self.epoch_cache.check_invariants();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;
    use std::io::{Seek, SeekFrom, Write};

    fn config(segment_bytes: usize) -> LogConfig {
        LogConfig {
            segment: SegmentConfig {
                segment_bytes,
                segment_index_bytes: 4096,
                index_interval_bytes: 64,
            },
            max_message_bytes: 1 << 20,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
        }
    }

    #[test]
    fn appends_roll_into_new_segments_and_reads_span_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), config(300), true).expect("open");
        for _ in 0..10 {
            log.append_as_leader(&encode_batch(2, -1, -1, 0), 0)
                .expect("append");
        }
        assert!(log.segments().len() > 1, "small segments must roll");
        assert_eq!(log.log_end_offset(), 20);
        for offset in 0..20 {
            let bytes = log.read(offset, 20, 1 << 20, true).expect("read");
            let header = crate::log::batch::BatchHeader::parse(&bytes).expect("a batch");
            assert!(header.base_offset <= offset && offset <= header.last_offset());
        }
        log.close().expect("close");
        drop(log);
        let reopened = Log::open(dir.path(), config(300), true).expect("reopen");
        assert_eq!(reopened.log_end_offset(), 20);
    }

    #[test]
    fn a_torn_tail_is_cut_off_after_an_unclean_stop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), config(1 << 16), true).expect("open");
        log.append_as_leader(&encode_batch(3, -1, -1, 0), 0)
            .expect("append");
        let valid = log.segments()[0].size();
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
        let mut log = Log::open(dir.path(), config(1 << 16), false).expect("recover");
        assert_eq!(log.log_end_offset(), 3);
        let info = log
            .append_as_leader(&encode_batch(1, -1, -1, 0), 0)
            .expect("append");
        assert_eq!(info.base_offset, 3);
        drop(log);
        let log = Log::open(dir.path(), config(1 << 16), false).expect("recover again");
        assert_eq!(log.log_end_offset(), 4);
    }

    #[test]
    fn reads_stop_before_max_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), config(1 << 16), true).expect("open");
        log.append_as_leader(&encode_batch(2, -1, -1, 0), 0)
            .expect("append");
        log.append_as_leader(&encode_batch(2, -1, -1, 0), 0)
            .expect("append");
        let bytes = log.read(0, 2, 1 << 20, true).expect("read");
        let header = crate::log::batch::BatchHeader::parse(&bytes).expect("batch");
        assert_eq!(bytes.len(), header.size, "only the batch below max_offset");
        assert!(log.read(5, 4, 100, true).is_err(), "beyond the log end");
    }
}
