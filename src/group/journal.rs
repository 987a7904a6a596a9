//! Writes the coordinator's records to its `__consumer_offsets` partition (one batch per
//! change, appended as leader like any produce) and reads a partition back when its
//! groups are loaded.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

use super::error::GroupError;
use super::records::CoordinatorRecord;
use super::OFFSETS_TOPIC;
use crate::log::batch::BatchIter;
use crate::log::batch_encode::{encode_batch, plain_record};
use crate::replica::{Partition, ReplicaManager};

/// Bytes read from the log per step while loading.
const LOAD_READ_BYTES: usize = 4 << 20;

/// Where a write ended, to wait until it is replicated.
#[derive(Debug, Default)]
pub struct Written {
    partition: Option<Arc<Partition>>,
    /// The offset after the last record written.
    end_offset: i64,
    /// The leader epoch it was written at.
    leader_epoch: i32,
}

impl Written {
    /// Waits until the high watermark passes the written records, so that an answer never
    /// promises what a leader change could lose.
    pub async fn replicated(self, group: &str, timeout: Duration) -> Result<(), GroupError> {
        let Some(partition) = self.partition else {
            return Ok(());
        };
        match partition
            .wait_for_high_watermark(self.end_offset, self.leader_epoch, timeout)
            .await
        {
            Ok(()) => Ok(()),
            _ => Err(GroupError::Timeout {
                group: group.to_string(),
                timeout_ms: timeout.as_millis() as u64,
            }),
        }
    }
}

/// Appends `records` to `__consumer_offsets-{partition}` as one batch.
pub fn write(
    replicas: &ReplicaManager,
    partition: i32,
    group: &str,
    records: &[CoordinatorRecord],
) -> Result<Written, GroupError> {
    if records.is_empty() {
        return Ok(Written::default());
    }
    let storage = |source| GroupError::Storage {
        group: group.to_string(),
        partition,
        source: Box::new(source),
    };
    let target = replicas
        .partition(OFFSETS_TOPIC, partition)
        .map_err(storage)?;
    let batch = encode(records);
    let info = target.append_as_leader(&batch).map_err(storage)?;
    Ok(Written {
        end_offset: info.base_offset + records.len() as i64,
        leader_epoch: info.leader_epoch,
        partition: Some(target),
    })
}

fn encode(records: &[CoordinatorRecord]) -> Bytes {
    let timestamp = super::classic::now_ms();
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, record)| {
            let (key, value) = record.encode();
            plain_record(i as i64, timestamp, Some(key), value)
        })
        .collect();
    // Encoding into memory without compression cannot fail.
    encode_batch(&records, Compression::None).unwrap_or_else(|error| {
        tracing::error!(%error, "cannot encode group coordinator records");
        Bytes::new()
    })
}

/// Every record of `__consumer_offsets-{partition}` below its high watermark, in order.
/// Records that cannot be decoded are skipped with an error logged.
pub async fn read_all(
    replicas: &ReplicaManager,
    partition: i32,
) -> Result<Vec<CoordinatorRecord>, GroupError> {
    let storage = |source| GroupError::Storage {
        group: String::new(),
        partition,
        source: Box::new(source),
    };
    let target = replicas
        .partition(OFFSETS_TOPIC, partition)
        .map_err(storage)?;
    let read = tokio::task::spawn_blocking(move || read_partition(&target));
    match read.await {
        Ok(result) => result.map_err(storage),
        Err(join_error) => {
            tracing::error!(partition, %join_error, "loading task failed");
            Ok(Vec::new())
        }
    }
}

fn read_partition(
    partition: &Partition,
) -> Result<Vec<CoordinatorRecord>, crate::replica::ReplicaError> {
    let high_watermark = partition.high_watermark();
    let mut offset = partition.offsets().log_start_offset;
    let mut records = Vec::new();
    while offset < high_watermark {
        let bytes = partition
            .log()
            .read(offset, high_watermark, LOAD_READ_BYTES, true)
            .map_err(|e| partition.log_error(e))?;
        let Some(next) = BatchIter::new(&bytes)
            .last()
            .map(|(_, h)| h.last_offset() + 1)
        else {
            break;
        };
        decode_batches(bytes, &mut records);
        offset = next;
    }
    Ok(records)
}

fn decode_batches(mut bytes: Bytes, out: &mut Vec<CoordinatorRecord>) {
    let sets = match RecordBatchDecoder::decode_all(&mut bytes) {
        Ok(sets) => sets,
        Err(error) => {
            tracing::error!(%error, "cannot decode a __consumer_offsets batch");
            return;
        }
    };
    for record in sets.into_iter().flat_map(|set| set.records) {
        if record.control {
            continue;
        }
        let Some(key) = record.key else { continue };
        match CoordinatorRecord::decode(&key, record.value.as_deref()) {
            Ok(Some(decoded)) => out.push(decoded),
            Ok(None) => {}
            Err(error) => {
                tracing::error!(offset = record.offset, %error, "skipping an undecodable record");
            }
        }
    }
}
