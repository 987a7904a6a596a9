//! Writing a record batch v2 that keeps some of an original batch's records, as the log
//! cleaner does (MemoryRecords.filterTo in Apache Kafka, in our own words):
//!
//! - base offset, last offset delta, partition leader epoch, producer id, epoch and base
//!   sequence stay the original batch's, so offsets never change and the producer's last
//!   sequence survives even when records are removed (KIP-98);
//! - the compression codec, timestamp type, transactional and control bits are kept;
//! - with a delete horizon (KIP-534) the base timestamp holds the time after which the
//!   batch's tombstones may be dropped, attribute bit 6 is set, and each record's timestamp
//!   delta is recomputed so its timestamp does not change;
//! - an "empty" batch keeps only the header (record count 0), to keep a producer's state
//!   or a segment's last offset.

use super::batch::{BatchHeader, HEADER_BYTES, LOG_OVERHEAD, MAGIC_V2};
use super::error::LogError;
use super::records::{self, RecordView};

/// Attribute bit 6: the base timestamp is the delete horizon.
pub const ATTR_DELETE_HORIZON: i16 = 1 << 6;
/// Attribute bit 3: LogAppendTime.
const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;

/// The delete horizon of a batch, if its base timestamp holds one.
pub fn delete_horizon(header: &BatchHeader) -> Option<i64> {
    (header.attributes & ATTR_DELETE_HORIZON != 0).then_some(header.base_timestamp)
}

/// The fields that differ between an original batch and its rewrite.
struct NewHeader {
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    record_count: i32,
}

fn write_header(out: &mut Vec<u8>, original: &BatchHeader, new: &NewHeader, payload: &[u8]) {
    let length = (HEADER_BYTES - LOG_OVERHEAD + payload.len()) as i32;
    out.extend_from_slice(&original.base_offset.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&original.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&new.attributes.to_be_bytes());
    out.extend_from_slice(&original.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&new.base_timestamp.to_be_bytes());
    out.extend_from_slice(&new.max_timestamp.to_be_bytes());
    out.extend_from_slice(&original.producer_id.to_be_bytes());
    out.extend_from_slice(&original.producer_epoch.to_be_bytes());
    out.extend_from_slice(&original.base_sequence.to_be_bytes());
    out.extend_from_slice(&new.record_count.to_be_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A header-only batch standing for `original` (DefaultRecordBatch.writeEmptyHeader): same
/// offsets, producer fields and max timestamp, no records, no compression.
pub fn empty_batch(original: &BatchHeader) -> Vec<u8> {
    let keep = original.attributes & !(records::COMPRESSION_MASK | ATTR_DELETE_HORIZON);
    let new = NewHeader {
        attributes: keep,
        base_timestamp: original.max_timestamp,
        max_timestamp: original.max_timestamp,
        record_count: 0,
    };
    let mut out = Vec::with_capacity(HEADER_BYTES);
    write_header(&mut out, original, &new, &[]);
    out
}

/// A batch holding `retained` (a non-empty subset of `original`'s records, in order), with
/// `delete_horizon` as its base timestamp when given.
pub fn retained_batch(
    original: &BatchHeader,
    retained: &[RecordView<'_>],
    delete_horizon: Option<i64>,
) -> Result<Vec<u8>, LogError> {
    let timestamps: Vec<i64> = retained
        .iter()
        .map(|r| original.base_timestamp.wrapping_add(r.timestamp_delta))
        .collect();
    let base_timestamp = delete_horizon.unwrap_or(timestamps[0]);
    let mut raw = Vec::new();
    for (record, timestamp) in retained.iter().zip(&timestamps) {
        record.write_with_timestamp_delta(&mut raw, timestamp.wrapping_sub(base_timestamp));
    }
    let codec = records::codec(original);
    let payload = records::compress(codec, original, &raw)?;
    let max_timestamp = if original.attributes & ATTR_LOG_APPEND_TIME != 0 {
        original.max_timestamp
    } else {
        timestamps
            .iter()
            .copied()
            .max()
            .unwrap_or(original.max_timestamp)
    };
    let mut attributes = original.attributes & !ATTR_DELETE_HORIZON;
    if delete_horizon.is_some() {
        attributes |= ATTR_DELETE_HORIZON;
    }
    let new = NewHeader {
        attributes,
        base_timestamp,
        max_timestamp,
        record_count: retained.len() as i32,
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    write_header(&mut out, original, &new, &payload);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{self, tests::encode_batch};
    use kafka_protocol::records::RecordBatchDecoder;

    fn decode(bytes: &[u8]) -> kafka_protocol::records::RecordSet {
        RecordBatchDecoder::decode(&mut bytes::Bytes::copy_from_slice(bytes)).expect("decodes")
    }

    #[test]
    fn a_rewritten_batch_keeps_offsets_timestamps_and_producer_fields() {
        let mut bytes = encode_batch(4, 7, 10, 5000);
        batch::patch(&mut bytes, 100, 3);
        let header = BatchHeader::parse(&bytes).expect("header");
        let payload = records::decompressed_payload(&bytes, &header).expect("payload");
        let all = records::parse_records(&payload, &header).expect("records");
        let kept = [all[1], all[3]];
        for horizon in [None, Some(999_999)] {
            let out = retained_batch(&header, &kept, horizon).expect("rewrite");
            let new = batch::BatchHeader::parse(&out).expect("new header");
            batch::check_crc(&out, &new).expect("crc");
            assert_eq!(new.base_offset, 100);
            assert_eq!(new.last_offset(), 103);
            assert_eq!(new.base_sequence, 10);
            assert_eq!(new.partition_leader_epoch, 3);
            assert_eq!(delete_horizon(&new), horizon);
            let set = decode(&out);
            let got: Vec<(i64, i64)> = set
                .records
                .iter()
                .map(|r| (r.offset, r.timestamp))
                .collect();
            assert_eq!(got, vec![(101, 5001), (103, 5003)]);
        }
    }

    #[test]
    fn an_empty_batch_keeps_the_last_offset_and_sequence() {
        let mut bytes = encode_batch(3, 7, 4, 5000);
        batch::patch(&mut bytes, 50, 1);
        let header = BatchHeader::parse(&bytes).expect("header");
        let out = empty_batch(&header);
        let new = BatchHeader::parse(&out).expect("header");
        batch::check_crc(&out, &new).expect("crc");
        assert_eq!(new.record_count, 0);
        assert_eq!(new.last_offset(), 52);
        assert_eq!(new.last_sequence(), header.last_sequence());
        assert!(decode(&out).records.is_empty());
    }
}
