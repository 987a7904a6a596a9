//! OffsetForLeaderEpoch: the end offset of a leader epoch by Kafka's rule (the start of the
//! next higher epoch, or the log end offset for the latest), with KIP-320 fencing of the
//! caller's current leader epoch. Consumers use it to validate positions after a leader
//! change; followers, to find where their log diverges.

use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{Broker, HandlerError, Outcome, Request};
use crate::ids::LeaderEpoch;

/// Answers OffsetForLeaderEpoch.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: OffsetForLeaderEpochRequest = request.decode()?;
    // A replica asks as the cluster (CLUSTER_ACTION), a client as a describer of the topic;
    // a replica refused is refused on every partition.
    let replica = request.version() >= 3 && body.replica_id.0 >= 0;
    let replica_refused =
        replica && !broker.authorize_cluster(request, crate::acl::Operation::ClusterAction);
    let operation = (!replica).then_some(crate::acl::Operation::Describe);
    let answer = |topic: &str, p: &OffsetForLeaderPartition| {
        let base = EpochEndOffset::default().with_partition(p.partition);
        let found = match replica_refused {
            true => Err(super::errors::refusal_error(
                super::refusal::Refusal::TopicAuthorizationFailed,
            )),
            false => broker.on_partition(request, (operation, topic), p.partition, |partition| {
                partition.check_leader_epoch(LeaderEpoch(p.current_leader_epoch))?;
                let log = partition.log();
                Ok(log
                    .epoch_cache()
                    .end_offset_for(LeaderEpoch(p.leader_epoch), log.log_end_offset()))
            }),
        };
        match found {
            Ok((epoch, end_offset)) => base
                .with_leader_epoch(epoch.0)
                .with_end_offset(end_offset.0),
            Err(code) => base
                .with_error_code(code.code())
                .with_leader_epoch(-1)
                .with_end_offset(-1),
        }
    };
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| answer(&topic.topic.0, p))
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    request.respond(&OffsetForLeaderEpochResponse::default().with_topics(topics))
}
