//! DescribeConfigs for topics (every topic config with its value, source and synonyms, as
//! Apache Kafka lists them), for this broker (every broker key highwater reads, dynamic
//! values applied, static keys read-only) or the cluster-wide dynamic defaults (an empty
//! broker name), for its loggers (each with its level, `kafka-configs --entity-type
//! broker-loggers`) and for groups (their own configs, else the broker's defaults).
//! ListConfigResources (`kafka-configs --describe --entity-type groups` asks it first)
//! lists what has configs.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::config::group::GROUP_KEYS;
use crate::config::topic::{ConfigSource, ConfigType};
use crate::config::{dynamic, security};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_GROUP: i8 = 32;

/// One config entry to report.
struct Entry {
    name: String,
    value: String,
    source: ConfigSource,
    config_type: ConfigType,
    /// Whether it cannot be changed while the broker runs (a static broker key).
    read_only: bool,
    /// Where the value could come from, highest precedence first (name, value, source).
    synonyms: Vec<(String, String, ConfigSource)>,
}

impl Entry {
    /// An entry whose value has one source and no other synonym.
    fn single(name: &str, value: String, source: ConfigSource, config_type: ConfigType) -> Self {
        Entry {
            synonyms: vec![(name.to_string(), value.clone(), source)],
            name: name.to_string(),
            value,
            source,
            config_type,
            read_only: false,
        }
    }
}

fn topic_entries(broker: &Broker, name: &str) -> Result<Vec<Entry>, ResponseError> {
    let image = broker.image();
    let topic_image = image
        .topic(name)
        .ok_or(refusal_error(Refusal::UnknownTopic))?;
    Ok(broker
        .topic_configs(&topic_image.configs)
        .into_iter()
        .map(|c| Entry {
            name: c.key.name.into(),
            value: c.value,
            source: c.source,
            config_type: c.key.config_type,
            read_only: false,
            synonyms: c.synonyms,
        })
        .collect())
}

/// This broker's configs (every key highwater reads, dynamic values applied), or with an
/// empty `name` the cluster-wide dynamic defaults set (as Kafka lists them).
fn broker_entries(broker: &Broker, name: &str) -> Result<Vec<Entry>, ResponseError> {
    let image = broker.image();
    let layers = image.broker_layers(broker.config.node_id);
    if name.is_empty() {
        return Ok(layers
            .cluster_default
            .iter()
            .map(|(key, value)| {
                let source = ConfigSource::DynamicDefaultBrokerConfig;
                Entry::single(key, value.clone(), source, ConfigType::String)
            })
            .collect());
    }
    if name != broker.config.node_id.to_string() {
        return Err(refusal_error(Refusal::InvalidRequest));
    }
    let live = broker.replicas.live_config();
    // A dynamic-only key (a replication throttle) is listed once set, as Kafka lists it.
    let unset_dynamic_only = |key: &str| {
        dynamic::DYNAMIC_ONLY_DEFAULTS
            .iter()
            .any(|(k, _)| *k == key)
            && !layers.own.contains_key(key)
            && !layers.cluster_default.contains_key(key)
    };
    Ok(live
        .values
        .iter()
        .filter(|(key, _)| !unset_dynamic_only(key))
        .map(|(key, value)| {
            let synonyms: Vec<(String, String, ConfigSource)> = layers
                .synonyms(&broker.config, key)
                .into_iter()
                .map(|(source, value)| (key.clone(), value, source))
                .collect();
            Entry {
                name: key.clone(),
                value: value.clone(),
                source: synonyms
                    .first()
                    .map_or(ConfigSource::DefaultConfig, |s| s.2),
                config_type: ConfigType::String,
                read_only: !dynamic::is_dynamic(key),
                synonyms,
            }
        })
        .collect())
}

/// Every group config of group `name`: its own value, else the broker's default.
fn group_entries(broker: &Broker, name: &str) -> Vec<Entry> {
    let image = broker.image();
    let own = image.group_configs(name);
    let live = broker.replicas.live_config();
    GROUP_KEYS
        .iter()
        .map(|key| match own.get(key.name) {
            Some(value) => Entry::single(
                key.name,
                value.clone(),
                ConfigSource::GroupConfig,
                key.config_type,
            ),
            None => Entry::single(
                key.name,
                key.default_value(&live),
                ConfigSource::DefaultConfig,
                key.config_type,
            ),
        })
        .collect()
}

fn entries_for(
    broker: &Broker,
    resource: &DescribeConfigsResource,
) -> Result<Vec<Entry>, ResponseError> {
    let name = resource.resource_name.as_str();
    match resource.resource_type {
        RESOURCE_TOPIC => topic_entries(broker, name),
        RESOURCE_BROKER => broker_entries(broker, name),
        RESOURCE_GROUP => Ok(group_entries(broker, name)),
        RESOURCE_BROKER_LOGGER => {
            if name != broker.config.node_id.to_string() {
                return Err(refusal_error(Refusal::InvalidRequest));
            }
            let loggers = crate::log_levels::describe().into_iter();
            Ok(loggers
                .map(|(name, value)| {
                    let source = ConfigSource::DynamicBrokerLoggerConfig;
                    Entry::single(&name, value, source, ConfigType::String)
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
    let asked = (resource.resource_type, resource.resource_name.as_str());
    let refused = broker.config_refusal(request, crate::acl::Operation::DescribeConfigs, asked);
    let entries = match refused.map_or_else(|| entries_for(broker, resource), Err) {
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
            // A secret is named with no value, as Kafka describes its PASSWORD configs.
            let sensitive = security::is_sensitive(&e.name);
            let shown = |value: &str| (!sensitive).then(|| str_bytes(value));
            let config_type = match sensitive {
                true => ConfigType::Password,
                false => e.config_type,
            };
            let mut result = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(&e.name))
                .with_value(shown(&e.value))
                .with_read_only(e.read_only)
                .with_is_sensitive(sensitive)
                .with_config_source(e.source as i8);
            if body.include_synonyms {
                let synonyms = e.synonyms.iter().map(|(name, value, source)| {
                    DescribeConfigsSynonym::default()
                        .with_name(str_bytes(name))
                        .with_value(shown(value))
                        .with_source(*source as i8)
                });
                result = result.with_synonyms(synonyms.collect());
            }
            if request.version() >= 3 {
                // No documentation is sent (null, as Kafka without include_documentation).
                result = result
                    .with_config_type(config_type as i8)
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
/// types asked (all when none): topics, brokers and their loggers by id, the groups that
/// have configs of their own, and client-metrics resources (none here). A type the version
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
            RESOURCE_GROUP => image
                .group_configs
                .keys()
                .for_each(|g| add(g.clone(), resource_type)),
            _ => {}
        }
    }
    request.respond(&ListConfigResourcesResponse::default().with_config_resources(resources))
}
