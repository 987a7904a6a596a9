//! Deleting whole segments from the front of a log: by time (`retention.ms`), by size
//! (`retention.bytes`) — both only when `cleanup.policy` holds `delete` — and below a log start offset moved by DeleteRecords (UnifiedLog's
//! deleteOldSegments in Apache Kafka). Only segments wholly below the high watermark go;
//! the active segment is rolled first when it must go too.
//!
//! Readers holding bytes of a deleted segment keep its mapping alive; its files are
//! unlinked at once.

use super::error::LogError;
use super::partition_log::Log;
use super::segment::Segment;
use crate::ids::Offset;

impl Log {
    /// Deletes the segments that retention allows; returns how many were deleted.
    pub fn delete_old_segments(
        &mut self,
        now_ms: i64,
        high_watermark: Offset,
    ) -> Result<usize, LogError> {
        let config = *self.config();
        let total: usize = self.segments().iter().map(Segment::size).sum();
        let mut excess = match config.retention_bytes {
            bytes if bytes >= 0 => total as i64 - bytes,
            _ => i64::MIN,
        };
        let (log_start_offset, high_watermark) = (self.log_start_offset().0, high_watermark.0);
        let count = self
            .segments()
            .iter()
            .take_while(|segment| {
                if segment.size() == 0 || segment.next_offset() > high_watermark {
                    return false;
                }
                let below_start = segment.next_offset() <= log_start_offset;
                // A compact-only topic keeps its segments: only the log start moves them.
                let expired = config.cleanup_delete
                    && config.retention_ms >= 0
                    && now_ms.saturating_sub(segment.largest_timestamp()) > config.retention_ms;
                let oversized =
                    config.cleanup_delete && excess.saturating_sub(segment.size() as i64) >= 0;
                if oversized {
                    excess -= segment.size() as i64;
                }
                below_start || expired || oversized
            })
            .count();
        self.delete_first_segments(count)?;
        Ok(count)
    }

    /// Moves the log start offset to `offset` (DeleteRecords) and deletes the segments
    /// wholly below it. The caller checks `offset` against the high watermark.
    pub fn delete_records(
        &mut self,
        offset: Offset,
        high_watermark: Offset,
    ) -> Result<Offset, LogError> {
        if self.maybe_advance_log_start_offset(offset) {
            let start = self.log_start_offset();
            let count = self
                .segments()
                .iter()
                .take_while(|s| s.size() > 0 && s.next_offset() <= start.min(high_watermark).0)
                .count();
            self.delete_first_segments(count)?;
        }
        Ok(self.log_start_offset())
    }

    fn delete_first_segments(&mut self, count: usize) -> Result<(), LogError> {
        if count == 0 {
            return Ok(());
        }
        if count == self.segments().len() {
            self.roll()?;
        }
        let dir = self.dir().to_path_buf();
        let removed = self.segments_mut().remove_oldest(count);
        let first_base = self.segments().first().base_offset();
        self.maybe_advance_log_start_offset(Offset(first_base));
        for segment in removed {
            for path in segment.paths(&dir) {
                super::checkpoint::remove_if_exists(&path)?;
            }
            tracing::info!(dir = %dir.display(), base_offset = segment.base_offset(),
                log_start_offset = %self.log_start_offset(), "deleted segment");
        }
        self.delete_snapshots_before_first_segment()?;
        super::checkpoint::sync_dir(&dir)?;
        self.check_invariants();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::ids::{LeaderEpoch, Offset};
    use crate::log::batch::tests::encode_batch;
    use crate::log::config::{test_config, LogConfig, OpenOptions};
    use crate::log::Log;

    fn log(config: LogConfig, dir: &std::path::Path, batches: &[i64]) -> Log {
        let mut log = Log::open(dir, config, OpenOptions::default()).expect("open");
        for timestamp in batches {
            log.append_as_leader(&encode_batch(2, -1, -1, *timestamp), LeaderEpoch(0))
                .expect("append");
        }
        log
    }

    #[test]
    fn time_retention_deletes_old_segments_and_moves_the_log_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            retention_ms: 1000,
            ..test_config(200, 64)
        };
        let mut log = log(config, dir.path(), &[100, 200, 5000, 6000]);
        let before = log.segments().len();
        let deleted = log
            .delete_old_segments(5500, log.log_end_offset())
            .expect("retention");
        assert!(deleted >= 1 && deleted < before);
        assert!(log.segments().first().largest_timestamp() >= 4500);
        assert_eq!(
            log.log_start_offset(),
            Offset(log.segments().first().base_offset())
        );
        assert!(
            log.read(Offset(0), Offset(100), 1 << 20, true).is_err(),
            "below the log start"
        );
    }

    #[test]
    fn size_retention_keeps_at_most_retention_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            retention_bytes: 300,
            ..test_config(200, 64)
        };
        let mut log = log(config, dir.path(), &[1, 2, 3, 4, 5, 6]);
        log.delete_old_segments(10, log.log_end_offset())
            .expect("retention");
        let total: usize = log.segments().iter().map(|s| s.size()).sum();
        assert!(
            total <= 300 + 200,
            "within one segment of the limit: {total}"
        );
        assert!(log.log_start_offset() > Offset(0));
    }

    #[test]
    fn a_compact_only_log_ignores_time_and_size_retention() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            retention_ms: 1000,
            retention_bytes: 100,
            cleanup_delete: false,
            ..test_config(200, 64)
        };
        let mut log = log(config, dir.path(), &[100, 200, 5000, 6000]);
        let deleted = log
            .delete_old_segments(1_000_000, log.log_end_offset())
            .expect("retention");
        assert_eq!(deleted, 0, "cleanup.policy=compact keeps old segments");
        assert_eq!(log.log_start_offset(), Offset(0));
    }

    #[test]
    fn delete_records_moves_the_start_inside_a_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = log(test_config(1 << 16, 64), dir.path(), &[1, 2, 3]);
        assert_eq!(
            log.delete_records(Offset(3), Offset(6)).expect("delete"),
            Offset(3)
        );
        assert!(log.read(Offset(2), Offset(6), 1 << 20, true).is_err());
        assert!(log.read(Offset(3), Offset(6), 1 << 20, true).is_ok());
        assert_eq!(
            log.delete_records(Offset(1), Offset(6))
                .expect("never backwards"),
            Offset(3)
        );
    }
}
