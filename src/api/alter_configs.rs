//! IncrementalAlterConfigs (KIP-339) and the legacy AlterConfigs: SET and DELETE (APPEND and
//! SUBTRACT on list-valued keys too) of topic config overrides, of dynamic broker configs
//! (one broker's, or the cluster-wide default under an empty name) and of group configs,
//! validated and committed by the active controller; and this broker's logger levels
//! (BROKER_LOGGER), changed live.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::errors::controller_error;
use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::acl::Operation;
use crate::config::ConfigMap;
use crate::controller::state::ConfigResource;
use crate::controller::ControllerRequest;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_GROUP: i8 = 32;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// The new value of `key` after `operation` (`None`: remove the override), or why not.
fn apply_operation(
    current: Option<&str>,
    operation: i8,
    value: Option<&str>,
) -> Result<Option<String>, &'static str> {
    let items = |v: Option<&str>| -> Vec<String> {
        v.unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .map(str::to_string)
            .collect()
    };
    match operation {
        OP_SET => value
            .map(|v| Some(v.to_string()))
            .ok_or("SET needs a value"),
        OP_DELETE => Ok(None),
        OP_APPEND => {
            let mut list = items(current);
            list.extend(
                items(value)
                    .into_iter()
                    .filter(|i| !items(current).contains(i)),
            );
            Ok(Some(list.join(",")))
        }
        OP_SUBTRACT => {
            let removed = items(value);
            let list: Vec<String> = items(current)
                .into_iter()
                .filter(|i| !removed.contains(i))
                .collect();
            Ok(Some(list.join(",")))
        }
        _ => Err("unknown config operation"),
    }
}

/// What a config change is made to.
#[derive(Debug)]
enum Target {
    Topic(String),
    Other(ConfigResource),
}

/// The target of a change to resource `name` of `resource_type`: a topic, a broker (this
/// one by id, or every broker under an empty name) or a group.
fn target(
    broker: &Broker,
    resource_type: i8,
    name: &str,
) -> Result<Target, (ResponseError, String)> {
    let invalid = |reason: String| (refusal_error(Refusal::InvalidRequest), reason);
    match resource_type {
        RESOURCE_TOPIC => Ok(Target::Topic(name.to_string())),
        RESOURCE_BROKER if name.is_empty() => Ok(Target::Other(ConfigResource::Broker(None))),
        RESOURCE_BROKER => match name.parse::<i32>() {
            Ok(id) if id == broker.config.node_id => {
                Ok(Target::Other(ConfigResource::Broker(Some(id))))
            }
            Ok(id) => Err(invalid(format!(
                "Unexpected broker id, expected {}, but received {id}",
                broker.config.node_id
            ))),
            Err(_) => Err(invalid(format!("Invalid broker name {name}"))),
        },
        RESOURCE_GROUP if !name.is_empty() => {
            Ok(Target::Other(ConfigResource::Group(name.to_string())))
        }
        _ => Err(invalid(format!(
            "configs of resource type {resource_type} named {name:?} cannot be altered"
        ))),
    }
}

/// The configs `target` has now (topic overrides, dynamic broker configs, group configs).
fn current_configs(broker: &Broker, target: &Target) -> Result<ConfigMap, (ResponseError, String)> {
    let image = broker.image();
    match target {
        Target::Topic(name) => {
            let topic = image.topic(name).ok_or_else(|| {
                let reason = format!("unknown topic {name}");
                (refusal_error(Refusal::UnknownTopic), reason)
            })?;
            Ok(topic.configs.clone())
        }
        Target::Other(ConfigResource::Broker(id)) => {
            let key = id.map(|id| id.to_string()).unwrap_or_default();
            Ok(image.broker_configs.get(&key).cloned().unwrap_or_default())
        }
        Target::Other(ConfigResource::Group(group)) => Ok(image.group_configs(group).clone()),
    }
}

async fn alter(
    broker: &Broker,
    request: &Request,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let name = resource.resource_name.to_string();
    let asked = (resource.resource_type, name.as_str());
    if let Some(refused) = broker.config_refusal(request, Operation::AlterConfigs, asked) {
        return Err((refused, "Authorization failed.".to_string()));
    }
    if resource.resource_type == RESOURCE_BROKER_LOGGER {
        return alter_loggers(broker, resource, validate_only);
    }
    let target = target(broker, resource.resource_type, &name)?;
    let current = current_configs(broker, &target)?;
    let mut changes = Vec::with_capacity(resource.configs.len());
    for config in &resource.configs {
        let key = config.name.to_string();
        let current = current.get(&key).map(String::as_str);
        let value = config.value.as_ref().map(|v| v.as_str());
        let new = apply_operation(current, config.config_operation, value).map_err(|reason| {
            (
                refusal_error(Refusal::InvalidRequest),
                format!("{key}: {reason}"),
            )
        })?;
        changes.push((key, new));
    }
    commit(broker, target, changes, validate_only).await
}

/// Has the active controller validate and (unless `validate_only`) commit `changes` to
/// `target`'s configs (`None` removes one).
async fn commit(
    broker: &Broker,
    target: Target,
    changes: Vec<(String, Option<String>)>,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let request = match target {
        Target::Topic(name) => ControllerRequest::AlterTopicConfigs {
            name,
            changes,
            validate_only,
        },
        Target::Other(resource) => ControllerRequest::AlterConfigs {
            resource,
            changes,
            validate_only,
        },
    };
    broker
        .controller
        .request(request)
        .await
        .map(|_| ())
        .map_err(|error| (controller_error(&error), error.to_string()))
}

/// Sets (SET) or resets to the root's level (DELETE) this broker's loggers, live; every
/// change is checked before any is made.
fn alter_loggers(
    broker: &Broker,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    if resource.resource_name.as_str() != broker.config.node_id.to_string() {
        let reason = format!(
            "broker {} is not this broker",
            resource.resource_name.as_str()
        );
        return Err((refusal_error(Refusal::InvalidRequest), reason));
    }
    let mut changes = Vec::with_capacity(resource.configs.len());
    for config in &resource.configs {
        let logger = config.name.to_string();
        let level = match config.config_operation {
            OP_SET => config.value.as_ref().map(|v| v.to_string()),
            OP_DELETE => None,
            _ => {
                let reason = format!(
                    "{logger}: APPEND and SUBTRACT are not allowed for the BROKER_LOGGER resource"
                );
                return Err((refusal_error(Refusal::InvalidRequest), reason));
            }
        };
        changes.push((logger, level));
    }
    let invalid =
        |e: crate::log_levels::LevelError| (refusal_error(Refusal::InvalidConfig), e.to_string());
    for (logger, level) in &changes {
        crate::log_levels::check(logger, level.as_deref()).map_err(invalid)?;
    }
    if !validate_only {
        for (logger, level) in &changes {
            crate::log_levels::set(logger, level.as_deref()).map_err(invalid)?;
        }
    }
    Ok(())
}

/// Answers the legacy AlterConfigs (sarama's and kafka-python's `alter_configs`): a
/// topic's overrides, a broker's dynamic configs or a group's configs become exactly the
/// configs given (the others revert to their defaults), as Kafka does.
pub async fn handle_legacy(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as Legacy;
    use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
    let body: AlterConfigsRequest = request.decode()?;
    let mut responses = Vec::with_capacity(body.resources.len());
    for resource in &body.resources {
        let name = resource.resource_name.to_string();
        let outcome = async {
            let asked = (resource.resource_type, name.as_str());
            if let Some(refused) = broker.config_refusal(request, Operation::AlterConfigs, asked) {
                return Err((refused, "Authorization failed.".to_string()));
            }
            let target = target(broker, resource.resource_type, &name)?;
            let current = current_configs(broker, &target)?;
            let given: Vec<(String, Option<String>)> = resource
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.to_string(),
                        c.value.as_ref().map(ToString::to_string),
                    )
                })
                .collect();
            let removed = current
                .keys()
                .filter(|k| !given.iter().any(|(g, _)| g == *k))
                .map(|k| (k.clone(), None));
            let changes = removed.chain(given.iter().cloned()).collect();
            commit(broker, target, changes, body.validate_only).await
        };
        let base = Legacy::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        responses.push(match outcome.await {
            Ok(()) => base,
            Err((code, message)) => {
                tracing::debug!(client = %request.client, api = "AlterConfigs",
                    resource = %name, error = %message, "refused");
                base.with_error_code(code.code())
                    .with_error_message(Some(str_bytes(&message)))
            }
        });
    }
    request.respond(&AlterConfigsResponse::default().with_responses(responses))
}

/// Answers IncrementalAlterConfigs.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: IncrementalAlterConfigsRequest = request.decode()?;
    let mut responses = Vec::with_capacity(body.resources.len());
    for resource in &body.resources {
        let base = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        responses.push(
            match alter(broker, request, resource, body.validate_only).await {
                Ok(()) => base,
                Err((code, message)) => {
                    tracing::debug!(client = %request.client, api = "IncrementalAlterConfigs",
                    resource = %resource.resource_name.as_str(), error = %message, "refused");
                    base.with_error_code(code.code())
                        .with_error_message(Some(str_bytes(&message)))
                }
            },
        );
    }
    request.respond(&IncrementalAlterConfigsResponse::default().with_responses(responses))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_follow_kafkas_meaning() {
        assert_eq!(
            apply_operation(None, OP_SET, Some("5")),
            Ok(Some("5".into()))
        );
        assert_eq!(apply_operation(Some("5"), OP_DELETE, None), Ok(None));
        let appended = apply_operation(Some("a,b"), OP_APPEND, Some("b,c"));
        assert_eq!(appended, Ok(Some("a,b,c".into())));
        let subtracted = apply_operation(Some("a,b,c"), OP_SUBTRACT, Some("b"));
        assert_eq!(subtracted, Ok(Some("a,c".into())));
        assert!(apply_operation(None, 9, None).is_err());
    }
}
