//! Writes the coordinator's records to its `__consumer_offsets` partition and reads a
//! partition back when its groups are loaded (through the coordinators' shared journal,
//! `replica::journal`).

use std::time::Duration;

use super::error::GroupError;
use super::records::CoordinatorRecord;
use super::OFFSETS_TOPIC;
use crate::replica::journal::{self, Entry, TxnProducer};
use crate::replica::{ReplicaError, ReplicaManager};

/// Where a write ended, to wait until it is replicated.
#[derive(Debug, Default)]
pub struct Written(journal::Written);

impl Written {
    /// Waits until the high watermark passes the written records, so that an answer never
    /// promises what a leader change could lose.
    pub async fn replicated(self, group: &str, timeout: Duration) -> Result<(), GroupError> {
        match self.0.replicated(timeout).await {
            true => Ok(()),
            false => Err(GroupError::Timeout {
                group: group.to_string(),
                timeout_ms: timeout.as_millis() as u64,
            }),
        }
    }
}

fn storage(group: &str, partition: i32) -> impl Fn(ReplicaError) -> GroupError + '_ {
    move |source| GroupError::Storage {
        group: group.to_string(),
        partition,
        source: Box::new(source),
    }
}

/// Appends `records` to `__consumer_offsets-{partition}` as one batch, transactional
/// when `producer` is given (a transactional offset commit).
pub fn write_as(
    replicas: &ReplicaManager,
    partition: i32,
    group: &str,
    records: &[CoordinatorRecord],
    producer: Option<TxnProducer>,
) -> Result<Written, GroupError> {
    let encoded: Vec<_> = records.iter().map(CoordinatorRecord::encode).collect();
    journal::write(replicas, (OFFSETS_TOPIC, partition), &encoded, producer)
        .map(Written)
        .map_err(storage(group, partition))
}

/// Appends `records` to `__consumer_offsets-{partition}` as one batch.
pub fn write(
    replicas: &ReplicaManager,
    partition: i32,
    group: &str,
    records: &[CoordinatorRecord],
) -> Result<Written, GroupError> {
    write_as(replicas, partition, group, records, None)
}

/// A record read back: plain, or part of a producer's transaction.
#[derive(Debug)]
pub enum Loaded {
    Record(CoordinatorRecord, Option<i64>),
    Marker { producer_id: i64, commit: bool },
}

/// Every record of `__consumer_offsets-{partition}` below its high watermark, in order.
/// Records that cannot be decoded are skipped with an error logged.
pub async fn read_all(
    replicas: &ReplicaManager,
    partition: i32,
) -> Result<Vec<Loaded>, GroupError> {
    let entries = journal::read_all(replicas, (OFFSETS_TOPIC, partition))
        .await
        .map_err(storage("", partition))?;
    let mut loaded = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry {
            Entry::Marker {
                producer_id,
                commit,
            } => loaded.push(Loaded::Marker {
                producer_id: producer_id.0,
                commit,
            }),
            Entry::Record {
                key,
                value,
                producer,
            } => match CoordinatorRecord::decode(&key, value.as_deref()) {
                Ok(Some(decoded)) => {
                    loaded.push(Loaded::Record(decoded, producer.map(|p| p.0)));
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(partition, %error, "skipping an undecodable record");
                }
            },
        }
    }
    Ok(loaded)
}
