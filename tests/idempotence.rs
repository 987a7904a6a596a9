//! Idempotent produce: retried batches are not written twice and get their original
//! offsets; gaps are refused; the producer state survives a restart.

mod common;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::InitProducerIdRequest;

async fn producer_id(client: &mut Client) -> i64 {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60000);
    let response = client.call(&request, 4).await;
    assert_eq!(response.error_code, 0);
    assert_eq!(response.producer_epoch, 0);
    response.producer_id.0
}

#[tokio::test]
async fn a_retried_batch_gets_its_original_offset_and_is_stored_once() {
    // Goal: Kafka answers a duplicate of one of the last five batches with success and the
    // original offset, without appending it again.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let pid = producer_id(&mut client).await;
    produce(&mut client, "t", 0, batch(2, -1, -1, 0)).await;
    let first = produce(&mut client, "t", 0, batch(3, pid, 0, 0)).await;
    let retry = produce(&mut client, "t", 0, batch(3, pid, 0, 0)).await;
    assert_eq!((first.error_code, first.base_offset), (0, 2));
    assert_eq!((retry.error_code, retry.base_offset), (0, 2));
    assert_eq!(fetch(&mut client, "t", 0, 0).await.high_watermark, 5);
}

#[tokio::test]
async fn a_sequence_gap_is_out_of_order() {
    // Goal: a batch that skips sequence numbers gets OUT_OF_ORDER_SEQUENCE_NUMBER.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let pid = producer_id(&mut client).await;
    assert_eq!(
        produce(&mut client, "t", 0, batch(2, pid, 0, 0))
            .await
            .error_code,
        0
    );
    let gap = produce(&mut client, "t", 0, batch(1, pid, 5, 0)).await;
    assert_eq!(
        gap.error_code,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    assert_eq!(
        produce(&mut client, "t", 0, batch(1, pid, 2, 0))
            .await
            .error_code,
        0
    );
}

#[tokio::test]
async fn producer_state_survives_a_restart() {
    // Goal: after a restart the state is rebuilt from the log, so a retry is still caught
    // and producer ids are not handed out twice.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let pid = producer_id(&mut client).await;
    let now = now_ms();
    produce(&mut client, "t", 0, batch(3, pid, 0, now)).await;
    drop(client);
    let broker = TestBroker::start_in(broker.kill().await, &[]).await;
    let mut client = broker.client().await;
    let retry = produce(&mut client, "t", 0, batch(3, pid, 0, now)).await;
    assert_eq!((retry.error_code, retry.base_offset), (0, 0));
    assert!(producer_id(&mut client).await > pid);
    assert_eq!(fetch(&mut client, "t", 0, 0).await.high_watermark, 3);
}

#[tokio::test]
async fn a_producer_that_expired_while_the_broker_was_down_is_forgotten_at_start() {
    // Goal: as Kafka drops expired producers when it loads a snapshot, a producer idle past
    // producer.id.expiration.ms when the broker starts is gone at once (not at the next
    // maintenance round, 5 min later): DescribeProducers no longer lists it, and its old
    // sequence no longer counts (a batch at sequence 0 is appended anew).
    let settings = [("producer.id.expiration.ms", "60000")];
    let broker = TestBroker::start(&settings).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let hour_ago = now_ms() - 3_600_000;
    let fresh = now_ms();
    assert_eq!(
        produce(&mut client, "t", 0, batch(2, 900, 0, hour_ago))
            .await
            .error_code,
        0
    );
    assert_eq!(
        produce(&mut client, "t", 0, batch(2, 901, 0, fresh))
            .await
            .error_code,
        0
    );
    assert_eq!(active_producers(&mut client).await, [900, 901]);
    drop(client);
    let broker = TestBroker::start_in(broker.stop().await, &settings).await;
    let mut client = broker.client().await;
    assert_eq!(
        active_producers(&mut client).await,
        [901],
        "900 expired an hour ago"
    );
    let again = produce(&mut client, "t", 0, batch(2, 900, 0, now_ms())).await;
    assert_eq!(
        (again.error_code, again.base_offset),
        (0, 4),
        "appended, not a duplicate"
    );
}

/// The producer ids DescribeProducers lists for `t`-0, in order.
async fn active_producers(client: &mut Client) -> Vec<i64> {
    use kafka_protocol::messages::{describe_producers_request, DescribeProducersRequest};
    let request = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(name("t"))
            .with_partition_indexes(vec![0]),
    ]);
    let response = client.call(&request, 0).await;
    let mut ids: Vec<i64> = response.topics[0].partitions[0]
        .active_producers
        .iter()
        .map(|p| p.producer_id.0)
        .collect();
    ids.sort_unstable();
    ids
}
