//! Dynamic broker configs and group configs (issue 13): IncrementalAlterConfigs and the
//! legacy AlterConfigs change a broker's configs (one broker's, or every broker's under an
//! empty name) and a group's, committed in the metadata log and applied while the broker
//! runs; DescribeConfigs reports each value with its source and synonyms. Static keys are
//! refused, as Kafka refuses them.

mod common;

use std::time::Duration;

use common::consumer_groups::*;
use common::groups::find_coordinator;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT: i8 = 3;
const SOURCE_STATIC: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
const SOURCE_GROUP: i8 = 8;

/// IncrementalAlterConfigs of one key (`None`: DELETE) of one resource: code and message.
async fn alter(
    client: &mut Client,
    (resource_type, resource): (i8, &str),
    key: &str,
    value: Option<&str>,
) -> (i16, String) {
    let mut request = alter_config(resource_type, resource, key, value.unwrap_or_default());
    if value.is_none() {
        let config = &mut request.resources[0].configs[0];
        config.config_operation = 1;
        config.value = None;
    }
    let response = client.call(&request, 1).await;
    let result = &response.responses[0];
    let message = result.error_message.as_ref().map(ToString::to_string);
    (result.error_code, message.unwrap_or_default())
}

/// DescribeConfigs (with synonyms) of one key of one resource.
async fn describe(
    client: &mut Client,
    (resource_type, resource): (i8, &str),
    key: &str,
) -> Option<DescribeConfigsResourceResult> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from(resource.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from(key.to_string())]))]);
    let response = client.call(&request, 4).await;
    assert_eq!(response.results[0].error_code, 0, "describe {resource}");
    response.results[0].configs.first().cloned()
}

/// Waits until this broker applies `key` = `value` (brokers apply committed configs as
/// their metadata image arrives, shortly after the change is answered, as in Kafka).
async fn until_applied(client: &mut Client, key: &str, value: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let entry = describe(client, (BROKER, "1"), key).await.expect("listed");
        if entry.value.as_deref() == Some(value) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key} never became {value}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A batch of one record with a `size`-byte value.
fn batch_of(size: usize) -> bytes::Bytes {
    batch_of_values(&["x".repeat(size)], now_ms())
}

#[tokio::test]
async fn a_dynamic_message_max_bytes_applies_to_the_next_produce_and_survives_a_restart() {
    // Goal: the cluster-wide default of a topic config's broker key applies live to a topic
    // without an override, this broker's own value beats it, and both are kept in the
    // metadata log. Method: produce 2 KB records around each change, restart, produce.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "sizes", 1).await, 0);
    assert_eq!(
        produce(&mut client, "sizes", 0, batch_of(2000))
            .await
            .error_code,
        0
    );

    let code = alter(&mut client, (BROKER, ""), "message.max.bytes", Some("1000")).await;
    assert_eq!(code, (0, String::new()));
    until_applied(&mut client, "message.max.bytes", "1000").await;
    let refused = produce(&mut client, "sizes", 0, batch_of(2000)).await;
    assert_eq!(refused.error_code, ResponseError::MessageTooLarge.code());
    let entry = describe(&mut client, (BROKER, "1"), "message.max.bytes")
        .await
        .expect("listed");
    assert_eq!(entry.value.as_deref(), Some("1000"));
    assert_eq!(entry.config_source, SOURCE_DYNAMIC_DEFAULT);
    assert!(!entry.read_only, "message.max.bytes is dynamic");
    let sources: Vec<i8> = entry.synonyms.iter().map(|s| s.source).collect();
    assert_eq!(sources, [SOURCE_DYNAMIC_DEFAULT, SOURCE_DEFAULT]);
    let topic_entry = describe(&mut client, (TOPIC, "sizes"), "max.message.bytes")
        .await
        .expect("listed");
    assert_eq!(topic_entry.config_source, SOURCE_DYNAMIC_DEFAULT);
    assert_eq!(topic_entry.synonyms[0].name.as_str(), "message.max.bytes");

    let code = alter(
        &mut client,
        (BROKER, "1"),
        "message.max.bytes",
        Some("3000"),
    )
    .await;
    assert_eq!(code.0, 0, "{}", code.1);
    until_applied(&mut client, "message.max.bytes", "3000").await;
    assert_eq!(
        produce(&mut client, "sizes", 0, batch_of(2000))
            .await
            .error_code,
        0
    );
    let entry = describe(&mut client, (BROKER, "1"), "message.max.bytes")
        .await
        .expect("listed");
    assert_eq!(entry.config_source, SOURCE_DYNAMIC_BROKER);

    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, &[]).await;
    let mut client = broker.client().await;
    until_applied(&mut client, "message.max.bytes", "3000").await;
    let code = alter(&mut client, (BROKER, "1"), "message.max.bytes", None).await;
    assert_eq!(code.0, 0, "{}", code.1);
    until_applied(&mut client, "message.max.bytes", "1000").await;
    let refused = produce(&mut client, "sizes", 0, batch_of(2000)).await;
    assert_eq!(
        refused.error_code,
        ResponseError::MessageTooLarge.code(),
        "back to the cluster-wide 1000"
    );
}

#[tokio::test]
async fn static_unknown_and_invalid_broker_configs_are_refused_and_nothing_changes() {
    // Goal: only keys applied live are accepted, with Kafka's error codes; validate_only
    // changes nothing. Method: alter each bad case, then describe the key.
    let broker = TestBroker::start(&[("log.retention.ms", "5000")]).await;
    let mut client = broker.client().await;
    let cases = [
        (
            (BROKER, "1"),
            "log.dirs",
            Some("/tmp/x"),
            ResponseError::InvalidRequest,
        ),
        (
            (BROKER, ""),
            "num.io.threads",
            Some("8"),
            ResponseError::InvalidConfig,
        ),
        (
            (BROKER, "1"),
            "log.segment.bytes",
            Some("10"),
            ResponseError::InvalidRequest,
        ),
        (
            (BROKER, "1"),
            "max.connections",
            Some("many"),
            ResponseError::InvalidRequest,
        ),
        (
            (BROKER, "2"),
            "message.max.bytes",
            Some("1000"),
            ResponseError::InvalidRequest,
        ),
        (
            (BROKER, "one"),
            "message.max.bytes",
            Some("1000"),
            ResponseError::InvalidRequest,
        ),
    ];
    for (resource, key, value, expected) in cases {
        let (code, message) = alter(&mut client, resource, key, value).await;
        assert_eq!(code, expected.code(), "{resource:?} {key}: {message}");
        assert!(!message.is_empty(), "{key}: a message says why");
    }
    let mut request = alter_config(BROKER, "1", "log.retention.ms", "7000");
    request.validate_only = true;
    assert_eq!(client.call(&request, 1).await.responses[0].error_code, 0);
    let entry = describe(&mut client, (BROKER, "1"), "log.retention.ms")
        .await
        .expect("listed");
    assert_eq!(entry.value.as_deref(), Some("5000"));
    assert_eq!(entry.config_source, SOURCE_STATIC);
    let dirs = describe(&mut client, (BROKER, "1"), "log.dirs")
        .await
        .expect("listed");
    assert!(dirs.read_only, "log.dirs is read only");
}

#[tokio::test]
async fn the_legacy_alter_configs_replaces_a_brokers_dynamic_configs() {
    // Goal: AlterConfigs (sarama, kafka-python) sets exactly the configs given for the
    // broker, removing the others, as Kafka does. Method: set two keys, then one.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let legacy = |pairs: &[(&str, &str)]| {
        use kafka_protocol::messages::alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        let configs = pairs
            .iter()
            .map(|(k, v)| {
                AlterableConfig::default()
                    .with_name(StrBytes::from(k.to_string()))
                    .with_value(Some(StrBytes::from(v.to_string())))
            })
            .collect();
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configs(configs)])
    };
    let both = legacy(&[("log.cleaner.backoff.ms", "100"), ("max.connections", "50")]);
    assert_eq!(client.call(&both, 2).await.responses[0].error_code, 0);
    let one = legacy(&[("max.connections", "60")]);
    assert_eq!(client.call(&one, 2).await.responses[0].error_code, 0);
    let backoff = describe(&mut client, (BROKER, "1"), "log.cleaner.backoff.ms")
        .await
        .expect("listed");
    assert_eq!(backoff.value.as_deref(), Some("15000"));
    assert_eq!(backoff.config_source, SOURCE_DEFAULT);
    let connections = describe(&mut client, (BROKER, "1"), "max.connections")
        .await
        .expect("listed");
    assert_eq!(connections.value.as_deref(), Some("60"));
}

#[tokio::test]
async fn a_lower_max_connections_holds_new_connections_until_one_closes() {
    // Goal: max.connections changed live applies to the next connections and closes none.
    // Method: with one connection open, lower it to 1; a second connection is not served
    // until the first closes.
    let broker = TestBroker::start(&[]).await;
    let mut first = broker.client().await;
    let code = alter(&mut first, (BROKER, "1"), "max.connections", Some("1")).await;
    assert_eq!(code.0, 0, "{}", code.1);
    until_applied(&mut first, "max.connections", "1").await;
    let mut second = broker.client().await;
    let waiting = ApiVersionsRequest::default();
    let answered = tokio::time::timeout(Duration::from_millis(500), second.call(&waiting, 3)).await;
    assert!(
        answered.is_err(),
        "the second connection waits while the first is open"
    );
    assert_eq!(
        describe(&mut first, (BROKER, "1"), "max.connections")
            .await
            .and_then(|c| c.value)
            .as_deref(),
        Some("1"),
        "the open connection is still served"
    );
    drop(first);
    let answered = tokio::time::timeout(Duration::from_secs(10), second.read_frame()).await;
    assert!(
        matches!(answered, Ok(Some(_))),
        "served once the first closed"
    );
}

#[tokio::test]
async fn a_groups_own_configs_apply_to_its_members_only() {
    // Goal: a group config (KIP-848) is described with its source and read by the
    // coordinator for that group alone; out-of-range and share-group keys are refused.
    // Method: set consumer.heartbeat.interval.ms for one group; members of it and of
    // another group join and read the interval their heartbeats are told.
    let broker = TestBroker::start(&[("group.initial.rebalance.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "events", 2).await, 0);
    find_coordinator(&mut client, "g-tuned").await;
    find_coordinator(&mut client, "g-plain").await;
    let code = alter(
        &mut client,
        (GROUP, "g-tuned"),
        "consumer.heartbeat.interval.ms",
        Some("6000"),
    )
    .await;
    assert_eq!(code.0, 0, "{}", code.1);
    let entry = describe(
        &mut client,
        (GROUP, "g-tuned"),
        "consumer.heartbeat.interval.ms",
    )
    .await
    .expect("listed");
    assert_eq!(entry.config_source, SOURCE_GROUP);
    assert_eq!(entry.value.as_deref(), Some("6000"));
    let tuned = Member::new("g-tuned").join(&mut client, &["events"]).await;
    assert_eq!(tuned.heartbeat_interval_ms, 6000);
    let plain = Member::new("g-plain").join(&mut client, &["events"]).await;
    assert_eq!(plain.heartbeat_interval_ms, 5000);
    let refused = [
        ("consumer.session.timeout.ms", "1000"),
        ("consumer.heartbeat.interval.ms", "20000"),
        ("share.session.timeout.ms", "45000"),
        ("no.such.config", "1"),
    ];
    for (key, value) in refused {
        let (code, message) = alter(&mut client, (GROUP, "g-tuned"), key, Some(value)).await;
        assert_eq!(
            code,
            ResponseError::InvalidConfig.code(),
            "{key}: {message}"
        );
    }
}
