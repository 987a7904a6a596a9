//! The records the transaction coordinator keeps in `__transaction_state`, in Apache
//! Kafka's layouts so that its tools (DumpLogSegments `--transaction-log-decoder`) read
//! them: key version 0 (`TransactionLogKey`: the transactional id), value version 1
//! (`TransactionLogValue`, flexible, with the tagged fields of KIP-890 part 2: previous and
//! next producer id, the client's transaction version); version 0 is read too. A `None`
//! value is a tombstone (an expired transactional id). Pure encoding and decoding, no
//! state.
//!
//! Invariant: every length read from a record is checked against the bytes left before
//! anything is allocated.

use std::collections::BTreeSet;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::state::{TransactionMetadata, TxnState};
use crate::group::error::RecordError;

/// Key version of a transaction record (Kafka's `TransactionLogKey`).
const KEY_VERSION: i16 = 0;
/// Value version written here (the flexible one).
const VALUE_VERSION: i16 = 1;
/// Tags of the value's tagged fields.
const TAG_PREVIOUS_PRODUCER_ID: u64 = 0;
const TAG_NEXT_PRODUCER_ID: u64 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u64 = 2;

/// A decoded `__transaction_state` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionRecord {
    pub transactional_id: String,
    pub metadata: Option<TransactionMetadata>,
}

fn put_string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

fn need(buf: &impl Buf, bytes: usize) -> Result<(), RecordError> {
    match buf.remaining() >= bytes {
        true => Ok(()),
        false => Err(RecordError::Truncated),
    }
}

fn get_string(buf: &mut Bytes) -> Result<String, RecordError> {
    need(buf, 2)?;
    let length = buf.get_i16();
    let length = usize::try_from(length).map_err(|_| RecordError::Truncated)?;
    need(buf, length)?;
    let bytes = buf.split_to(length);
    String::from_utf8(bytes.to_vec()).map_err(|_| RecordError::InvalidString)
}

fn get_count(buf: &mut Bytes, element_bytes: usize) -> Result<Option<usize>, RecordError> {
    need(buf, 4)?;
    let count = buf.get_i32();
    if count < 0 {
        return Ok(None);
    }
    let count = count as usize;
    need(buf, count.saturating_mul(element_bytes))?;
    Ok(Some(count))
}

impl TransactionRecord {
    /// The record's key and value bytes.
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        let mut key = BytesMut::new();
        key.put_i16(KEY_VERSION);
        put_string(&mut key, &self.transactional_id);
        let value = self.metadata.as_ref().map(encode_value);
        (key.freeze(), value)
    }

    /// Decodes a record; `Ok(None)` for a key version this coordinator does not know.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Self>, RecordError> {
        let mut key = Bytes::copy_from_slice(key);
        need(&key, 2)?;
        if key.get_i16() != KEY_VERSION {
            return Ok(None);
        }
        let transactional_id = get_string(&mut key)?;
        let metadata = match value {
            None => None,
            Some(value) => Some(decode_value(&transactional_id, value)?),
        };
        Ok(Some(TransactionRecord {
            transactional_id,
            metadata,
        }))
    }
}

fn put_unsigned_varint(buf: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

fn encode_value(m: &TransactionMetadata) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(VALUE_VERSION);
    buf.put_i64(m.producer_id);
    buf.put_i16(m.producer_epoch);
    buf.put_i32(m.timeout_ms);
    buf.put_i8(m.state.code());
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &m.partitions {
        match topics.last_mut() {
            Some((last, partitions)) if *last == topic.as_str() => partitions.push(*partition),
            _ => topics.push((topic, vec![*partition])),
        }
    }
    put_unsigned_varint(&mut buf, topics.len() as u64 + 1);
    for (topic, partitions) in topics {
        put_unsigned_varint(&mut buf, topic.len() as u64 + 1);
        buf.put_slice(topic.as_bytes());
        put_unsigned_varint(&mut buf, partitions.len() as u64 + 1);
        for partition in partitions {
            buf.put_i32(partition);
        }
        put_unsigned_varint(&mut buf, 0);
    }
    buf.put_i64(m.last_update_ms);
    buf.put_i64(m.start_ms);
    // Tagged fields at their defaults are left out, as Kafka leaves them.
    let mut tagged: Vec<(u64, Vec<u8>)> = Vec::new();
    if m.previous_producer_id != -1 {
        tagged.push((
            TAG_PREVIOUS_PRODUCER_ID,
            m.previous_producer_id.to_be_bytes().into(),
        ));
    }
    if m.next_producer_id != -1 {
        tagged.push((
            TAG_NEXT_PRODUCER_ID,
            m.next_producer_id.to_be_bytes().into(),
        ));
    }
    if m.client_transaction_version != 0 {
        let version = m.client_transaction_version.to_be_bytes().into();
        tagged.push((TAG_CLIENT_TRANSACTION_VERSION, version));
    }
    put_unsigned_varint(&mut buf, tagged.len() as u64);
    for (tag, value) in tagged {
        put_unsigned_varint(&mut buf, tag);
        put_unsigned_varint(&mut buf, value.len() as u64);
        buf.put_slice(&value);
    }
    buf.freeze()
}

/// Reads the value's own tagged fields (v1) into `metadata`; unknown tags are skipped.
fn get_value_tags(buf: &mut Bytes, metadata: &mut TransactionMetadata) -> Result<(), RecordError> {
    let count = get_unsigned_varint(buf)?;
    for _ in 0..count {
        let tag = get_unsigned_varint(buf)?;
        let size = get_unsigned_varint(buf)? as usize;
        need(buf, size)?;
        let mut field = buf.split_to(size);
        match (tag, size) {
            (TAG_PREVIOUS_PRODUCER_ID, 8) => metadata.previous_producer_id = field.get_i64(),
            (TAG_NEXT_PRODUCER_ID, 8) => metadata.next_producer_id = field.get_i64(),
            (TAG_CLIENT_TRANSACTION_VERSION, 2) => {
                metadata.client_transaction_version = field.get_i16()
            }
            _ => {}
        }
    }
    Ok(())
}

/// Skips the tagged fields of a flexible (v1) value: a varint count, then for each a
/// varint tag, a varint size and the bytes.
fn skip_tagged_fields(buf: &mut Bytes) -> Result<(), RecordError> {
    let count = get_unsigned_varint(buf)?;
    for _ in 0..count {
        get_unsigned_varint(buf)?;
        let size = get_unsigned_varint(buf)? as usize;
        need(buf, size)?;
        buf.advance(size);
    }
    Ok(())
}

fn get_unsigned_varint(buf: &mut Bytes) -> Result<u64, RecordError> {
    let mut value = 0u64;
    for shift in (0..35).step_by(7) {
        need(buf, 1)?;
        let byte = buf.get_u8();
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(RecordError::Truncated)
}

fn decode_value(transactional_id: &str, value: &[u8]) -> Result<TransactionMetadata, RecordError> {
    let mut buf = Bytes::copy_from_slice(value);
    need(&buf, 2 + 8 + 2 + 4 + 1)?;
    let version = buf.get_i16();
    if !(0..=1).contains(&version) {
        return Err(RecordError::UnknownVersion { version });
    }
    let flexible = version >= 1;
    let producer_id = buf.get_i64();
    let producer_epoch = buf.get_i16();
    let timeout_ms = buf.get_i32();
    let state = TxnState::from_code(buf.get_i8()).ok_or(RecordError::Truncated)?;
    let mut partitions = BTreeSet::new();
    let topic_count = match flexible {
        true => (get_unsigned_varint(&mut buf)? as usize).checked_sub(1),
        false => get_count(&mut buf, 6)?,
    };
    for _ in 0..topic_count.unwrap_or(0) {
        let topic = match flexible {
            true => {
                let length = (get_unsigned_varint(&mut buf)? as usize).saturating_sub(1);
                need(&buf, length)?;
                let bytes = buf.split_to(length);
                String::from_utf8(bytes.to_vec()).map_err(|_| RecordError::InvalidString)?
            }
            false => get_string(&mut buf)?,
        };
        let count = match flexible {
            true => (get_unsigned_varint(&mut buf)? as usize).saturating_sub(1),
            false => get_count(&mut buf, 4)?.unwrap_or(0),
        };
        need(&buf, count.saturating_mul(4))?;
        for _ in 0..count {
            partitions.insert((topic.clone(), buf.get_i32()));
        }
        if flexible {
            skip_tagged_fields(&mut buf)?;
        }
    }
    need(&buf, 16)?;
    let last_update_ms = buf.get_i64();
    let start_ms = buf.get_i64();
    let mut metadata = TransactionMetadata::new(transactional_id, producer_id, timeout_ms);
    metadata.producer_epoch = producer_epoch;
    metadata.state = state;
    metadata.partitions = partitions;
    metadata.last_update_ms = last_update_ms;
    metadata.start_ms = start_ms;
    if flexible {
        get_value_tags(&mut buf, &mut metadata)?;
    }
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let mut metadata = TransactionMetadata::new("txn-a", 4000, 60_000);
        metadata.producer_epoch = 3;
        metadata.state = TxnState::Ongoing;
        metadata.partitions = [("in", 0), ("in", 2), ("out", 1)]
            .into_iter()
            .map(|(t, p)| (t.to_string(), p))
            .collect();
        metadata.start_ms = 1_000;
        metadata.last_update_ms = 2_000;
        metadata.client_transaction_version = 2;
        metadata.previous_producer_id = 3000;
        metadata.next_producer_id = 5000;
        let record = TransactionRecord {
            transactional_id: "txn-a".into(),
            metadata: Some(metadata.clone()),
        };
        let (key, value) = record.encode();
        let decoded = TransactionRecord::decode(&key, value.as_deref()).expect("decode");
        let mut expected = metadata;
        expected.pending = None;
        assert_eq!(decoded.expect("known").metadata, Some(expected));
        let tombstone = TransactionRecord::decode(&key, None).expect("decode");
        assert_eq!(tombstone.expect("known").metadata, None);
    }

    #[test]
    fn a_truncated_value_is_an_error_not_a_panic() {
        let metadata = TransactionMetadata::new("t", 1, 1);
        let value = encode_value(&metadata);
        for end in 0..value.len() {
            assert!(decode_value("t", &value[..end]).is_err(), "cut at {end}");
        }
    }

    #[test]
    fn a_version_0_value_still_reads() {
        let mut v0 = BytesMut::new();
        v0.put_i16(0);
        v0.put_i64(4000);
        v0.put_i16(3);
        v0.put_i32(60_000);
        v0.put_i8(TxnState::Ongoing.code());
        v0.put_i32(1);
        put_string(&mut v0, "in");
        v0.put_i32(1);
        v0.put_i32(2);
        v0.put_i64(2_000);
        v0.put_i64(1_000);
        let metadata = decode_value("t", &v0).expect("decode");
        assert_eq!((metadata.producer_id, metadata.producer_epoch), (4000, 3));
        assert!(metadata.partitions.contains(&("in".to_string(), 2)));
        assert_eq!(
            (metadata.start_ms, metadata.client_transaction_version),
            (1_000, 0)
        );
    }
}
