//! Lookups by time for ListOffsets: the first record whose timestamp is at or after a
//! target, and the record with the greatest timestamp. Batches are found by their header's
//! max timestamp; only the one batch that answers is decoded to find the exact record, as
//! Apache Kafka's LogSegment.findOffsetByTimestamp does.
//!
//! A linear walk of batch headers; the `.timeindex` of a later issue (#3) replaces it.

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::batch::BatchHeader;
use super::partition_log::Log;
use crate::ids::Offset;

/// A record found by time: its timestamp and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: Offset,
}

/// Decodes the records of one stored batch: (offset, timestamp) pairs. A batch that fails
/// to decode yields the batch's own base offset and max timestamp, never an error.
fn record_times(bytes: Bytes, header: &BatchHeader) -> Vec<(i64, i64)> {
    let mut buf = bytes;
    match RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set
            .records
            .iter()
            .map(|r| (r.offset, r.timestamp))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, base_offset = header.base_offset, "undecodable stored batch");
            vec![(header.base_offset, header.max_timestamp)]
        }
    }
}

impl Log {
    /// The first record with timestamp >= `target` at or after the log start, if any: the
    /// first segment whose max timestamp reaches the target, then its time index, then a
    /// short scan of batch headers, then one batch decoded.
    pub fn offset_for_timestamp(&self, target: i64) -> Option<TimestampAndOffset> {
        let start = self.log_start_offset().0;
        for segment in self
            .segments()
            .iter()
            .filter(|s| s.max_timestamp() >= target)
        {
            for (position, header) in segment.batches_from_timestamp(target) {
                if header.last_offset() < start || header.max_timestamp < target {
                    continue;
                }
                let bytes = segment.batch_bytes(position, &header);
                let found = record_times(bytes, &header)
                    .into_iter()
                    .find(|(offset, timestamp)| *offset >= start && *timestamp >= target);
                if let Some((offset, timestamp)) = found {
                    let offset = Offset(offset);
                    return Some(TimestampAndOffset { timestamp, offset });
                }
            }
        }
        None
    }

    /// The record with the greatest timestamp (the first such if several), if any.
    pub fn offset_of_max_timestamp(&self) -> Option<TimestampAndOffset> {
        let mut best: Option<&super::segment::Segment> = None;
        for segment in self.segments() {
            if best.is_none_or(|b| segment.max_timestamp() > b.max_timestamp()) {
                best = Some(segment);
            }
        }
        let segment = best.filter(|s| s.max_timestamp() >= 0)?;
        let wanted = segment.offset_of_max_timestamp();
        let (position, header) = segment.batches_from(wanted).find(|(_, h)| {
            h.last_offset() >= wanted && h.max_timestamp == segment.max_timestamp()
        })?;
        let times = record_times(segment.batch_bytes(position, &header), &header);
        let (offset, timestamp) = times
            .into_iter()
            .find(|(_, timestamp)| *timestamp == header.max_timestamp)?;
        let offset = Offset(offset);
        Some(TimestampAndOffset { timestamp, offset })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::LeaderEpoch;
    use crate::log::batch::tests::encode_batch;
    use crate::log::config::{test_config, OpenOptions};

    fn log_with(timestamps: &[i64], dir: &std::path::Path) -> Log {
        let config = test_config(400, 1);
        let mut log = Log::open(dir, config, OpenOptions::default()).expect("open");
        for timestamp in timestamps {
            log.append_as_leader(&encode_batch(2, -1, -1, *timestamp), LeaderEpoch(0))
                .expect("append");
        }
        log
    }

    #[test]
    fn finds_the_first_record_at_or_after_a_time_across_segments() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Batches of two records: timestamps (t, t+1).
        let log = log_with(&[100, 200, 300, 400, 500, 600], dir.path());
        assert!(log.segments().len() > 1);
        let at = |t| log.offset_for_timestamp(t).map(|f| (f.offset, f.timestamp));
        assert_eq!(at(0), Some((Offset(0), 100)));
        assert_eq!(at(101), Some((Offset(1), 101)));
        assert_eq!(at(102), Some((Offset(2), 200)));
        assert_eq!(at(450), Some((Offset(8), 500)));
        assert_eq!(at(601), Some((Offset(11), 601)));
        assert_eq!(at(602), None);
    }

    #[test]
    fn finds_the_record_with_the_greatest_timestamp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = log_with(&[100, 900, 300, 900], dir.path());
        let found = log.offset_of_max_timestamp().expect("found");
        assert_eq!((found.offset, found.timestamp), (Offset(3), 901));
    }
}
