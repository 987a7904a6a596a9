//! The code under test: a consumer that reads `count` messages of a topic as a member of
//! a consumer group and commits what it has read, as an application would.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaResult;
use rdkafka::message::Message;

/// Reads `count` messages of `topic` from the start as group `group`, committing each,
/// and returns their values in the order read.
pub async fn read_values(
    bootstrap: &str,
    group: &str,
    topic: &str,
    count: usize,
) -> KafkaResult<Vec<String>> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()?;
    consumer.subscribe(&[topic])?;
    let mut values = Vec::with_capacity(count);
    while values.len() < count {
        let message = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
            .await
            .map_err(|_| {
                rdkafka::error::KafkaError::MessageConsumption(
                    rdkafka::types::RDKafkaErrorCode::MessageTimedOut,
                )
            })??;
        let value = message
            .payload()
            .map(|v| String::from_utf8_lossy(v).into_owned());
        values.push(value.unwrap_or_default());
        consumer.commit_message(&message, CommitMode::Sync)?;
    }
    Ok(values)
}
