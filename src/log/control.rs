//! Transaction markers: the control batches (one control record, COMMIT or ABORT) that end
//! a producer's transaction on a partition. The coordinator has them written
//! (WriteTxnMarkers); followers copy them like any batch; the producer state reads them to
//! close the transaction.
//!
//! Layout (EndTransactionMarker in Apache Kafka): the record key is version i16 (0) and
//! type i16 (0 ABORT, 1 COMMIT); the value is version i16 (0) and coordinator epoch i32.
//! Control batches are never compressed, so the key is read straight from the bytes.

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, TimestampType};

use super::batch::{BatchHeader, HEADER_BYTES};

/// Control record type of an abort marker.
const ABORT: i16 = 0;
/// Control record type of a commit marker.
const COMMIT: i16 = 1;

/// How a transaction ended on a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// Reads a zigzag varint at `*at`, moving past it.
fn varint(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    None
}

fn be_i16(bytes: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

/// The marker of a control batch (`bytes` is the whole batch); `None` when the batch is
/// not a control batch or its record is not a transaction marker (Kafka has other control
/// types, which end no transaction).
pub fn parse(bytes: &[u8], header: &BatchHeader) -> Option<Marker> {
    if !header.is_control() || header.record_count < 1 {
        return None;
    }
    let mut at = HEADER_BYTES;
    varint(bytes, &mut at)?; // record length
    at += 1; // attributes
    varint(bytes, &mut at)?; // timestamp delta
    varint(bytes, &mut at)?; // offset delta
    let key_length = varint(bytes, &mut at)?;
    if key_length < 4 {
        return None;
    }
    let kind = be_i16(bytes, at + 2)?;
    at += key_length as usize;
    let value_length = varint(bytes, &mut at)?;
    let coordinator_epoch = match value_length >= 6 {
        true => i32::from_be_bytes(bytes.get(at + 2..at + 6)?.try_into().ok()?),
        false => -1,
    };
    match kind {
        ABORT | COMMIT => Some(Marker {
            commit: kind == COMMIT,
            coordinator_epoch,
        }),
        _ => None,
    }
}

/// A control batch ending `producer_id`'s transaction at `producer_epoch`, as the
/// coordinator has it written; its base offset and leader epoch are set on append.
pub fn encode(producer_id: i64, producer_epoch: i16, marker: Marker, timestamp: i64) -> Bytes {
    let kind = if marker.commit { COMMIT } else { ABORT };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        headers: Default::default(),
        delete_horizon: false,
    };
    // Encoding one small record into memory without compression cannot fail.
    super::batch_encode::encode_batch(&[record], Compression::None).unwrap_or_else(|error| {
        tracing::error!(%error, producer_id, "cannot encode a transaction marker");
        Bytes::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_reads_back_as_written() {
        for commit in [true, false] {
            let marker = Marker {
                commit,
                coordinator_epoch: 7,
            };
            let bytes = encode(42, 3, marker, 1_700_000_000_000);
            let header = BatchHeader::parse(&bytes).expect("header");
            assert!(header.is_control() && header.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch), (42, 3));
            assert_eq!(parse(&bytes, &header), Some(marker));
        }
    }

    #[test]
    fn a_data_batch_is_no_marker() {
        let bytes = crate::log::batch::tests::encode_batch(2, 5, 0, 0);
        let header = BatchHeader::parse(&bytes).expect("header");
        assert_eq!(parse(&bytes, &header), None);
    }
}
