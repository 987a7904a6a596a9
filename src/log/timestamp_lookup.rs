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

/// A record found by time: its timestamp and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: i64,
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
    /// The first record with timestamp >= `target` at or after the log start, if any.
    pub fn offset_for_timestamp(&self, target: i64) -> Option<TimestampAndOffset> {
        let start = self.log_start_offset();
        for segment in self.segments() {
            for (position, header) in segment.batches_from(segment.base_offset()) {
                if header.last_offset() < start || header.max_timestamp < target {
                    continue;
                }
                let bytes = segment.batch_bytes(position, &header);
                let found = record_times(bytes, &header)
                    .into_iter()
                    .find(|(offset, timestamp)| *offset >= start && *timestamp >= target);
                if let Some((offset, timestamp)) = found {
                    return Some(TimestampAndOffset { timestamp, offset });
                }
            }
        }
        None
    }

    /// The record with the greatest timestamp (the first such if several), if any.
    pub fn offset_of_max_timestamp(&self) -> Option<TimestampAndOffset> {
        let mut best: Option<(usize, usize, BatchHeader)> = None;
        for (n, segment) in self.segments().iter().enumerate() {
            for (position, header) in segment.batches_from(segment.base_offset()) {
                if best.is_none_or(|(_, _, b)| header.max_timestamp > b.max_timestamp) {
                    best = Some((n, position, header));
                }
            }
        }
        let (n, position, header) = best?;
        let bytes = self.segments()[n].batch_bytes(position, &header);
        let times = record_times(bytes, &header);
        let (offset, timestamp) = times
            .into_iter()
            .find(|(_, timestamp)| *timestamp == header.max_timestamp)?;
        Some(TimestampAndOffset { timestamp, offset })
    }
}
