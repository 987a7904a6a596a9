//! Hostile and malformed input: each gets Kafka's error code, or its connection closed,
//! and the broker keeps serving every other connection.

mod common;

use bytes::{BufMut, BytesMut};
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest, ShareGroupHeartbeatRequest};

/// Asserts that a fresh connection still gets answers.
async fn broker_still_serves(broker: &TestBroker) {
    let mut client = broker.client().await;
    let response = client.call(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(response.error_code, 0);
}

async fn closes_after(bytes: &[u8]) {
    let broker = TestBroker::start(&[("socket.request.max.bytes", "1048576")]).await;
    let mut bystander = broker.client().await;
    let mut client = broker.client().await;
    client.send_raw(bytes).await;
    assert!(client.is_closed().await, "connection must be closed");
    broker_still_serves(&broker).await;
    assert_eq!(
        bystander
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
}

#[tokio::test]
async fn garbage_bytes_close_the_connection() {
    // Goal: a frame of random bytes (unknown API key) is refused without harm to others.
    closes_after(&[
        0, 0, 0, 12, 0x7f, 0x13, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
    ])
    .await;
}

#[tokio::test]
async fn a_negative_frame_length_closes_the_connection() {
    // Goal: a negative length is never used to allocate.
    closes_after(&(-5i32).to_be_bytes()).await;
}

#[tokio::test]
async fn an_oversized_frame_length_closes_the_connection() {
    // Goal: a length above socket.request.max.bytes is refused before reading the body.
    closes_after(&(2 * 1024 * 1024i32).to_be_bytes()).await;
}

#[tokio::test]
async fn a_frame_too_short_for_a_header_closes_the_connection() {
    // Goal: a frame shorter than a request header is refused.
    closes_after(&[0, 0, 0, 3, 0, 18, 0]).await;
}

#[tokio::test]
async fn a_truncated_body_closes_the_connection() {
    // Goal: a client announcing more bytes than it sends and hanging up is cleaned up.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    client
        .send_raw(&[0, 0, 0, 100, 0, 18, 0, 0, 0, 0, 0, 1])
        .await;
    tokio::io::AsyncWriteExt::shutdown(&mut client.stream)
        .await
        .expect("shutdown");
    assert!(client.is_closed().await);
    broker_still_serves(&broker).await;
}

#[tokio::test]
async fn an_undecodable_body_closes_the_connection() {
    // Goal: a valid header followed by a body the codec cannot read is refused.
    let mut client_frame = BytesMut::new();
    let body: &[u8] = &[0, 3, 0, 9, 0, 0, 0, 7, 0, 0, 0xff, 0xff, 0xff, 0x00];
    client_frame.put_i32(body.len() as i32);
    client_frame.extend_from_slice(body);
    closes_after(&client_frame).await;
}

#[tokio::test]
async fn an_unsupported_version_closes_the_connection() {
    // Goal: Produce v99 (and Produce v0, which Kafka 4 no longer serves) are refused.
    let broker = TestBroker::start(&[]).await;
    for version in [99, 0] {
        let mut client = broker.client().await;
        let frame = client.frame(&produce_request("t", 0, batch(1, -1, -1, 0), 1), 9);
        let mut bytes = BytesMut::from(&frame[..]);
        bytes[6..8].copy_from_slice(&(version as i16).to_be_bytes());
        client.send_raw(&bytes).await;
        assert!(
            client.is_closed().await,
            "Produce v{version} must be refused"
        );
    }
    broker_still_serves(&broker).await;
}

#[tokio::test]
async fn an_unimplemented_api_is_not_advertised_and_is_refused() {
    // Goal: ShareGroupHeartbeat (share groups, KIP-932, are not implemented; Kafka 4.1
    // does not advertise them either unless enabled) is absent and closes cleanly.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let versions = client.call(&ApiVersionsRequest::default(), 3).await;
    assert!(versions.api_keys.iter().all(|k| k.api_key != 76));
    let frame = client.frame(&ShareGroupHeartbeatRequest::default(), 1);
    client.send_raw(&frame).await;
    assert!(client.is_closed().await);
    broker_still_serves(&broker).await;
}

#[tokio::test]
async fn a_too_new_api_versions_request_gets_a_v0_error_response() {
    // Goal: Kafka's fallback: v0 response, UNSUPPORTED_VERSION, the ApiVersions range.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let frame = client.frame(&ApiVersionsRequest::default(), 3);
    let mut bytes = BytesMut::from(&frame[..]);
    bytes[6..8].copy_from_slice(&77i16.to_be_bytes());
    client.send_raw(&bytes).await;
    let mut response = client.read_frame().await.expect("response");
    let _ =
        <kafka_protocol::messages::ResponseHeader as kafka_protocol::protocol::Decodable>::decode(
            &mut response,
            0,
        );
    let body = <kafka_protocol::messages::ApiVersionsResponse as kafka_protocol::protocol::Decodable>::decode(&mut response, 0)
        .expect("v0 body");
    assert_eq!(body.error_code, ResponseError::UnsupportedVersion.code());
    assert_eq!(body.api_keys.len(), 1);
    assert_eq!(
        (body.api_keys[0].api_key, body.api_keys[0].max_version),
        (18, 4)
    );
}

#[tokio::test]
async fn invalid_topic_names_are_refused() {
    // Goal: CreateTopics and Metadata answer INVALID_TOPIC_EXCEPTION for illegal names.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    for bad in ["has space", "..", "slash/name", &"x".repeat(250)] {
        assert_eq!(
            create_topic(&mut client, bad, 1).await,
            ResponseError::InvalidTopicException.code()
        );
        let request = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name(bad)))
            ]))
            .with_allow_auto_topic_creation(true);
        let response = client.call(&request, 12).await;
        assert_eq!(
            response.topics[0].error_code,
            ResponseError::InvalidTopicException.code()
        );
    }
    assert!(!broker.dir.path().join("has space-0").exists());
}

#[tokio::test]
async fn produce_to_a_missing_partition_is_unknown() {
    // Goal: partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION, nothing created.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let code = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        produce(&mut client, "t", 5, batch(1, -1, -1, 0))
            .await
            .error_code,
        code
    );
    assert_eq!(
        produce(&mut client, "nope", 0, batch(1, -1, -1, 0))
            .await
            .error_code,
        code
    );
}

#[tokio::test]
async fn a_corrupt_batch_is_refused_and_not_stored() {
    // Goal: a flipped bit fails the CRC check: CORRUPT_MESSAGE, and the log stays empty.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let mut bad = BytesMut::from(&batch(3, -1, -1, 0)[..]);
    let last = bad.len() - 2;
    bad[last] ^= 0x10;
    let response = produce(&mut client, "t", 0, bad.freeze()).await;
    assert_eq!(response.error_code, ResponseError::CorruptMessage.code());
    assert_eq!(fetch(&mut client, "t", 0, 0).await.high_watermark, 0);
}

#[tokio::test]
async fn an_oversized_batch_is_refused() {
    // Goal: a batch above max.message.bytes gets MESSAGE_TOO_LARGE.
    let broker = TestBroker::start(&[("message.max.bytes", "100")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let response = produce(&mut client, "t", 0, batch(20, -1, -1, 0)).await;
    assert_eq!(response.error_code, ResponseError::MessageTooLarge.code());
}

#[tokio::test]
async fn two_batches_in_one_partition_are_refused() {
    // Goal: Produce v3+ carries exactly one batch per partition (INVALID_RECORD otherwise).
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let mut two = BytesMut::from(&batch(1, -1, -1, 0)[..]);
    two.extend_from_slice(&batch(1, -1, -1, 0));
    let response = produce(&mut client, "t", 0, two.freeze()).await;
    assert_eq!(response.error_code, ResponseError::InvalidRecord.code());
    let empty = produce(&mut client, "t", 0, bytes::Bytes::new()).await;
    assert_eq!(empty.error_code, ResponseError::InvalidRecord.code());
}

#[tokio::test]
async fn a_timestamp_far_in_the_future_is_refused() {
    // Goal: as Kafka 4 (message.timestamp.after.max.ms = 1 h): INVALID_TIMESTAMP.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    let in_two_hours = now.as_millis() as i64 + 2 * 3600 * 1000;
    let response = produce(&mut client, "t", 0, batch(1, -1, -1, in_two_hours)).await;
    assert_eq!(response.error_code, ResponseError::InvalidTimestamp.code());
    let now = now.as_millis() as i64;
    assert_eq!(
        produce(&mut client, "t", 0, batch(1, -1, -1, now))
            .await
            .error_code,
        0
    );
}

#[tokio::test]
async fn a_batch_larger_than_a_segment_is_refused() {
    // Goal: as Kafka, RECORD_LIST_TOO_LARGE, and the connection and log stay usable.
    let broker = TestBroker::start(&[("log.segment.bytes", "1024")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let response = produce(&mut client, "t", 0, batch(100, -1, -1, now_ms())).await;
    assert_eq!(
        response.error_code,
        ResponseError::RecordListTooLarge.code()
    );
    assert_eq!(
        produce(&mut client, "t", 0, batch(2, -1, -1, now_ms()))
            .await
            .base_offset,
        0
    );
}

/// Polls until a fresh connection to `broker` is answered, or panics at the deadline.
async fn wait_until_served(broker: &TestBroker) -> Client {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let mut client = broker.client().await;
        if client
            .try_call(&ApiVersionsRequest::default(), 3)
            .await
            .is_some()
        {
            return client;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no connection served in time"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_connection_past_max_connections_per_ip_is_closed_and_earlier_ones_keep_working() {
    // Goal: as Kafka's ConnectionQuotas, the connection past max.connections.per.ip is
    // closed at once, the earlier ones are served, and a closed one frees its slot.
    // Method: in-process broker with a limit of 3 for 127.0.0.1, raw clients.
    let broker = TestBroker::start(&[("max.connections.per.ip", "3")]).await;
    let mut earlier = Vec::new();
    for _ in 0..3 {
        let mut client = broker.client().await;
        let answer = client.call(&ApiVersionsRequest::default(), 3).await;
        assert_eq!(answer.error_code, 0);
        earlier.push(client);
    }
    let mut refused = broker.client().await;
    assert!(refused.is_closed().await, "the fourth connection is closed");
    for client in &mut earlier {
        let answer = client.call(&ApiVersionsRequest::default(), 3).await;
        assert_eq!(answer.error_code, 0, "earlier connections keep working");
    }
    drop(earlier.pop());
    let mut fresh = wait_until_served(&broker).await;
    let metadata = fresh.call(&MetadataRequest::default(), 12).await;
    assert_eq!(metadata.brokers.len(), 1);
}

#[tokio::test]
async fn a_connection_past_max_connections_waits_until_one_closes() {
    // Goal: as Kafka's acceptor, a connection past the listener's max.connections is not
    // refused but waits, and is served as soon as another closes. Method: limit 2; the
    // third client's request stays unanswered until the first client hangs up.
    let broker = TestBroker::start(&[("max.connections", "2")]).await;
    let mut first = broker.client().await;
    assert_eq!(
        first
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
    let mut second = broker.client().await;
    assert_eq!(
        second
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
    let mut third = broker.client().await;
    let request = third.frame(&ApiVersionsRequest::default(), 3);
    third.send_raw(&request).await;
    let early = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        tokio::io::AsyncReadExt::read_u32(&mut third.stream),
    )
    .await;
    assert!(early.is_err(), "not served while the listener is full");
    drop(first);
    assert!(
        third.read_frame().await.is_some(),
        "served once a slot frees"
    );
    assert_eq!(
        second
            .call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_posing_as_an_unknown_replica_is_refused_and_the_partition_keeps_serving() {
    // Goal: a client that sends a follower Fetch with the replica id of no replica gets
    // NOT_LEADER_OR_FOLLOWER, and the partition goes on serving produce and fetch (the
    // refusal used to take the partition's role lock twice and deadlock it for good).
    // Method: a raw Fetch v12 with replica_id 9 on a single node, then a produce, each
    // bounded in time.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let mut impostor = broker.client().await;
    let request =
        fetch_request("t", 0, 0, 0, 0).with_replica_id(kafka_protocol::messages::BrokerId(9));
    let wait = std::time::Duration::from_secs(10);
    let answer = tokio::time::timeout(wait, impostor.call(&request, 12))
        .await
        .expect("the fetch is answered");
    let code = answer.responses[0].partitions[0].error_code;
    assert_eq!(code, ResponseError::NotLeaderOrFollower.code());
    let produced = tokio::time::timeout(wait, produce(&mut client, "t", 0, batch(2, -1, -1, 0)))
        .await
        .expect("the partition still serves");
    assert_eq!(produced.error_code, 0);
}

#[tokio::test]
async fn a_record_older_than_the_window_is_refused_by_its_index_even_inside_a_batch() {
    // Goal (KIP-937, KIP-467): with message.timestamp.before.max.ms set, every record's
    // timestamp is checked, not only the batch's first and largest, and the refused ones
    // are named. Before, a two-hour-old record between two current ones was accepted.
    use highwater::log::batch_encode::{encode_batch, plain_record};
    let broker = TestBroker::start(&[("log.message.timestamp.before.max.ms", "3600000")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let now = now_ms();
    let old = now - 2 * 3600 * 1000;
    let value = || Some(bytes::Bytes::from_static(b"v"));
    let records = [
        plain_record(0, now, None, value()),
        plain_record(1, old, None, value()),
        plain_record(2, now, None, value()),
    ];
    let batch = encode_batch(&records, kafka_protocol::records::Compression::None).expect("encode");
    let response = produce(&mut client, "t", 0, batch).await;
    assert_eq!(response.error_code, ResponseError::InvalidTimestamp.code());
    let named: Vec<(i32, String)> = response
        .record_errors
        .iter()
        .map(|e| {
            (
                e.batch_index,
                e.batch_index_error_message
                    .clone()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(named.len(), 1, "{named:?}");
    assert_eq!(named[0].0, 1);
    let prefix = format!("Timestamp {old} of message with offset 1 is out of range. The timestamp should be within [");
    assert!(named[0].1.starts_with(&prefix), "{}", named[0].1);
    assert_eq!(
        response.error_message.as_deref(),
        Some("One or more records have been rejected due to invalid timestamp")
    );
    let fine = produce(&mut client, "t", 0, batch_at(now)).await;
    assert_eq!(
        (fine.error_code, fine.base_offset),
        (0, 0),
        "nothing of the refused batch"
    );
}

fn batch_at(timestamp: i64) -> bytes::Bytes {
    batch(1, -1, -1, timestamp)
}

#[tokio::test]
async fn a_connection_idle_for_connections_max_idle_ms_is_closed_a_busy_one_is_not() {
    // Kafka closes a connection with no activity for connections.max.idle.ms (10 min by
    // default), so idle clients do not hold the broker's sockets forever; highwater kept
    // them open.
    let broker = TestBroker::start(&[("connections.max.idle.ms", "300")]).await;
    let mut idle = broker.client().await;
    let mut busy = broker.client().await;
    assert_eq!(
        idle.call(&ApiVersionsRequest::default(), 3)
            .await
            .error_code,
        0
    );
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(900) {
        let answer = busy.call(&ApiVersionsRequest::default(), 3).await;
        assert_eq!(answer.error_code, 0, "a connection in use stays open");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(idle.is_closed().await, "the idle connection is closed");
    broker_still_serves(&broker).await;
}
