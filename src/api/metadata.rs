//! Metadata: brokers, cluster id, controller and every requested topic's partitions, from
//! the current metadata image. Unknown topics are created with the broker defaults when
//! both `auto.create.topics.enable` and the request allow it, and then described at once.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::errors::admin_error;
use super::{str_bytes, topic_name, topics, Broker, HandlerError, Outcome, Request};
use crate::metadata::{validate_topic_name, TopicImage};

/// What a request names: a topic by name or by id.
enum Wanted {
    Name(String),
    Id(Uuid),
}

fn wanted_topics(request: &Request, body: &MetadataRequest) -> Option<Vec<Wanted>> {
    let topics = body.topics.as_ref()?;
    if request.version() == 0 && topics.is_empty() {
        return None;
    }
    Some(
        topics
            .iter()
            .map(|t| match &t.name {
                Some(name) => Wanted::Name(name.0.to_string()),
                None => Wanted::Id(t.topic_id),
            })
            .collect(),
    )
}

/// Describes one topic of the image.
pub fn describe_topic(version: i16, topic: &TopicImage) -> MetadataResponseTopic {
    let partitions = (0..topic.partitions)
        .map(|index| {
            let replica = BrokerId(topic.replicas.get(index as usize).copied().unwrap_or(-1));
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(replica)
                .with_leader_epoch(if version >= 7 { topic.leader_epoch } else { -1 })
                .with_replica_nodes(vec![replica])
                .with_isr_nodes(vec![replica])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(if version >= 10 {
            topic.topic_id
        } else {
            Uuid::nil()
        })
        .with_is_internal(crate::metadata::is_internal_topic(&topic.name))
        .with_partitions(partitions)
}

fn error_topic(name: Option<&str>, topic_id: Uuid, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(name.map(topic_name))
        .with_topic_id(topic_id)
        .with_error_code(error.code())
}

fn topic_by_name(
    broker: &Broker,
    request: &Request,
    name: &str,
    auto_create: bool,
) -> MetadataResponseTopic {
    if let Some(topic) = broker.image().topic(name) {
        return describe_topic(request.version(), topic);
    }
    if validate_topic_name(name).is_err() {
        return error_topic(
            Some(name),
            Uuid::nil(),
            ResponseError::InvalidTopicException,
        );
    }
    if !auto_create {
        return error_topic(
            Some(name),
            Uuid::nil(),
            ResponseError::UnknownTopicOrPartition,
        );
    }
    match topics::create_with_defaults(broker, name) {
        Ok(()) => match broker.image().topic(name) {
            Some(topic) => describe_topic(request.version(), topic),
            None => error_topic(Some(name), Uuid::nil(), ResponseError::LeaderNotAvailable),
        },
        Err(error) => {
            let code = admin_error(&error);
            tracing::warn!(client = %request.client, topic = %name, %error, "auto-creation failed");
            error_topic(Some(name), Uuid::nil(), code)
        }
    }
}

/// Answers Metadata.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: MetadataRequest = request.decode()?;
    let allow = request.version() < 4 || body.allow_auto_topic_creation;
    let auto_create = allow && broker.config.auto_create_topics_enable;
    let topics = match wanted_topics(request, &body) {
        None => {
            let image = broker.image();
            image
                .topics
                .values()
                .map(|t| describe_topic(request.version(), t))
                .collect()
        }
        Some(wanted) => wanted
            .iter()
            .map(|w| match w {
                Wanted::Name(name) => topic_by_name(broker, request, name, auto_create),
                Wanted::Id(id) => match broker.image().topic_by_id(*id) {
                    Some(topic) => describe_topic(request.version(), topic),
                    None => error_topic(None, *id, ResponseError::UnknownTopicId),
                },
            })
            .collect(),
    };
    let image = broker.image();
    let brokers = image
        .brokers
        .iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(str_bytes(&b.host))
                .with_port(i32::from(b.port))
        })
        .collect();
    let response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id((request.version() >= 2).then(|| str_bytes(&image.cluster_id)))
        .with_controller_id(BrokerId(if request.version() >= 1 {
            image.controller_id
        } else {
            -1
        }))
        .with_topics(topics);
    request.respond(&response)
}
