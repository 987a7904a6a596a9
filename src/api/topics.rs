//! Topic administration: CreateTopics, DeleteTopics and CreatePartitions. Each change goes
//! through the controller; once it is committed the broker's partitions are brought in line
//! with the new image before the response is sent, so the topic is usable at once.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};
use uuid::Uuid;

use super::errors::admin_error;
use super::errors::refusal_error;
use super::mutation_quota::MutationQuota;
pub use super::refusal::AdminError;
use super::refusal::Refusal;
use super::{str_bytes, topic_name, Broker, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType};
use crate::config::ConfigMap;
use crate::controller::{ControllerError, ErrorKind, NewTopic};

/// How long an auto-creating Metadata request waits for the new topic to reach this
/// broker's image (when the active controller is elsewhere) before answering without it.
const AUTO_CREATE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Creates `name` with the broker's default partitions and configs (Metadata auto-creation)
/// and waits briefly until this broker's image has it. A topic created concurrently by
/// someone else counts as success.
pub async fn create_with_defaults(broker: &Broker, name: &str) -> Result<(), AdminError> {
    let topic = NewTopic {
        name: name.to_string(),
        partitions: -1,
        replication_factor: -1,
        assignments: Vec::new(),
        configs: ConfigMap::new(),
    };
    create_if_missing(broker, &topic).await
}

/// Creates `topic` unless it exists (also when someone else created it meanwhile), and
/// waits (a bounded time) until the metadata shows it.
pub async fn create_if_missing(broker: &Broker, topic: &NewTopic) -> Result<(), AdminError> {
    match broker.controller.create_topic(topic, false).await {
        Ok(_) => {}
        Err(error) if error.kind() == ErrorKind::TopicAlreadyExists => {}
        Err(error) => return Err(error.into()),
    }
    let name = topic.name.as_str();
    let mut images = broker.controller.subscribe();
    let arrived = images.wait_for(|image| image.topic(name).is_some());
    let _ = tokio::time::timeout(AUTO_CREATE_WAIT, arrived).await;
    publish(broker)
}

fn publish(broker: &Broker) -> Result<(), AdminError> {
    broker.publish().map_err(|error| {
        tracing::error!(%error, "cannot open partitions of the new metadata image");
        AdminError::from(error)
    })
}

fn new_topic(topic: &CreatableTopic) -> NewTopic {
    let mut assignments: Vec<_> = topic.assignments.iter().collect();
    assignments.sort_by_key(|a| a.partition_index);
    NewTopic {
        name: topic.name.0.to_string(),
        partitions: topic.num_partitions,
        replication_factor: i32::from(topic.replication_factor),
        assignments: assignments
            .iter()
            .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
            .collect(),
        configs: topic
            .configs
            .iter()
            .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
            .collect::<BTreeMap<_, _>>(),
    }
}

async fn created_result(
    broker: &Broker,
    request: &Request,
    quota: &MutationQuota<'_>,
    topic: &CreatableTopic,
    validate_only: bool,
) -> CreatableTopicResult {
    let base = CreatableTopicResult::default().with_name(topic.name.clone());
    let wanted = new_topic(topic);
    let created = match quota.check(&wanted.name) {
        Ok(()) => broker
            .controller
            .create_topic(&wanted, validate_only)
            .await
            .map_err(AdminError::from)
            .and_then(|image| publish(broker).map(|()| image)),
        Err(error) => Err(error),
    };
    match created {
        Ok(image) => {
            quota.record(image.partitions.len());
            let configs = broker
                .topic_configs(&image.configs)
                .into_iter()
                .map(|c| {
                    CreatableTopicConfigs::default()
                        .with_name(str_bytes(c.key.name))
                        .with_value(Some(str_bytes(&c.value)))
                        .with_config_source(c.source as i8)
                })
                .collect();
            if request.version() < 5 {
                return base;
            }
            let base = base
                .with_num_partitions(image.partition_count())
                .with_replication_factor(
                    image.partitions.first().map_or(0, |p| p.replicas.len()) as i16
                )
                .with_configs(Some(configs));
            match request.version() >= 7 {
                true => base.with_topic_id(image.topic_id),
                false => base,
            }
        }
        Err(error) => {
            let code = admin_error(&error);
            tracing::debug!(client = %request.client, topic = %wanted.name, %error, "CreateTopics refused");
            let base = base
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&error.to_string())));
            match request.version() >= 5 {
                true => base.with_num_partitions(-1).with_replication_factor(-1),
                false => base,
            }
        }
    }
}

/// Answers CreateTopics.
pub async fn create_topics(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: CreateTopicsRequest = request.decode()?;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for topic in &body.topics {
        *seen.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let quota = MutationQuota::new(broker, request, 6);
    let mut results = Vec::with_capacity(body.topics.len());
    for topic in &body.topics {
        if seen[topic.name.0.as_str()] > 1 {
            results.push(
                CreatableTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_error_code(refusal_error(Refusal::InvalidRequest).code())
                    .with_error_message(Some(str_bytes("duplicate topic name in request"))),
            );
            continue;
        }
        let name = topic.name.0.as_str();
        let may_create = broker.authorize_cluster(request, Operation::Create)
            || broker.authorize(request, Operation::Create, (ResourceType::Topic, name));
        if !may_create {
            results.push(
                CreatableTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_error_code(refusal_error(Refusal::TopicAuthorizationFailed).code())
                    .with_error_message(Some(str_bytes("Authorization failed."))),
            );
            continue;
        }
        let created = created_result(broker, request, &quota, topic, body.validate_only);
        results.push(created.await);
    }
    request.respond(&CreateTopicsResponse::default().with_topics(results))
}

/// Answers DeleteTopics (by name, or by topic id from v6).
pub async fn delete_topics(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DeleteTopicsRequest = request.decode()?;
    let mut wanted: Vec<(Option<String>, Uuid)> = body
        .topic_names
        .iter()
        .map(|n| (Some(n.0.to_string()), Uuid::nil()))
        .collect();
    wanted.extend(
        body.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)),
    );
    let quota = MutationQuota::new(broker, request, 5);
    let mut responses = Vec::with_capacity(wanted.len());
    for (name, topic_id) in wanted {
        {
            let image = broker.image();
            let found = match &name {
                Some(name) => image.topic(name).map(|t| (t.name.clone(), t.topic_id)),
                None => image
                    .topic_by_id(topic_id)
                    .map(|t| (t.name.clone(), t.topic_id)),
            };
            let denied = |name: &str| {
                !broker.authorize(request, Operation::Delete, (ResourceType::Topic, name))
            };
            let result = match found {
                // Kafka checks DELETE by name: an unknown name the principal may not delete
                // is refused as not authorized, telling nothing of the topic.
                Some((found_name, _)) if denied(&found_name) => {
                    Err(AdminError::Refused(Refusal::TopicAuthorizationFailed))
                }
                None if name.as_deref().is_some_and(denied) => {
                    Err(AdminError::Refused(Refusal::TopicAuthorizationFailed))
                }
                None if name.is_none() => Err(ControllerError::UnknownTopicId { topic_id }.into()),
                None => Err(ControllerError::UnknownTopic {
                    topic: name.clone().unwrap_or_default(),
                }
                .into()),
                Some((found_name, found_id)) => deleted(broker, &quota, &found_name)
                    .await
                    .map(|()| (found_name, found_id)),
            };
            let version = request.version();
            let (result, name, id) = match result {
                Ok((name, id)) => (DeletableTopicResult::default(), Some(name), id),
                Err(error) => {
                    let failed =
                        DeletableTopicResult::default().with_error_code(admin_error(&error).code());
                    let failed = match version >= 5 {
                        true => failed.with_error_message(Some(str_bytes(&error.to_string()))),
                        false => failed,
                    };
                    (failed, name, topic_id)
                }
            };
            let result = result.with_name(name.as_deref().map(topic_name));
            responses.push(match version >= 6 {
                true => result.with_topic_id(id),
                false => result,
            });
        }
    }
    request.respond(&DeleteTopicsResponse::default().with_responses(responses))
}

/// Deletes `name` under the controller mutation quota.
async fn deleted(broker: &Broker, quota: &MutationQuota<'_>, name: &str) -> Result<(), AdminError> {
    quota.check(name)?;
    let deleted = broker.controller.delete_topic(name).await?;
    quota.record(deleted.partitions.len());
    publish(broker)
}

/// Answers CreatePartitions.
pub async fn create_partitions(
    broker: &Broker,
    request: &Request,
) -> Result<Outcome, HandlerError> {
    let body: CreatePartitionsRequest = request.decode()?;
    let quota = MutationQuota::new(broker, request, 3);
    let mut results = Vec::with_capacity(body.topics.len());
    for topic in &body.topics {
        let name = topic.name.0.as_str();
        let result = match broker.authorize(request, Operation::Alter, (ResourceType::Topic, name))
        {
            false => Err(AdminError::Refused(Refusal::TopicAuthorizationFailed)),
            true => added_partitions(broker, &quota, name, topic.count, body.validate_only).await,
        };
        let base = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match result {
            Ok(()) => base,
            Err(error) => base
                .with_error_code(admin_error(&error).code())
                .with_error_message(Some(str_bytes(&error.to_string()))),
        });
    }
    request.respond(&CreatePartitionsResponse::default().with_results(results))
}

/// Grows `name` to `count` partitions under the controller mutation quota.
async fn added_partitions(
    broker: &Broker,
    quota: &MutationQuota<'_>,
    name: &str,
    count: i32,
    validate_only: bool,
) -> Result<(), AdminError> {
    quota.check(name)?;
    let before = broker.image().topic(name).map_or(0, |t| t.partitions.len());
    broker
        .controller
        .create_partitions(name, count, validate_only)
        .await?;
    quota.record(usize::try_from(count).unwrap_or(0).saturating_sub(before));
    publish(broker)
}
