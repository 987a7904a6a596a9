//! Client quotas (issue 15; KIP-13, KIP-124, KIP-546) over the raw protocol:
//! AlterClientQuotas checks entities and values with Kafka's words and commits the rest;
//! DescribeClientQuotas matches filters as Kafka's ClientQuotasImage does; a producer or
//! consumer over its byte rate is told its `throttle_time_ms` and its connection is not
//! read for that long; a throttled consumer is sent nothing. Real clients and kafka-configs
//! are in compat/quota/run.sh, against Kafka too.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// One entity's alteration: its parts (type, name; `None` is the default) and ops (key,
/// value; `None` removes).
fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(kind, name)| {
                    EntityData::default()
                        .with_entity_type(s(kind))
                        .with_entity_name(name.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(key, value)| {
                    OpData::default()
                        .with_key(s(key))
                        .with_value(value.unwrap_or(0.0))
                        .with_remove(value.is_none())
                })
                .collect(),
        )
}

async fn alter(client: &mut Client, entries: Vec<EntryData>) -> AlterClientQuotasResponse {
    let request = AlterClientQuotasRequest::default().with_entries(entries);
    client.call(&request, 1).await
}

/// The entities (as `type=name` strings, `<default>` for the default) and values a filter
/// of (type, match type, match) components describes.
async fn describe(
    client: &mut Client,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Vec<(Vec<String>, Vec<(String, f64)>)> {
    let request = DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            components
                .iter()
                .map(|(kind, match_type, name)| {
                    ComponentData::default()
                        .with_entity_type(s(kind))
                        .with_match_type(*match_type)
                        .with_match(name.map(s))
                })
                .collect(),
        );
    let response = client.call(&request, 1).await;
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    let mut described: Vec<_> = response
        .entries
        .expect("entries")
        .iter()
        .map(|e| {
            let entity: Vec<String> = e
                .entity
                .iter()
                .map(|p| {
                    let name = p.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                    format!("{}={name}", p.entity_type.as_str())
                })
                .collect();
            let values = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect();
    described.sort_by(|a, b| a.0.cmp(&b.0));
    described
}

const EXACT: i8 = 0;
const DEFAULT: i8 = 1;
const ANY: i8 = 2;

#[tokio::test]
async fn refused_quota_changes_carry_kafkas_reasons_and_set_nothing() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let refused = alter(
        &mut client,
        vec![
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(&[("ip", None)], &[("consumer_byte_rate", Some(1.0))]),
        ],
    )
    .await;
    let reasons: Vec<(i16, String)> = refused
        .entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_deref().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            (
                42,
                "producer_byte_rate cannot be a fractional value.".to_string()
            ),
            (42, "Unhandled client quota entity type: group".to_string()),
            (
                42,
                "Invalid configuration key consumer_byte_rate".to_string()
            ),
        ]
    );
    assert!(
        describe(&mut client, &[], false).await.is_empty(),
        "nothing refused was set"
    );
}

#[tokio::test]
async fn quotas_are_committed_described_and_removed_as_kafka_does() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let set = alter(
        &mut client,
        vec![
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
            entry(
                &[("user", Some("alice")), ("client-id", None)],
                &[("request_percentage", Some(25.5))],
            ),
            entry(
                &[("client-id", None)],
                &[("consumer_byte_rate", Some(2048.0))],
            ),
        ],
    )
    .await;
    assert!(set.entries.iter().all(|e| e.error_code == 0), "{set:?}");
    let everything = describe(&mut client, &[], false).await;
    assert_eq!(
        everything,
        [
            (
                vec!["client-id=<default>".into()],
                vec![("consumer_byte_rate".into(), 2048.0)]
            ),
            (
                vec!["user=alice".into()],
                vec![("producer_byte_rate".into(), 1024.0)]
            ),
            (
                vec!["user=alice".into(), "client-id=<default>".into()],
                vec![("request_percentage".into(), 25.5)]
            ),
        ]
    );
    let alice = describe(&mut client, &[("user", EXACT, Some("alice"))], false).await;
    assert_eq!(alice.len(), 2, "both of alice's entities: {alice:?}");
    let only_alice = describe(&mut client, &[("user", EXACT, Some("alice"))], true).await;
    assert_eq!(only_alice.len(), 1, "strict: alice alone");
    let default_clients = describe(&mut client, &[("client-id", DEFAULT, None)], true).await;
    assert_eq!(default_clients, everything[..1]);
    let any_client = describe(&mut client, &[("client-id", ANY, None)], false).await;
    assert_eq!(any_client.len(), 2);

    let removed = alter(
        &mut client,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", None)],
        )],
    )
    .await;
    assert_eq!(removed.entries[0].error_code, 0);
    let left = describe(&mut client, &[("user", EXACT, Some("alice"))], true).await;
    assert!(
        left.is_empty(),
        "the entity went with its last key: {left:?}"
    );
}

/// Sets `key` for every client id by default, and waits until this broker's metadata has it
/// (AlterClientQuotas answers once the controller committed it, as Kafka's does).
async fn default_client_quota(client: &mut Client, key: &str, value: f64) {
    let set = alter(
        client,
        vec![entry(&[("client-id", None)], &[(key, Some(value))])],
    )
    .await;
    assert_eq!(set.entries[0].error_code, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while describe(client, &[("client-id", DEFAULT, None)], true)
        .await
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the quota reaches the broker's metadata"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_producer_over_its_byte_rate_is_throttled_and_not_read_meanwhile() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "limited", 1).await, 0);
    // 8 KiB/s: ~100 KB counted over Kafka's ten windows is ~10 KB/s, 25 % over, which takes
    // ~2.5 s to even out.
    default_client_quota(&mut client, "producer_byte_rate", 8_192.0).await;
    let value = "x".repeat(1000);
    let values: Vec<String> = (0..100).map(|_| value.clone()).collect();
    let records = batch_of_values(&values, now_ms());
    let first = client
        .call(&produce_request("limited", 0, records.clone(), 1), 9)
        .await;
    assert_eq!(first.responses[0].partition_responses[0].error_code, 0);
    assert!(
        (1_500..=4_000).contains(&first.throttle_time_ms),
        "~100 KB over 10 s at 8 KiB/s asks ~2.5 s of back-off: {}",
        first.throttle_time_ms
    );
    // The connection is muted: the next request is answered only after the back-off.
    let asked = Instant::now();
    let metadata = client
        .call(&MetadataRequest::default().with_topics(Some(vec![])), 12)
        .await;
    assert!(metadata.brokers.len() == 1);
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_millis(first.throttle_time_ms as u64 - 100),
        "answered after {waited:?}, throttled {} ms",
        first.throttle_time_ms
    );
}

#[tokio::test]
async fn a_throttled_consumer_is_sent_nothing_and_told_to_back_off() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "slow", 1).await, 0);
    let value = "y".repeat(1000);
    for _ in 0..5 {
        let values: Vec<String> = (0..50).map(|_| value.clone()).collect();
        produce(&mut client, "slow", 0, batch_of_values(&values, now_ms())).await;
    }
    // 10 KiB/s lets 100 KiB through at once; the partition holds ~250 KB.
    default_client_quota(&mut client, "consumer_byte_rate", 10_240.0).await;
    let mut consumer = broker.client().await;
    let first = consumer.call(&fetch_request("slow", 0, 0, 0, 1), 12).await;
    let data = &first.responses[0].partitions[0];
    let sent = data.records.as_ref().map_or(0, |r| r.len());
    assert!(
        sent > 0 && sent <= 102_400,
        "capped at the quota's window: {sent}"
    );
    let second = consumer.call(&fetch_request("slow", 0, 0, 0, 1), 12).await;
    assert!(second.throttle_time_ms > 0, "over the quota now");
    assert!(
        second.responses.is_empty(),
        "a throttled consumer is sent nothing"
    );
}

fn creatable(name: &str, partitions: i32) -> create_topics_request::CreatableTopic {
    create_topics_request::CreatableTopic::default()
        .with_name(TopicName(s(name)))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
}

async fn create(client: &mut Client, version: i16, name: &str, partitions: i32) -> (i16, i32) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![creatable(name, partitions)])
        .with_timeout_ms(10_000);
    let response = client.call(&request, version).await;
    (response.topics[0].error_code, response.throttle_time_ms)
}

/// KIP-599: topic creations and deletions take one token per partition from a bucket
/// holding 11 s of the rate; a client in debt is refused THROTTLING_QUOTA_EXCEEDED (89) from
/// CreateTopics v6, DeleteTopics v5 and CreatePartitions v3, older versions are served and
/// only throttled.
#[tokio::test]
async fn a_client_over_its_controller_mutation_rate_is_refused_then_let_through() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "before", 1).await, 0);
    // 2 partitions per second: 22 tokens.
    default_client_quota(&mut client, "controller_mutation_rate", 2.0).await;
    let mut admin = broker.client().await;
    // 24 partitions go through and leave the client 2 tokens in debt (~1 s).
    assert_eq!(create(&mut admin, 7, "wide", 24).await, (0, 0));
    let (code, throttle) = create(&mut admin, 7, "refused", 1).await;
    assert_eq!(code, 89, "in debt: refused");
    assert!(
        (500..=1_000).contains(&throttle),
        "~1 s to pay 2 tokens back at 2/s: {throttle}"
    );
    // Kafka mutes the refused connection for the back-off; others of the client are not.
    let mut admin = broker.client().await;
    let deleted = admin
        .call(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![TopicName(s("before"))])
                .with_timeout_ms(10_000),
            5,
        )
        .await;
    assert_eq!(deleted.responses[0].error_code, 89);
    let mut admin = broker.client().await;
    let grown = admin
        .call(
            &CreatePartitionsRequest::default()
                .with_topics(vec![
                    create_partitions_request::CreatePartitionsTopic::default()
                        .with_name(TopicName(s("before")))
                        .with_count(2),
                ])
                .with_timeout_ms(10_000),
            3,
        )
        .await;
    assert_eq!(grown.results[0].error_code, 89);
    // An older client does not know the error: it is served, and told to back off.
    let mut admin = broker.client().await;
    let (code, throttle) = create(&mut admin, 5, "served", 1).await;
    assert_eq!(code, 0, "v5 is served");
    assert!(throttle > 0, "and throttled: {throttle}");
    // Once the debt is paid back, the client may create again.
    tokio::time::sleep(Duration::from_millis(throttle as u64 + 100)).await;
    assert_eq!(create(&mut admin, 7, "later", 1).await.0, 0);
    // Another client's bucket is its own (the default applies per client id).
    let mut other = broker.client().await.with_client_id("other");
    assert_eq!(create(&mut other, 7, "others", 1).await.0, 0);
}
