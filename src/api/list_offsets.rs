//! ListOffsets: earliest (-2), latest (-1, the high watermark or, for read_committed, the
//! last stable offset), max timestamp (-3), earliest local (-4), latest tiered (-5), or the
//! first record whose timestamp is at or after a given time (-1 offset past the end).

use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::{Broker, HandlerError, Outcome, Request};
use crate::ids::LeaderEpoch;
use crate::replica::Partition;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// The leader epoch in which `offset` was written, -1 if unknown.
fn epoch_of(partition: &Partition, offset: i64) -> i32 {
    let log = partition.log();
    log.epoch_cache()
        .epoch_at(crate::ids::Offset(offset))
        .map_or(-1, |epoch| epoch.0)
}

/// `isolation_level` of a read_committed client.
const READ_COMMITTED: i8 = 1;

/// (timestamp, offset) for one partition's query; read_committed clients see nothing at
/// or past the last stable offset, others nothing past the high watermark.
fn lookup(partition: &Partition, timestamp: i64, isolation_level: i8) -> (i64, i64) {
    let offsets = partition.offsets();
    let fetchable = match isolation_level {
        READ_COMMITTED => offsets.last_stable_offset,
        _ => offsets.high_watermark,
    };
    let found = |f: Option<crate::log::timestamp_lookup::TimestampAndOffset>| {
        f.filter(|f| f.offset < fetchable)
            .map_or((-1, -1), |f| (f.timestamp, f.offset.0))
    };
    match timestamp {
        LATEST => (-1, fetchable.0),
        EARLIEST | EARLIEST_LOCAL => (-1, offsets.log_start_offset.0),
        LATEST_TIERED => (-1, -1),
        MAX_TIMESTAMP => found(partition.log().offset_of_max_timestamp()),
        target => found(partition.log().offset_for_timestamp(target)),
    }
}

/// Answers ListOffsets.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ListOffsetsRequest = request.decode()?;
    let answer = |topic: &str, p: &ListOffsetsPartition| {
        let base = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
        let found = broker.on_partition(
            request,
            (Some(crate::acl::Operation::Describe), topic),
            p.partition_index,
            |partition| {
                partition.check_leader_epoch(LeaderEpoch(p.current_leader_epoch))?;
                let (timestamp, offset) = lookup(partition, p.timestamp, body.isolation_level);
                let known = offset >= 0 && request.version() >= 4;
                Ok((
                    timestamp,
                    offset,
                    if known {
                        epoch_of(partition, offset)
                    } else {
                        -1
                    },
                ))
            },
        );
        match found {
            Ok((timestamp, offset, epoch)) => base
                .with_timestamp(timestamp)
                .with_offset(offset)
                .with_leader_epoch(epoch),
            Err(code) => base
                .with_error_code(code.code())
                .with_timestamp(-1)
                .with_offset(-1),
        }
    };
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| answer(&topic.name.0, p))
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    request.respond(&ListOffsetsResponse::default().with_topics(topics))
}
