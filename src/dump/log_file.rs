//! The `.log` half of the dump: walks the batches with the broker's own header parser,
//! prints each header (and with `deep` each record), and reports bad CRCs, bad counts,
//! offsets that are not contiguous and a torn tail. Trailing zeros are preallocated space.

use std::io::Write;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::{emit, DumpError, DumpOptions, FileReport, Problem};
use crate::log::batch::{self, BatchHeader, BatchIter};
use crate::log::LogError;

/// The last offset of a batch whose header may be garbage (no overflow).
pub(super) fn last_offset(header: &BatchHeader) -> i64 {
    header
        .base_offset
        .saturating_add(i64::from(header.last_offset_delta))
}

fn codec_name(attributes: i16) -> &'static str {
    match attributes & 0x07 {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

fn timestamp_type(attributes: i16) -> &'static str {
    if attributes & 0x08 != 0 {
        "LogAppendTime"
    } else {
        "CreateTime"
    }
}

/// The CRC problem of the batch at `position`, if any (`None` when the CRC holds).
fn crc_problem(bytes: &[u8], position: usize, header: &BatchHeader) -> Option<Problem> {
    match batch::check_crc(&bytes[position..], header) {
        Ok(()) => None,
        Err(LogError::CorruptBatch {
            stored, computed, ..
        }) => Some(Problem::BadCrc {
            position,
            base_offset: header.base_offset,
            stored,
            computed,
        }),
        Err(_) => Some(Problem::BadCrc {
            position,
            base_offset: header.base_offset,
            stored: header.crc,
            computed: 0,
        }),
    }
}

/// The header-level problems of one whole batch; `expected` is the offset it must start at.
fn batch_problems(
    bytes: &[u8],
    position: usize,
    header: &BatchHeader,
    expected: i64,
) -> Vec<Problem> {
    let base_offset = header.base_offset;
    let mut problems = Vec::new();
    if header.magic != batch::MAGIC_V2 {
        let magic = header.magic;
        problems.push(Problem::BadMagic {
            position,
            base_offset,
            magic,
        });
        return problems;
    }
    problems.extend(crc_problem(bytes, position, header));
    if header.record_count <= 0
        || i64::from(header.last_offset_delta) != i64::from(header.record_count) - 1
    {
        problems.push(Problem::BadRecordCount {
            position,
            base_offset,
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    if base_offset != expected {
        problems.push(Problem::OffsetNotContiguous {
            position,
            base_offset,
            expected,
        });
    }
    problems
}

fn write_batch_line(
    out: &mut dyn Write,
    position: usize,
    header: &BatchHeader,
    crc_valid: bool,
) -> Result<(), DumpError> {
    let a = header.attributes;
    emit(
        out,
        format_args!(
            "baseOffset: {} lastOffset: {} count: {} position: {} size: {} magic: {} \
             crc: {:#010x} crcValid: {crc_valid} attributes: {a:#06x} compresscodec: {} \
             timestampType: {} isTransactional: {} isControl: {} producerId: {} \
             producerEpoch: {} baseSequence: {} partitionLeaderEpoch: {} baseTimestamp: {} \
             maxTimestamp: {}",
            header.base_offset,
            last_offset(header),
            header.record_count,
            position,
            header.size,
            header.magic,
            header.crc,
            codec_name(a),
            timestamp_type(a),
            header.is_transactional(),
            header.is_control(),
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.partition_leader_epoch,
            header.base_timestamp,
            header.max_timestamp,
        ),
    )
}

/// Decodes the records of one CRC-valid batch, prints them and checks their offsets.
fn dump_records(
    batch_bytes: &[u8],
    position: usize,
    header: &BatchHeader,
    report: &mut FileReport,
    out: &mut dyn Write,
) -> Result<(), DumpError> {
    let base_offset = header.base_offset;
    let mut buf = Bytes::copy_from_slice(batch_bytes);
    let set = match RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set,
        Err(error) => {
            let reason = error.to_string();
            report.push(Problem::Undecodable {
                position,
                base_offset,
                reason,
            });
            return Ok(());
        }
    };
    let size = |b: &Option<Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
    let ts_type = timestamp_type(header.attributes);
    for (index, record) in set.records.iter().enumerate() {
        emit(
            out,
            format_args!(
                "| offset: {} {ts_type}: {} keySize: {} valueSize: {} sequence: {} headers: {}",
                record.offset,
                record.timestamp,
                size(&record.key),
                size(&record.value),
                record.sequence,
                record.headers.len(),
            ),
        )?;
        let expected = base_offset.saturating_add(index as i64);
        if record.offset != expected {
            let found = record.offset;
            report.push(Problem::RecordOffset {
                base_offset,
                index,
                expected,
                found,
            });
        }
    }
    let decoded = set.records.len();
    if i64::try_from(decoded).ok() != Some(i64::from(header.record_count)) {
        let header = header.record_count;
        report.push(Problem::RecordCount {
            base_offset,
            header,
            decoded,
        });
    }
    report.records += decoded;
    Ok(())
}

/// Reports what follows the last whole batch: nothing, preallocated zeros, or a torn tail.
fn check_tail(bytes: &[u8], end: usize, next_offset: i64, report: &mut FileReport) {
    let tail = &bytes[end..];
    if tail.iter().all(|b| *b == 0) {
        report.preallocated = tail.len();
        return;
    }
    let problem = match BatchHeader::parse(tail) {
        Some(header) => Problem::CutOffBatch {
            position: end,
            base_offset: header.base_offset,
            size: header.size,
            available: tail.len(),
        },
        None => Problem::TornTail {
            position: end,
            bytes: tail.len(),
            next_offset,
        },
    };
    report.push(problem);
}

/// Prints the batches of a `.log` (and their records with `deep`) and reports what is wrong.
pub(super) fn dump_log(
    bytes: &[u8],
    options: DumpOptions,
    report: &mut FileReport,
    out: &mut dyn Write,
) -> Result<(), DumpError> {
    emit(
        out,
        format_args!("Log starting offset: {}", report.base_offset),
    )?;
    let mut batches = BatchIter::new(bytes);
    let mut next_offset = report.base_offset;
    for (position, header) in batches.by_ref() {
        let problems = batch_problems(bytes, position, &header, next_offset);
        let crc_valid = !problems
            .iter()
            .any(|p| matches!(p, Problem::BadCrc { .. } | Problem::BadMagic { .. }));
        write_batch_line(out, position, &header, crc_valid)?;
        if options.deep && crc_valid {
            let batch_bytes = &bytes[position..position + header.size];
            dump_records(batch_bytes, position, &header, report, out)?;
        }
        for problem in problems {
            report.push(problem);
        }
        report.items += 1;
        next_offset = last_offset(&header).saturating_add(1);
    }
    check_tail(bytes, batches.position(), next_offset, report);
    Ok(())
}
