//! DescribeTopicPartitions (API 75, KIP-966), which the 4.x AdminClient uses for
//! `describeTopics` and `kafka-topics --describe`: the partitions of the named topics (all
//! topics when none is named), sorted by topic name then index, with their eligible leader
//! replicas, from a cursor and up to `response_partition_limit` partitions (capped by
//! `max.request.partition.size.limit`), as Kafka pages them.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};

use super::errors::refusal_error;
use super::metadata::describe_topic;
use super::refusal::Refusal;
use super::{topic_name, Broker, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType};
use crate::metadata::{MetadataImage, TopicImage};

/// The Metadata version whose fields this API carries (topic ids, leader epochs).
const METADATA_VERSION: i16 = 12;

/// One topic's partitions from `first` on, at most `limit` of them.
fn topic_partitions(
    broker: &Broker,
    request: &Request,
    topic: &TopicImage,
    first: i32,
    limit: usize,
) -> DescribeTopicPartitionsResponseTopic {
    let image = broker.image();
    let described = describe_topic(METADATA_VERSION, &image, topic);
    let partitions = described
        .partitions
        .into_iter()
        .filter(|p| p.partition_index >= first)
        .take(limit)
        .map(|p| {
            let image = topic.partition(p.partition_index);
            let ids = |ids: &[i32]| ids.iter().copied().map(BrokerId).collect();
            let elr = image.map(|image| ids(&image.elr));
            let last_known_elr = image.map(|image| ids(&image.last_known_elr));
            DescribeTopicPartitionsResponsePartition::default()
                .with_error_code(p.error_code)
                .with_partition_index(p.partition_index)
                .with_leader_id(p.leader_id)
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replica_nodes)
                .with_isr_nodes(p.isr_nodes)
                .with_eligible_leader_replicas(elr)
                .with_last_known_elr(last_known_elr)
                .with_offline_replicas(p.offline_replicas)
        })
        .collect();
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.topic_id)
        .with_is_internal(described.is_internal)
        .with_topic_authorized_operations(broker.authorized_operations(
            request,
            (ResourceType::Topic, &topic.name),
            super::authorized_operations::TOPIC,
        ))
        .with_partitions(partitions)
}

/// The topic `name`, or why it is not described: a topic the principal may not describe
/// is refused whether it exists or not (Kafka), then an unknown one.
fn described_or_refused<'a>(
    broker: &Broker,
    request: &Request,
    image: &'a MetadataImage,
    name: &str,
) -> Result<&'a TopicImage, Refusal> {
    if !broker.authorize(request, Operation::Describe, (ResourceType::Topic, name)) {
        return Err(Refusal::TopicAuthorizationFailed);
    }
    image.topic(name).map(|t| &**t).ok_or(Refusal::UnknownTopic)
}

/// Answers DescribeTopicPartitions.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeTopicPartitionsRequest = request.decode()?;
    let image = broker.image();
    let cap: usize = broker
        .config
        .parse("max.request.partition.size.limit")
        .unwrap_or(2000);
    let mut left = usize::try_from(body.response_partition_limit)
        .unwrap_or(0)
        .clamp(1, cap.max(1));
    let all_topics = body.topics.is_empty();
    let mut names: Vec<String> = match all_topics {
        true => image.topics.keys().cloned().collect(),
        false => body.topics.iter().map(|t| t.name.0.to_string()).collect(),
    };
    names.sort();
    names.dedup();
    let (start_topic, start_partition) = body.cursor.as_ref().map_or((String::new(), 0), |c| {
        (c.topic_name.0.to_string(), c.partition_index)
    });
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names.into_iter().filter(|n| *n >= start_topic) {
        let first = if name == start_topic {
            start_partition
        } else {
            0
        };
        let topic = match described_or_refused(broker, request, &image, &name) {
            Ok(topic) => topic,
            // As Kafka: a topic the principal may not describe is left out of "all topics".
            Err(refused) if all_topics && refused != Refusal::UnknownTopic => continue,
            Err(refused) => {
                topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(topic_name(&name)))
                        .with_error_code(refusal_error(refused).code()),
                );
                continue;
            }
        };
        if left == 0 {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(first),
            );
            break;
        }
        let described = topic_partitions(broker, request, topic, first, left);
        left -= described.partitions.len();
        let last = described
            .partitions
            .last()
            .map_or(first - 1, |p| p.partition_index);
        topics.push(described);
        if left == 0 && last + 1 < topic.partition_count() {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(last + 1),
            );
            break;
        }
    }
    request.respond(
        &DescribeTopicPartitionsResponse::default()
            .with_topics(topics)
            .with_next_cursor(next_cursor),
    )
}
