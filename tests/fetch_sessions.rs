//! Incremental fetch sessions (KIP-227) through the wire: a full request opens a session,
//! incremental ones answer only the partitions with something new and take the client's
//! updates and forgotten partitions, and every misuse gets Kafka's error code.

mod common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{FetchRequest, FetchResponse, MetadataRequest};
use uuid::Uuid;

const TOPIC: &str = "sessions";

fn partition(index: i32, offset: i64) -> FetchPartition {
    FetchPartition::default()
        .with_partition(index)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1024 * 1024)
}

/// A Fetch on session `(id, epoch)` naming `partitions` of [`TOPIC`] (by name).
fn request(session: (i32, i32), partitions: Vec<FetchPartition>) -> FetchRequest {
    let topics = match partitions.is_empty() {
        true => vec![],
        false => vec![FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(partitions)],
    };
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(50 * 1024 * 1024)
        .with_session_id(session.0)
        .with_session_epoch(session.1)
        .with_topics(topics)
}

/// The partitions answered, each with the offsets of the records it carries.
fn answered(response: &FetchResponse) -> Vec<(i32, i64, Vec<i64>)> {
    let mut got: Vec<(i32, i64, Vec<i64>)> = response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let offsets = p
                .records
                .as_ref()
                .map_or_else(Vec::new, |r| records(r).iter().map(|r| r.0).collect());
            (p.partition_index, p.high_watermark, offsets)
        })
        .collect();
    got.sort();
    got
}

async fn started(extra: &[(&str, &str)]) -> (TestBroker, Client) {
    let broker = TestBroker::start(extra).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, TOPIC, 3).await, 0);
    for p in [0, 1] {
        let done = produce(&mut client, TOPIC, p, batch(2, -1, -1, now_ms())).await;
        assert_eq!(done.error_code, 0);
    }
    (broker, client)
}

#[tokio::test]
async fn an_incremental_fetch_answers_only_what_is_new_and_follows_the_clients_changes() {
    let (_broker, mut client) = started(&[]).await;
    let all = vec![partition(0, 0), partition(1, 0), partition(2, 0)];
    let full = client.call(&request((0, 0), all), 12).await;
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert_ne!(id, 0, "a full fetch at epoch 0 opens a session");
    assert_eq!(
        answered(&full),
        vec![(0, 2, vec![0, 1]), (1, 2, vec![0, 1]), (2, 0, vec![])]
    );

    // The client consumed p0 and p1 and says so; nothing is new anywhere.
    let moved = vec![partition(0, 2), partition(1, 2)];
    let quiet = client.call(&request((id, 1), moved), 12).await;
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(answered(&quiet), vec![], "no partition has news");

    // New records on p2: only p2 is answered, from the session's position (0).
    produce(&mut client, TOPIC, 2, batch(1, -1, -1, now_ms())).await;
    let news = client.call(&request((id, 2), vec![]), 12).await;
    assert_eq!(answered(&news), vec![(2, 1, vec![0])]);

    // New records on p0 are read from the position the client gave at epoch 1.
    produce(&mut client, TOPIC, 0, batch(1, -1, -1, now_ms())).await;
    let from_update = client
        .call(&request((id, 3), vec![partition(2, 1)]), 12)
        .await;
    assert_eq!(answered(&from_update), vec![(0, 3, vec![2])]);

    // A forgotten partition is no longer read.
    let mut forget = request((id, 4), vec![partition(0, 3)]);
    forget.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic(name(TOPIC))
        .with_partitions(vec![2])];
    assert_eq!(answered(&client.call(&forget, 12).await), vec![]);
    produce(&mut client, TOPIC, 2, batch(1, -1, -1, now_ms())).await;
    assert_eq!(
        answered(&client.call(&request((id, 5), vec![]), 12).await),
        vec![]
    );

    // An epoch out of sequence, then the session closed (epoch -1): Kafka's errors.
    let stale = client.call(&request((id, 5), vec![]), 12).await;
    assert_eq!(
        stale.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    let closing = client
        .call(&request((id, -1), vec![partition(0, 3)]), 12)
        .await;
    assert_eq!((closing.error_code, closing.session_id), (0, 0));
    assert_eq!(
        answered(&closing),
        vec![(0, 3, vec![])],
        "a sessionless answer"
    );
    let closed = client.call(&request((id, 6), vec![]), 12).await;
    assert_eq!(
        closed.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    let unknown = client.call(&request((id ^ 0x55, 1), vec![]), 12).await;
    assert_eq!(
        unknown.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
}

#[tokio::test]
async fn an_incremental_fetch_long_polls_on_every_partition_of_its_session() {
    let (broker, mut client) = started(&[]).await;
    let all = vec![partition(0, 2), partition(1, 2), partition(2, 0)];
    let full = client.call(&request((0, 0), all), 12).await;
    let id = full.session_id;
    let addr = broker.addr;
    let producer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let mut other = Client::connect(addr).await;
        produce(&mut other, TOPIC, 1, batch(1, -1, -1, now_ms())).await;
    });
    let waiting = request((id, 1), vec![])
        .with_max_wait_ms(10_000)
        .with_min_bytes(1);
    let started = std::time::Instant::now();
    let woken = client.call(&waiting, 12).await;
    producer.await.expect("producer");
    assert_eq!(answered(&woken), vec![(1, 3, vec![2])]);
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
}

#[tokio::test]
async fn a_session_by_topic_id_is_not_used_by_name() {
    let (_broker, mut client) = started(&[]).await;
    let metadata = client
        .call(
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name(TOPIC)))
            ])),
            12,
        )
        .await;
    let topic_id: Uuid = metadata.topics[0].topic_id;
    let mut by_id = request((0, 0), vec![]);
    by_id.topics = vec![FetchTopic::default()
        .with_topic_id(topic_id)
        .with_partitions(vec![partition(0, 0)])];
    let full = client.call(&by_id, 13).await;
    let id = full.session_id;
    assert_ne!(id, 0);
    assert_eq!(full.responses[0].topic_id, topic_id);
    let mut consumed = request((id, 1), vec![]);
    consumed.topics = vec![FetchTopic::default()
        .with_topic_id(topic_id)
        .with_partitions(vec![partition(0, 2)])];
    let incremental = client.call(&consumed, 13).await;
    assert_eq!(
        (incremental.error_code, answered(&incremental)),
        (0, vec![])
    );
    let by_name = client.call(&request((id, 2), vec![]), 12).await;
    assert_eq!(
        by_name.error_code,
        ResponseError::FetchSessionTopicIdError.code()
    );
}

#[tokio::test]
async fn a_full_cache_answers_sessionless_and_no_slots_means_no_sessions() {
    let (broker, mut client) = started(&[("max.incremental.fetch.session.cache.slots", "1")]).await;
    let first = client
        .call(&request((0, 0), vec![partition(0, 0)]), 12)
        .await;
    assert_ne!(first.session_id, 0);
    let mut other = broker.client().await;
    let second = other
        .call(&request((0, 0), vec![partition(1, 0)]), 12)
        .await;
    assert_eq!(
        second.session_id, 0,
        "no session of lower priority to evict"
    );
    assert_eq!(answered(&second), vec![(1, 2, vec![0, 1])]);
    let bigger = vec![partition(0, 0), partition(1, 0)];
    let third = other.call(&request((0, 0), bigger), 12).await;
    assert_ne!(
        third.session_id, 0,
        "a session with more partitions evicts it"
    );
    let evicted = client
        .call(&request((first.session_id, 1), vec![]), 12)
        .await;
    assert_eq!(
        evicted.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );

    let (_none, mut client) = started(&[("max.incremental.fetch.session.cache.slots", "0")]).await;
    let full = client
        .call(&request((0, 0), vec![partition(0, 0)]), 12)
        .await;
    assert_eq!((full.error_code, full.session_id), (0, 0));
}
