//! The logs of the broker's own coordinators (`__consumer_offsets`, `__transaction_state`):
//! their records are appended as leader like any produce, one batch per change, and read
//! back whole when a coordinator takes a partition over. Records of a transactional batch
//! (a transactional offset commit) are read with their producer, and markers as markers,
//! so that the reader can tell which were committed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, TimestampType};

use super::{Partition, ReplicaError, ReplicaManager};
use crate::ids::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};
use crate::log::batch::BatchIter;
use crate::log::batch_encode::{encode_batch, plain_record};
use crate::log::control::{self, Marker};

/// Bytes read from the log per step while loading.
const LOAD_READ_BYTES: usize = 4 << 20;

/// Where a write ended, to wait until it is replicated.
#[derive(Debug, Default)]
pub struct Written {
    partition: Option<Arc<Partition>>,
    /// The offset after the last record written.
    end_offset: Offset,
    /// The leader epoch it was written at.
    leader_epoch: LeaderEpoch,
}

impl Written {
    /// Waits until the high watermark passes the written records (an answer never
    /// promises what a leader change could lose); false when it did not within `timeout`
    /// or the leadership moved.
    pub async fn replicated(self, timeout: Duration) -> bool {
        let Some(partition) = self.partition else {
            return true;
        };
        partition
            .wait_for_high_watermark(self.end_offset, self.leader_epoch, timeout)
            .await
            .is_ok()
    }
}

/// The producer of a transactional batch (a transactional offset commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
}

/// What a coordinator reads back from its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A record, with the producer of its batch if the batch is transactional.
    Record {
        key: Bytes,
        value: Option<Bytes>,
        producer: Option<ProducerId>,
    },
    /// A transaction marker: the producer's transactional records before it are
    /// committed or aborted.
    Marker {
        producer_id: ProducerId,
        commit: bool,
    },
}

/// Appends `records` (key, value) to `topic-partition` as one batch, transactional when
/// `producer` is given.
pub fn write(
    replicas: &ReplicaManager,
    (topic, partition): (&str, i32),
    records: &[(Bytes, Option<Bytes>)],
    producer: Option<TxnProducer>,
) -> Result<Written, ReplicaError> {
    if records.is_empty() {
        return Ok(Written::default());
    }
    let target = replicas.partition(topic, partition)?;
    let batch = encode(records, producer, target.clock().now_ms());
    let info = target.append_as_leader(&batch)?;
    Ok(Written {
        end_offset: info.last_offset.next(),
        leader_epoch: info.leader_epoch,
        partition: Some(target),
    })
}

/// Appends a transaction marker to `topic-partition` as leader (a coordinator's
/// WriteTxnMarkers), to wait for like a write.
pub fn write_marker(
    partition: &Arc<Partition>,
    producer: TxnProducer,
    marker: Marker,
) -> Result<Written, ReplicaError> {
    let info =
        partition.append_marker_as_leader(producer.producer_id, producer.producer_epoch, marker)?;
    Ok(Written {
        end_offset: info.last_offset.next(),
        leader_epoch: info.leader_epoch,
        partition: Some(Arc::clone(partition)),
    })
}

fn encode(
    records: &[(Bytes, Option<Bytes>)],
    producer: Option<TxnProducer>,
    timestamp: i64,
) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| {
            let mut record = plain_record(i as i64, timestamp, Some(key.clone()), value.clone());
            if let Some(p) = producer {
                record.transactional = true;
                record.producer_id = p.producer_id.0;
                record.producer_epoch = p.producer_epoch.0;
                record.timestamp_type = TimestampType::Creation;
            }
            record
        })
        .collect();
    // Encoding into memory without compression cannot fail.
    encode_batch(&records, Compression::None).unwrap_or_else(|error| {
        tracing::error!(%error, "cannot encode coordinator records");
        Bytes::new()
    })
}

/// Every record and marker of `topic-partition` below its high watermark, in order.
/// Batches that cannot be decoded are skipped with an error logged.
pub async fn read_all(
    replicas: &ReplicaManager,
    (topic, partition): (&str, i32),
) -> Result<Vec<Entry>, ReplicaError> {
    let target = replicas.partition(topic, partition)?;
    let read = tokio::task::spawn_blocking(move || read_partition(&target));
    match read.await {
        Ok(result) => result,
        Err(join_error) => {
            tracing::error!(topic, partition, %join_error, "loading task failed");
            Ok(Vec::new())
        }
    }
}

fn read_partition(partition: &Partition) -> Result<Vec<Entry>, ReplicaError> {
    let high_watermark = partition.high_watermark();
    let mut offset = partition.offsets().log_start_offset;
    let mut entries = Vec::new();
    while offset < high_watermark {
        let bytes = partition
            .log()
            .read(offset, high_watermark, LOAD_READ_BYTES, true)
            .map_err(|e| partition.log_error(e))?;
        let Some(next) = BatchIter::new(&bytes)
            .last()
            .map(|(_, h)| Offset(h.last_offset() + 1))
        else {
            break;
        };
        for (position, header) in BatchIter::new(&bytes) {
            let batch = bytes.slice(position..position + header.size);
            if header.is_control() {
                if let Some(marker) = control::parse(&batch, &header) {
                    entries.push(Entry::Marker {
                        producer_id: ProducerId(header.producer_id),
                        commit: marker.commit,
                    });
                }
                continue;
            }
            let producer = header
                .is_transactional()
                .then_some(ProducerId(header.producer_id));
            decode_batch(partition, batch, producer, &mut entries);
        }
        offset = next;
    }
    Ok(entries)
}

fn decode_batch(
    partition: &Partition,
    mut batch: Bytes,
    producer: Option<ProducerId>,
    out: &mut Vec<Entry>,
) {
    let sets = match RecordBatchDecoder::decode_all(&mut batch) {
        Ok(sets) => sets,
        Err(error) => {
            tracing::error!(partition = %partition.topic_partition, %error, "cannot decode a coordinator batch");
            return;
        }
    };
    for record in sets.into_iter().flat_map(|set| set.records) {
        if let Some(key) = record.key {
            out.push(Entry::Record {
                key,
                value: record.value,
                producer,
            });
        }
    }
}
