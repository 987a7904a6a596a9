//! Metadata: brokers, cluster id, controller and every requested topic's partitions, from
//! the current metadata image. Unknown topics are created with the broker defaults when
//! both `auto.create.topics.enable` and the request allow it, and then described at once.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::authorized_operations;
use super::errors::admin_error;
use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, topic_name, topics, Broker, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType};
use crate::metadata::{validate_topic_name, MetadataImage, TopicImage, NO_LEADER};

/// What a request names: a topic by name or by id.
enum Wanted {
    Name(String),
    Id(Uuid),
}

/// The topics asked for. As in Kafka's KafkaApis, a request naming any non-zero topic id
/// is answered by id alone: Java clients asking by id leave the name empty, not null.
fn wanted_topics(request: &Request, body: &MetadataRequest) -> Option<Vec<Wanted>> {
    let topics = body.topics.as_ref()?;
    if request.version() == 0 && topics.is_empty() {
        return None;
    }
    if topics.iter().any(|t| !t.topic_id.is_nil()) {
        let ids = topics.iter().filter(|t| !t.topic_id.is_nil());
        return Some(ids.map(|t| Wanted::Id(t.topic_id)).collect());
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

fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().copied().map(BrokerId).collect()
}

/// Describes one topic of the image: a partition whose leader is not an unfenced broker
/// gets LEADER_NOT_AVAILABLE and leader -1, and replicas on fenced or unknown brokers or
/// on a failed log directory are listed as offline, as Kafka's metadata cache does.
pub fn describe_topic(
    version: i16,
    image: &MetadataImage,
    topic: &TopicImage,
) -> MetadataResponseTopic {
    let alive = |id: i32| image.broker(id).is_some_and(|b| !b.fenced);
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, p)| {
            let leader = if alive(p.leader) { p.leader } else { NO_LEADER };
            let on_failed_dir = |r: i32| {
                image.broker(r).is_some_and(|b| {
                    b.offline_replicas
                        .contains(&(topic.name.clone(), index as i32))
                })
            };
            let offline: Vec<i32> = p
                .replicas
                .iter()
                .copied()
                .filter(|r| !alive(*r) || on_failed_dir(*r))
                .collect();
            let response = MetadataResponsePartition::default()
                .with_partition_index(index as i32)
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(if version >= 7 { p.leader_epoch } else { -1 })
                .with_replica_nodes(broker_ids(&p.replicas))
                .with_isr_nodes(broker_ids(&p.isr))
                .with_offline_replicas(broker_ids(&offline));
            match leader {
                NO_LEADER => response.with_error_code(refusal_error(Refusal::NoLeader).code()),
                _ => response,
            }
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

async fn topic_by_name(
    broker: &Broker,
    request: &Request,
    name: &str,
    auto_create: bool,
) -> MetadataResponseTopic {
    let image = broker.image();
    let denied = || {
        error_topic(
            Some(name),
            Uuid::nil(),
            refusal_error(Refusal::TopicAuthorizationFailed),
        )
    };
    if !broker.authorize(request, Operation::Describe, (ResourceType::Topic, name)) {
        return denied();
    }
    if let Some(topic) = image.topic(name) {
        return describe_topic(request.version(), &image, topic);
    }
    if validate_topic_name(name).is_err() {
        return error_topic(
            Some(name),
            Uuid::nil(),
            refusal_error(Refusal::InvalidTopic),
        );
    }
    if !auto_create {
        return error_topic(
            Some(name),
            Uuid::nil(),
            refusal_error(Refusal::UnknownTopic),
        );
    }
    // Auto-creation asks CREATE on the cluster, or on the topic, as Kafka does.
    let may_create = broker.authorize_cluster(request, Operation::Create)
        || broker.authorize(request, Operation::Create, (ResourceType::Topic, name));
    if !may_create {
        return denied();
    }
    match topics::create_with_defaults(broker, name).await {
        Ok(()) => match broker.image().topic(name) {
            Some(topic) => describe_topic(request.version(), &broker.image(), topic),
            None => error_topic(Some(name), Uuid::nil(), refusal_error(Refusal::NoLeader)),
        },
        Err(error) => {
            let code = admin_error(&error);
            tracing::warn!(client = %request.client, topic = %name, %error, "auto-creation failed");
            error_topic(Some(name), Uuid::nil(), code)
        }
    }
}

/// A topic asked for by id: described, or why not (an unknown id, or one the principal may
/// not describe, whose name is then not told).
fn topic_by_id(broker: &Broker, request: &Request, id: Uuid) -> MetadataResponseTopic {
    let image = broker.image();
    match image.topic_by_id(id) {
        Some(topic)
            if broker.authorize(
                request,
                Operation::Describe,
                (ResourceType::Topic, &topic.name),
            ) =>
        {
            describe_topic(request.version(), &image, topic)
        }
        Some(_) => error_topic(None, id, refusal_error(Refusal::TopicAuthorizationFailed)),
        None => error_topic(None, id, refusal_error(Refusal::UnknownTopicId)),
    }
}

/// `topic` with the operations the principal may do on it, when asked (KIP-430).
fn with_operations(
    broker: &Broker,
    request: &Request,
    asked: bool,
    topic: MetadataResponseTopic,
) -> MetadataResponseTopic {
    let asked = asked && topic.error_code == 0;
    let name = topic
        .name
        .as_ref()
        .map(|n| n.0.to_string())
        .unwrap_or_default();
    let operations = match asked {
        true => broker.authorized_operations(
            request,
            (ResourceType::Topic, &name),
            authorized_operations::TOPIC,
        ),
        false => authorized_operations::NOT_ASKED,
    };
    topic.with_topic_authorized_operations(operations)
}

/// Answers Metadata.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: MetadataRequest = request.decode()?;
    let allow = request.version() < 4 || body.allow_auto_topic_creation;
    let auto_create = allow && broker.config.auto_create_topics_enable;
    let topics = match wanted_topics(request, &body) {
        None => {
            // Every topic the principal may describe; the others are left out, as Kafka
            // leaves them out.
            let image = broker.image();
            image
                .topics
                .values()
                .filter(|t| {
                    broker.permits(request, Operation::Describe, (ResourceType::Topic, &t.name))
                })
                .map(|t| describe_topic(request.version(), &image, t))
                .collect()
        }
        Some(wanted) => {
            let mut topics = Vec::with_capacity(wanted.len());
            for w in &wanted {
                topics.push(match w {
                    Wanted::Name(name) => topic_by_name(broker, request, name, auto_create).await,
                    Wanted::Id(id) => topic_by_id(broker, request, *id),
                });
            }
            topics
        }
    };
    let asked = body.include_topic_authorized_operations;
    let topics = topics
        .into_iter()
        .map(|t| with_operations(broker, request, asked, t))
        .collect();
    // Cluster operations moved to DescribeCluster after v10 (KIP-700).
    let cluster_asked = body.include_cluster_authorized_operations && request.version() <= 10;
    let image = broker.image();
    let brokers = image
        .unfenced_brokers()
        .filter_map(|b| {
            let (host, port) = b.endpoint(&request.listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.node_id))
                    .with_host(str_bytes(host))
                    .with_port(i32::from(port))
                    .with_rack(b.rack.as_deref().map(str_bytes)),
            )
        })
        .collect();
    let response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id((request.version() >= 2).then(|| str_bytes(&image.cluster_id)))
        .with_controller_id(BrokerId(if request.version() >= 1 {
            image.controller_for_clients()
        } else {
            -1
        }))
        .with_topics(topics)
        .with_cluster_authorized_operations(match cluster_asked {
            true => broker.authorized_operations(
                request,
                crate::acl::CLUSTER,
                authorized_operations::CLUSTER,
            ),
            false => authorized_operations::NOT_ASKED,
        });
    request.respond(&response)
}
