//! DescribeConfigs for topics (every topic config with its value and source, as Apache
//! Kafka lists them), for this broker (every broker key highwater reads) and for its
//! loggers (each with its level, `kafka-configs --entity-type broker-loggers`) and for
//! groups (their defaults: no group has configs of its own yet). ListConfigResources
//! (`kafka-configs --describe --entity-type groups` asks it first) lists what has configs.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::config::topic::{self, ConfigSource, ConfigType};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_GROUP: i8 = 32;

/// The group configs (KIP-848 and its share and streams groups) as Kafka 4.1 lists them,
/// with the broker key each one's default comes from, else the fixed default. No group
/// has configs of its own here, so each is its default.
const GROUP_CONFIGS: &[(&str, Option<&str>, &str, ConfigType)] = &[
    (
        "consumer.heartbeat.interval.ms",
        Some("group.consumer.heartbeat.interval.ms"),
        "5000",
        ConfigType::Int,
    ),
    (
        "consumer.session.timeout.ms",
        Some("group.consumer.session.timeout.ms"),
        "45000",
        ConfigType::Int,
    ),
    (
        "share.auto.offset.reset",
        None,
        "latest",
        ConfigType::String,
    ),
    ("share.heartbeat.interval.ms", None, "5000", ConfigType::Int),
    (
        "share.isolation.level",
        None,
        "read_uncommitted",
        ConfigType::String,
    ),
    (
        "share.record.lock.duration.ms",
        None,
        "30000",
        ConfigType::Int,
    ),
    ("share.session.timeout.ms", None, "45000", ConfigType::Int),
    (
        "streams.heartbeat.interval.ms",
        None,
        "5000",
        ConfigType::Int,
    ),
    ("streams.num.standby.replicas", None, "0", ConfigType::Int),
    ("streams.session.timeout.ms", None, "45000", ConfigType::Int),
];

/// One config entry to report.
struct Entry {
    name: String,
    value: String,
    source: ConfigSource,
    config_type: ConfigType,
}

fn entries_for(
    broker: &Broker,
    resource: &DescribeConfigsResource,
) -> Result<Vec<Entry>, ResponseError> {
    let name = resource.resource_name.as_str();
    match resource.resource_type {
        RESOURCE_TOPIC => {
            let image = broker.image();
            let topic_image = image
                .topic(name)
                .ok_or(refusal_error(Refusal::UnknownTopic))?;
            Ok(topic::resolve(&broker.config, &topic_image.configs)
                .into_iter()
                .map(|c| Entry {
                    name: c.key.name.into(),
                    value: c.value,
                    source: c.source,
                    config_type: c.key.config_type,
                })
                .collect())
        }
        RESOURCE_BROKER => {
            if !name.is_empty() && name != broker.config.node_id.to_string() {
                return Err(refusal_error(Refusal::InvalidRequest));
            }
            Ok(broker
                .config
                .values
                .iter()
                .map(|(key, value)| Entry {
                    name: key.clone(),
                    value: value.clone(),
                    source: if broker.config.explicit.contains_key(key) {
                        ConfigSource::StaticBrokerConfig
                    } else {
                        ConfigSource::DefaultConfig
                    },
                    config_type: ConfigType::String,
                })
                .collect())
        }
        RESOURCE_GROUP => Ok(GROUP_CONFIGS
            .iter()
            .map(|(name, broker_key, fallback, config_type)| Entry {
                name: (*name).to_string(),
                value: broker_key
                    .and_then(|k| broker.config.values.get(k).cloned())
                    .unwrap_or_else(|| (*fallback).to_string()),
                source: ConfigSource::DefaultConfig,
                config_type: *config_type,
            })
            .collect()),
        RESOURCE_BROKER_LOGGER => {
            if name != broker.config.node_id.to_string() {
                return Err(refusal_error(Refusal::InvalidRequest));
            }
            let loggers = crate::log_levels::describe().into_iter();
            Ok(loggers
                .map(|(name, value)| Entry {
                    name,
                    value,
                    source: ConfigSource::DynamicBrokerLoggerConfig,
                    config_type: ConfigType::String,
                })
                .collect())
        }
        _ => Err(refusal_error(Refusal::InvalidRequest)),
    }
}

fn describe(
    broker: &Broker,
    request: &Request,
    body: &DescribeConfigsRequest,
    resource: &DescribeConfigsResource,
) -> DescribeConfigsResult {
    let base = DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let entries = match entries_for(broker, resource) {
        Ok(entries) => entries,
        Err(code) => {
            tracing::debug!(client = %request.client, api = "DescribeConfigs", resource = %resource.resource_name.as_str(), error = ?code, "refused");
            return base
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&format!("{code:?}"))));
        }
    };
    let wanted = resource
        .configuration_keys
        .as_ref()
        .filter(|keys| !keys.is_empty());
    let configs = entries
        .into_iter()
        .filter(|e| wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name)))
        .map(|e| {
            let mut result = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(&e.name))
                .with_value(Some(str_bytes(&e.value)))
                .with_config_source(e.source as i8);
            if body.include_synonyms {
                let synonym = DescribeConfigsSynonym::default()
                    .with_name(str_bytes(&e.name))
                    .with_value(Some(str_bytes(&e.value)))
                    .with_source(e.source as i8);
                result = result.with_synonyms(vec![synonym]);
            }
            if request.version() >= 3 {
                // No documentation is sent (null, as Kafka without include_documentation).
                result = result
                    .with_config_type(e.config_type as i8)
                    .with_documentation(None);
            }
            result
        })
        .collect();
    base.with_configs(configs)
}

/// Answers DescribeConfigs.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeConfigsRequest = request.decode()?;
    let results = body
        .resources
        .iter()
        .map(|r| describe(broker, request, &body, r))
        .collect();
    request.respond(&DescribeConfigsResponse::default().with_results(results))
}

/// Answers ListConfigResources: v0 lists client-metrics resources only, v1 the resource
/// types asked (all when none): topics, brokers and their loggers by id, and the groups and
/// client-metrics resources that have configs of their own (none here). A type the version
/// does not list is UNSUPPORTED_VERSION, as Kafka answers.
pub fn list_resources(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    use kafka_protocol::messages::list_config_resources_response::ConfigResource;
    use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
    const RESOURCE_CLIENT_METRICS: i8 = 16;
    let body: ListConfigResourcesRequest = request.decode()?;
    let supported: &[i8] = match request.version() {
        0 => &[RESOURCE_CLIENT_METRICS],
        _ => &[
            RESOURCE_TOPIC,
            RESOURCE_BROKER,
            RESOURCE_BROKER_LOGGER,
            RESOURCE_CLIENT_METRICS,
            RESOURCE_GROUP,
        ],
    };
    let asked: Vec<i8> = match body.resource_types.is_empty() {
        true => supported.to_vec(),
        false => body.resource_types.clone(),
    };
    if asked.iter().any(|t| !supported.contains(t)) {
        tracing::debug!(client = %request.client, ?asked, "ListConfigResources: unsupported type");
        let code = refusal_error(Refusal::UnsupportedVersion).code();
        return request.respond(&ListConfigResourcesResponse::default().with_error_code(code));
    }
    let image = broker.image();
    let mut resources = Vec::new();
    let mut add = |name: String, resource_type: i8| {
        resources.push(
            ConfigResource::default()
                .with_resource_name(str_bytes(&name))
                .with_resource_type(resource_type),
        );
    };
    for resource_type in asked {
        match resource_type {
            RESOURCE_TOPIC => image
                .topics
                .keys()
                .for_each(|t| add(t.clone(), resource_type)),
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => image
                .brokers
                .iter()
                .for_each(|b| add(b.node_id.to_string(), resource_type)),
            _ => {}
        }
    }
    request.respond(&ListConfigResourcesResponse::default().with_config_resources(resources))
}
