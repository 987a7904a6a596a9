//! Record batch v2 headers: reading the fixed 61-byte header, checking a batch's length
//! and CRC, and patching the fields a broker owns (base offset, partition leader epoch).
//!
//! Layout (DefaultRecordBatch in Apache Kafka): baseOffset i64 @0, batchLength i32 @8,
//! partitionLeaderEpoch i32 @12, magic i8 @16, crc u32 @17 (CRC32C over bytes 21..end),
//! attributes i16 @21, lastOffsetDelta i32 @23, baseTimestamp i64 @27, maxTimestamp i64 @35,
//! producerId i64 @43, producerEpoch i16 @51, baseSequence i32 @53, recordCount i32 @57.
//! Rewriting the base offset or the leader epoch does not change the CRC.
//!
//! Must not: decode records (that is the client's business and costs CPU).

use super::error::LogError;

/// Size of the fixed record batch v2 header.
pub const HEADER_BYTES: usize = 61;
/// Bytes before the batch length field counts from (base offset + length).
pub const LOG_OVERHEAD: usize = 12;
/// Byte position of the partition leader epoch in a batch.
pub const PARTITION_LEADER_EPOCH_AT: usize = 12;
/// The only record batch format highwater stores.
pub const MAGIC_V2: i8 = 2;
const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
const ATTR_TRANSACTIONAL: i16 = 1 << 4;
const ATTR_CONTROL: i16 = 1 << 5;

/// The fields of a batch header that the broker reads. Plain data, copied out of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Size of the whole batch, including the 12 bytes of offset and length.
    pub size: usize,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

impl BatchHeader {
    /// Reads the header at the start of `bytes`. Returns `None` when fewer than
    /// [`HEADER_BYTES`] are available or the length field is not plausible.
    pub fn parse(bytes: &[u8]) -> Option<BatchHeader> {
        if bytes.len() < HEADER_BYTES {
            return None;
        }
        let length = be_i32(bytes, 8);
        if length < (HEADER_BYTES - LOG_OVERHEAD) as i32 {
            return None;
        }
        Some(BatchHeader {
            base_offset: be_i64(bytes, 0),
            size: LOG_OVERHEAD + length as usize,
            partition_leader_epoch: be_i32(bytes, 12),
            magic: bytes[16] as i8,
            crc: u32::from_be_bytes([bytes[17], bytes[18], bytes[19], bytes[20]]),
            attributes: be_i16(bytes, 21),
            last_offset_delta: be_i32(bytes, 23),
            base_timestamp: be_i64(bytes, 27),
            max_timestamp: be_i64(bytes, 35),
            producer_id: be_i64(bytes, 43),
            producer_epoch: be_i16(bytes, 51),
            base_sequence: be_i32(bytes, 53),
            record_count: be_i32(bytes, 57),
        })
    }

    /// The offset of the batch's last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// The sequence number of the batch's last record (sequences wrap at i32::MAX).
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return self.base_sequence;
        }
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        (last % (i64::from(i32::MAX) + 1)) as i32
    }

    /// Whether the batch is part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// Whether the batch holds control records (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// Whether the producer of this batch asked for idempotence.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
}

/// Checks one complete batch as a leader receives it: length, magic, counts and CRC.
pub fn validate(bytes: &[u8]) -> Result<BatchHeader, LogError> {
    let header = BatchHeader::parse(bytes).ok_or(LogError::InvalidBatch {
        reason: "truncated header",
    })?;
    if header.size != bytes.len() {
        return Err(LogError::InvalidBatch {
            reason: "batch length does not match its bytes",
        });
    }
    if header.magic != MAGIC_V2 {
        return Err(LogError::InvalidBatch {
            reason: "only record batch v2 (magic 2) is accepted",
        });
    }
    if header.record_count <= 0 || header.last_offset_delta != header.record_count - 1 {
        return Err(LogError::InvalidBatch {
            reason: "record count does not match last offset delta",
        });
    }
    check_crc(bytes, &header)?;
    Ok(header)
}

/// Verifies the CRC32C of a batch whose header was already parsed.
pub fn check_crc(bytes: &[u8], header: &BatchHeader) -> Result<(), LogError> {
    let computed = crc32c::crc32c(&bytes[21..header.size]);
    if computed != header.crc {
        return Err(LogError::CorruptBatch {
            offset: header.base_offset,
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Sets the base offset and partition leader epoch of a batch in place. The CRC does not
/// cover these fields, so it stays valid.
pub fn patch(bytes: &mut [u8], base_offset: i64, partition_leader_epoch: i32) {
    bytes[0..8].copy_from_slice(&base_offset.to_be_bytes());
    bytes[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&partition_leader_epoch.to_be_bytes());
}

/// Marks a batch LogAppendTime stamped `now` (its max timestamp, which consumers read as
/// every record's timestamp), as Kafka's LogValidator does, and recomputes the CRC over
/// the patched header and the unchanged `rest` of the batch.
pub fn stamp_log_append_time(head: &mut [u8; HEADER_BYTES], rest: &[u8], now: i64) {
    let attributes = i16::from_be_bytes([head[21], head[22]]) | ATTR_LOG_APPEND_TIME;
    head[21..23].copy_from_slice(&attributes.to_be_bytes());
    head[35..43].copy_from_slice(&now.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[21..]), rest);
    head[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates the complete batches of a byte range, stopping at the first incomplete one.
#[derive(Debug)]
pub struct BatchIter<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> BatchIter<'a> {
    /// Starts iterating at the beginning of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, position: 0 }
    }

    /// Byte position of the next batch the iterator would return.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl Iterator for BatchIter<'_> {
    type Item = (usize, BatchHeader);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.bytes.get(self.position..)?;
        let header = BatchHeader::parse(rest)?;
        if header.size > rest.len() {
            return None;
        }
        let at = self.position;
        self.position += header.size;
        Some((at, header))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// Encodes `count` records as one batch, as a producer would send them.
    pub fn encode_batch(count: i32, producer_id: i64, base_sequence: i32, ts: i64) -> Vec<u8> {
        let records: Vec<Record> = (0..count)
            .map(|i| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch: if producer_id >= 0 { 0 } else { -1 },
                timestamp_type: TimestampType::Creation,
                offset: i64::from(i),
                sequence: base_sequence.max(0) + i,
                timestamp: ts + i64::from(i),
                key: Some(bytes::Bytes::from(format!("k{i}"))),
                value: Some(bytes::Bytes::from(format!("value-{i}"))),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
        buf.to_vec()
    }

    #[test]
    fn validate_accepts_a_producer_batch() {
        let bytes = encode_batch(3, -1, -1, 1000);
        let header = validate(&bytes).expect("valid");
        assert_eq!(header.record_count, 3);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.max_timestamp, 1002);
    }

    #[test]
    fn validate_rejects_a_flipped_byte() {
        let mut bytes = encode_batch(3, -1, -1, 1000);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        assert!(matches!(
            validate(&bytes),
            Err(LogError::CorruptBatch { .. })
        ));
    }

    #[test]
    fn patch_keeps_the_crc_valid() {
        let mut bytes = encode_batch(2, 7, 0, 1000);
        patch(&mut bytes, 4242, 9);
        let header = validate(&bytes).expect("still valid");
        assert_eq!(header.base_offset, 4242);
        assert_eq!(header.partition_leader_epoch, 9);
    }

    #[test]
    fn validate_rejects_truncated_and_wrong_length() {
        let bytes = encode_batch(2, -1, -1, 0);
        assert!(validate(&bytes[..40]).is_err());
        assert!(validate(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn last_sequence_wraps() {
        let mut h = BatchHeader::parse(&encode_batch(3, 1, 0, 0)).expect("header");
        h.base_sequence = i32::MAX;
        assert_eq!(h.last_sequence(), 1);
    }
}
