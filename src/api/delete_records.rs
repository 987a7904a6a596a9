//! DeleteRecords: moves each partition's log start offset forward (to the high watermark
//! for -1); segments wholly below it are deleted, and fetches below it get
//! OFFSET_OUT_OF_RANGE from then on.

use kafka_protocol::messages::delete_records_request::DeleteRecordsPartition;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::{Broker, HandlerError, Outcome, Request};

/// Answers DeleteRecords.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DeleteRecordsRequest = request.decode()?;
    let answer = |topic: &str, p: &DeleteRecordsPartition| {
        let base = DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
        let moved = broker.on_partition(
            request,
            (Some(crate::acl::Operation::Delete), topic),
            p.partition_index,
            |partition| partition.delete_records(crate::ids::Offset(p.offset)),
        );
        match moved {
            Ok(low_watermark) => base.with_low_watermark(low_watermark.0),
            Err(code) => base.with_low_watermark(-1).with_error_code(code.code()),
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
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    request.respond(&DeleteRecordsResponse::default().with_topics(topics))
}
