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
    produce(&mut client, "t", 0, batch(3, pid, 0, 0)).await;
    drop(client);
    let broker = TestBroker::start_in(broker.kill().await, &[]).await;
    let mut client = broker.client().await;
    let retry = produce(&mut client, "t", 0, batch(3, pid, 0, 0)).await;
    assert_eq!((retry.error_code, retry.base_offset), (0, 0));
    assert!(producer_id(&mut client).await > pid);
    assert_eq!(fetch(&mut client, "t", 0, 0).await.high_watermark, 3);
}
