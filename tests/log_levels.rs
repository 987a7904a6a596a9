//! Broker loggers (issue 13): DescribeConfigs lists this broker's loggers with their levels
//! and IncrementalAlterConfigs sets or resets one while the broker runs, as Kafka's
//! BROKER_LOGGER resource (`kafka-configs --entity-type broker-loggers`).

mod common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;

const BROKER_LOGGER: i8 = 8;

async fn level_of(client: &mut Client, logger: &str) -> Option<String> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(BROKER_LOGGER)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(None)]);
    let response = client.call(&request, 4).await;
    let result = &response.results[0];
    assert_eq!(result.error_code, 0);
    assert!(
        result.configs.iter().all(|c| c.config_source == 6),
        "DYNAMIC_BROKER_LOGGER_CONFIG"
    );
    let found = result.configs.iter().find(|c| c.name.as_str() == logger)?;
    found.value.as_ref().map(ToString::to_string)
}

/// IncrementalAlterConfigs of one logger (`operation` 0 SET, 1 DELETE): code and message.
async fn alter(client: &mut Client, logger: &str, level: &str, operation: i8) -> (i16, String) {
    let mut request = alter_config(BROKER_LOGGER, "1", logger, level);
    request.resources[0].configs[0].config_operation = operation;
    let response = client.call(&request, 1).await;
    let result = &response.responses[0];
    let message = result.error_message.as_ref().map(ToString::to_string);
    (result.error_code, message.unwrap_or_default())
}

#[tokio::test]
async fn a_loggers_level_is_described_set_and_reset_while_the_broker_runs() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let root = level_of(&mut client, "root")
        .await
        .expect("the root logger");
    assert_eq!(
        level_of(&mut client, "highwater::replica").await,
        Some(root.clone())
    );
    assert_eq!(
        alter(&mut client, "highwater::replica", "debug", 0).await.0,
        0
    );
    assert_eq!(
        level_of(&mut client, "highwater::replica").await.as_deref(),
        Some("DEBUG")
    );
    assert_eq!(
        level_of(&mut client, "highwater::api").await,
        Some(root.clone()),
        "only it"
    );
    assert_eq!(alter(&mut client, "highwater::replica", "", 1).await.0, 0);
    assert_eq!(
        level_of(&mut client, "highwater::replica").await,
        Some(root),
        "reset"
    );

    let invalid = ResponseError::InvalidConfig.code();
    let unknown = alter(&mut client, "no.such.Logger", "DEBUG", 0).await;
    assert_eq!(
        unknown,
        (invalid, "Logger no.such.Logger does not exist!".into())
    );
    let (code, message) = alter(&mut client, "highwater::api", "LOUD", 0).await;
    assert_eq!(code, invalid);
    assert!(
        message.contains("is not a supported log level"),
        "{message}"
    );
    let root_removal = alter(&mut client, "root", "", 1).await;
    assert_eq!(
        root_removal,
        (
            invalid,
            "Removing the log level of the root logger is not allowed".into()
        )
    );
}
