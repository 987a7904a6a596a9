//! The records inside a record batch v2 (DefaultRecord in Apache Kafka), read only where the
//! broker must look inside a batch: the log cleaner (keys, null values) and the check that a
//! compacted topic gets keys.
//!
//! Record layout: length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//! keyLength varint (-1: null) + key, valueLength varint (-1: null) + value, header count
//! varint + headers. Varints are zigzag-encoded. The batch payload after the 61-byte header
//! is compressed as a whole with the codec in attribute bits 0-2.
//!
//! Must not: keep decoded records around; views borrow the decompressed payload.

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{self as codecs, Compressor, Decompressor};

use super::batch::{BatchHeader, HEADER_BYTES};
use super::error::LogError;

/// Attribute bits holding the compression codec.
pub const COMPRESSION_MASK: i16 = 0x07;

/// One record of a batch, borrowed from the (decompressed) payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The record's offset delta from the batch's base offset.
    pub offset_delta: i32,
    /// The record's timestamp delta from the batch's base timestamp.
    pub timestamp_delta: i64,
    /// The key, `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// Whether the value is non-null (a null value is a tombstone).
    pub has_value: bool,
    attributes: u8,
    /// The bytes after the timestamp delta (offset delta to the end of the headers).
    tail: &'a [u8],
}

fn undecodable(header: &BatchHeader, reason: impl std::fmt::Display) -> LogError {
    LogError::UndecodableRecords {
        offset: header.base_offset,
        reason: reason.to_string(),
    }
}

/// Reads a zigzag varlong at `*at`, advancing it.
fn read_varlong(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Option<i32> {
    read_varlong(bytes, at).and_then(|v| i32::try_from(v).ok())
}

/// Appends `value` as a zigzag varlong.
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Reads a length-prefixed byte field; `Some(None)` for length -1 (null).
fn read_bytes<'a>(bytes: &'a [u8], at: &mut usize) -> Option<Option<&'a [u8]>> {
    let length = read_varint(bytes, at)?;
    if length < 0 {
        return (length == -1).then_some(None);
    }
    let end = at.checked_add(length as usize)?;
    let field = bytes.get(*at..end)?;
    *at = end;
    Some(Some(field))
}

fn parse_record(body: &[u8]) -> Option<RecordView<'_>> {
    let attributes = *body.first()?;
    let mut at = 1;
    let timestamp_delta = read_varlong(body, &mut at)?;
    let tail = &body[at..];
    let offset_delta = read_varint(body, &mut at)?;
    let key = read_bytes(body, &mut at)?;
    let value = read_bytes(body, &mut at)?;
    Some(RecordView {
        offset_delta,
        timestamp_delta,
        key,
        has_value: value.is_some(),
        attributes,
        tail,
    })
}

/// The records of a batch's (decompressed) payload; fails unless exactly `header`'s
/// record count of well-formed records fills it.
pub fn parse_records<'a>(
    payload: &'a [u8],
    header: &BatchHeader,
) -> Result<Vec<RecordView<'a>>, LogError> {
    let count = usize::try_from(header.record_count).map_err(|e| undecodable(header, e))?;
    let mut records = Vec::with_capacity(count.min(payload.len()));
    let mut at = 0usize;
    while at < payload.len() {
        let length = read_varint(payload, &mut at)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| undecodable(header, "bad record length"))?;
        let body = at
            .checked_add(length)
            .and_then(|end| payload.get(at..end))
            .ok_or_else(|| undecodable(header, "record longer than its batch"))?;
        let record = parse_record(body).ok_or_else(|| undecodable(header, "malformed record"))?;
        records.push(record);
        at += length;
    }
    if records.len() != count {
        return Err(undecodable(
            header,
            "record count does not match the batch header",
        ));
    }
    Ok(records)
}

/// The compression codec of a batch (attribute bits 0-2).
pub fn codec(header: &BatchHeader) -> i16 {
    header.attributes & COMPRESSION_MASK
}

/// The most bytes a batch's records may decompress to (a named limit: a small compressed
/// batch must not make the broker allocate without bound).
pub const DECOMPRESSED_BATCH_BYTES_MAX: usize = 128 << 20;

/// Reads `reader` to its end, failing past [`DECOMPRESSED_BATCH_BYTES_MAX`] bytes.
fn read_capped(reader: impl std::io::Read, header: &BatchHeader) -> Result<Bytes, LogError> {
    use std::io::Read as _;
    let mut out = Vec::new();
    let limit = DECOMPRESSED_BATCH_BYTES_MAX as u64 + 1;
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| undecodable(header, e))?;
    if out.len() > DECOMPRESSED_BATCH_BYTES_MAX {
        return Err(undecodable(
            header,
            "records decompress to more than 128 MiB",
        ));
    }
    Ok(Bytes::from(out))
}

/// The batch's records payload, decompressed. `batch` is the whole batch.
pub fn decompressed_payload(batch: &[u8], header: &BatchHeader) -> Result<Bytes, LogError> {
    let compressed = &batch[HEADER_BYTES..header.size];
    match codec(header) {
        0 => Ok(Bytes::copy_from_slice(compressed)),
        1 => read_capped(flate2::read::GzDecoder::new(compressed), header),
        2 => {
            // Snappy (xerial framing) expands at most ~32x: the crate's decoder is bounded.
            let mut input = Bytes::copy_from_slice(compressed);
            let take = |buf: &mut Bytes| Ok(std::mem::take(buf));
            codecs::Snappy::decompress(&mut input, take).map_err(|e| undecodable(header, e))
        }
        3 => {
            let decoder = lz4::Decoder::new(compressed).map_err(|e| undecodable(header, e))?;
            read_capped(decoder, header)
        }
        4 => {
            let decoder =
                zstd::stream::read::Decoder::new(compressed).map_err(|e| undecodable(header, e))?;
            read_capped(decoder, header)
        }
        _ => Err(undecodable(header, "unknown compression codec")),
    }
}

/// Compresses a records payload with `codec` (as [`codec`] returns it).
pub fn compress(codec: i16, header: &BatchHeader, raw: &[u8]) -> Result<Vec<u8>, LogError> {
    let mut out = BytesMut::new();
    let fill = |buf: &mut BytesMut| {
        buf.extend_from_slice(raw);
        Ok(())
    };
    let result = match codec {
        0 => return Ok(raw.to_vec()),
        1 => codecs::Gzip::compress(&mut out, fill),
        2 => codecs::Snappy::compress(&mut out, fill),
        3 => codecs::Lz4::compress(&mut out, fill),
        4 => codecs::Zstd::compress(&mut out, fill),
        _ => return Err(undecodable(header, "unknown compression codec")),
    };
    result.map_err(|e| undecodable(header, e))?;
    Ok(out.to_vec())
}

impl RecordView<'_> {
    /// Appends the record re-encoded with another timestamp delta (when the batch's base
    /// timestamp changes); every other byte is kept.
    pub fn write_with_timestamp_delta(&self, out: &mut Vec<u8>, timestamp_delta: i64) {
        let mut body = Vec::with_capacity(self.tail.len() + 11);
        body.push(self.attributes);
        write_varlong(&mut body, timestamp_delta);
        body.extend_from_slice(self.tail);
        write_varlong(out, body.len() as i64);
        out.extend_from_slice(&body);
    }
}

/// Each record's offset delta and timestamp (the batch's base timestamp plus its delta).
pub fn timestamps(batch: &[u8], header: &BatchHeader) -> Result<Vec<(i64, i64)>, LogError> {
    let payload = decompressed_payload(batch, header)?;
    let records = parse_records(&payload, header)?;
    let base = header.base_timestamp;
    let each = records.iter().map(|r| {
        (
            i64::from(r.offset_delta),
            base.saturating_add(r.timestamp_delta),
        )
    });
    Ok(each.collect())
}

/// The indexes in the batch of a client batch's records without a key (a compacted topic
/// refuses them, as Kafka's LogValidator does, naming each one: KIP-467).
pub fn keyless_records(batch: &[u8], header: &BatchHeader) -> Result<Vec<i32>, LogError> {
    let payload = decompressed_payload(batch, header)?;
    let records = parse_records(&payload, header)?;
    let keyless = records.iter().enumerate().filter(|(_, r)| r.key.is_none());
    Ok(keyless.map(|(index, _)| index as i32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;

    #[test]
    fn varlongs_round_trip_at_the_edges() {
        for value in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            write_varlong(&mut out, value);
            let mut at = 0;
            assert_eq!(read_varlong(&out, &mut at), Some(value));
            assert_eq!(at, out.len());
        }
    }

    #[test]
    fn parses_the_records_of_a_producer_batch() {
        let bytes = encode_batch(3, -1, -1, 1000);
        let header = BatchHeader::parse(&bytes).expect("header");
        let payload = decompressed_payload(&bytes, &header).expect("payload");
        let records = parse_records(&payload, &header).expect("records");
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].key, Some(&b"k2"[..]));
        assert_eq!(records[1].offset_delta, 1);
        assert!(records.iter().all(|r| r.has_value));
        assert!(keyless_records(&bytes, &header).expect("keys").is_empty());
    }

    /// Goal: a small gzip batch that inflates past the cap is refused, not inflated.
    /// Method: 200 MiB of zeros compress to about 200 KiB.
    #[test]
    fn a_decompression_bomb_is_refused() {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..200 {
            encoder.write_all(&zeros).expect("compress");
        }
        let payload = encoder.finish().expect("finish");
        let mut batch = encode_batch(1, -1, -1, 0)[..HEADER_BYTES].to_vec();
        batch.extend_from_slice(&payload);
        let mut header = BatchHeader::parse(&batch).expect("header");
        header.size = batch.len();
        header.attributes |= 1;
        assert!(matches!(
            decompressed_payload(&batch, &header),
            Err(LogError::UndecodableRecords { .. })
        ));
    }

    #[test]
    fn a_truncated_payload_is_an_error_not_a_panic() {
        let bytes = encode_batch(3, -1, -1, 1000);
        let header = BatchHeader::parse(&bytes).expect("header");
        for cut in 0..bytes.len() - HEADER_BYTES {
            let payload = &bytes[HEADER_BYTES..HEADER_BYTES + cut];
            assert!(parse_records(payload, &header).is_err());
        }
    }
}
