//! Produce and Fetch through the wire: appends get offsets, fetches return what was
//! appended, long polls wake on appends, and data survives restarts.

mod common;

use std::time::Duration;

use common::*;
use kafka_protocol::error::ResponseError;

#[tokio::test]
async fn produced_batches_are_fetched_back_with_their_offsets() {
    // Goal: two appends get consecutive offsets and a fetch returns both batches intact.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "orders", 2).await, 0);
    let first = produce(&mut client, "orders", 1, batch(3, -1, -1, now_ms())).await;
    let second = produce(&mut client, "orders", 1, batch(2, -1, -1, now_ms())).await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    assert_eq!((second.error_code, second.base_offset), (0, 3));
    let data = fetch(&mut client, "orders", 1, 0).await;
    assert_eq!(data.error_code, 0);
    assert_eq!(data.high_watermark, 5);
    let got = records(data.records.as_ref().expect("records"));
    let offsets: Vec<i64> = got.iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(got[3], (3, "k0".into(), "v0".into()));
}

#[tokio::test]
async fn fetch_from_the_middle_of_a_batch_returns_the_whole_batch() {
    // Goal: clients skip earlier records themselves; the broker must return the batch.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    produce(&mut client, "t", 0, batch(5, -1, -1, 0)).await;
    let data = fetch(&mut client, "t", 0, 3).await;
    assert_eq!(records(data.records.as_ref().expect("records")).len(), 5);
}

#[tokio::test]
async fn fetch_at_the_end_is_empty_and_past_the_end_is_out_of_range() {
    // Goal: empty (never null) records at the log end, OFFSET_OUT_OF_RANGE beyond it.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    produce(&mut client, "t", 0, batch(2, -1, -1, 0)).await;
    let at_end = fetch(&mut client, "t", 0, 2).await;
    assert_eq!(at_end.error_code, 0);
    assert_eq!(at_end.records.as_ref().map(|r| r.len()), Some(0));
    let beyond = fetch(&mut client, "t", 0, 3).await;
    assert_eq!(beyond.error_code, ResponseError::OffsetOutOfRange.code());
}

#[tokio::test]
async fn a_parked_fetch_is_woken_by_an_append() {
    // Goal: a long poll answers as soon as data arrives, well before max_wait_ms.
    let broker = TestBroker::start(&[]).await;
    let mut setup = broker.client().await;
    create_topic(&mut setup, "t", 1).await;
    let mut consumer = broker.client().await;
    let parked = tokio::spawn(async move {
        let request = fetch_request("t", 0, 0, 60_000, 1);
        consumer.call(&request, 12).await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!parked.is_finished(), "fetch must wait for data");
    produce(&mut setup, "t", 0, batch(1, -1, -1, 0)).await;
    let response = tokio::time::timeout(Duration::from_secs(20), parked)
        .await
        .expect("woken long before max_wait_ms")
        .expect("task");
    let data = &response.responses[0].partitions[0];
    assert_eq!(records(data.records.as_ref().expect("records")).len(), 1);
}

#[tokio::test]
async fn a_follower_fetch_told_its_log_diverges_is_answered_at_once() {
    // Goal: a follower whose log goes on past the leader's end of its last fetched epoch
    // is told where its log diverges without waiting for data (Kafka answers a fetch with
    // a diverging epoch at once); it used to be parked for max_wait_ms first. Method: a
    // raw follower Fetch v12 at offset 10 of epoch 0 on a single node whose epoch 0 ends
    // at 3, with 20 s of max_wait_ms.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    produce(&mut client, "t", 0, batch(3, -1, -1, 0)).await;
    let mut request =
        fetch_request("t", 0, 10, 20_000, 1).with_replica_id(kafka_protocol::messages::BrokerId(2));
    request.topics[0].partitions[0].last_fetched_epoch = 0;
    let answer = tokio::time::timeout(Duration::from_secs(10), client.call(&request, 12))
        .await
        .expect("answered before max_wait_ms");
    let data = &answer.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    assert_eq!(data.diverging_epoch.epoch, 0);
    assert_eq!(data.diverging_epoch.end_offset, 3);
}

#[tokio::test]
async fn an_unchanged_checkpoint_is_not_rewritten() {
    // Goal: an idle broker does not rewrite (and fsync) its checkpoints every interval; one
    // whose offsets moved is written. Method: the checkpoints written twice with nothing in
    // between, then around a produce, comparing the high-watermark file's inode (a write
    // replaces the file by a rename).
    use std::os::unix::fs::MetadataExt;
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let file = broker.dir.path().join("replication-offset-checkpoint");
    let inode = || std::fs::metadata(&file).expect("the checkpoint").ino();
    let replicas = &broker.broker.replicas;
    replicas.write_checkpoints().expect("written");
    let first = inode();
    replicas.write_checkpoints().expect("written");
    assert_eq!(inode(), first, "nothing moved: not rewritten");
    produce(&mut client, "t", 0, batch(2, -1, -1, 0)).await;
    replicas.write_checkpoints().expect("written");
    assert_ne!(inode(), first, "the high watermark moved: rewritten");
}

#[tokio::test]
async fn data_survives_a_clean_restart_and_a_kill() {
    // Goal: restart keeps every record and offsets continue, after a clean stop and a kill.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    produce(&mut client, "t", 0, batch(3, -1, -1, 0)).await;
    drop(client);
    let broker = TestBroker::start_in(broker.stop().await, &[]).await;
    let mut client = broker.client().await;
    assert_eq!(
        produce(&mut client, "t", 0, batch(2, -1, -1, 0))
            .await
            .base_offset,
        3
    );
    drop(client);
    let broker = TestBroker::start_in(broker.kill().await, &[]).await;
    let mut client = broker.client().await;
    assert_eq!(
        produce(&mut client, "t", 0, batch(1, -1, -1, 0))
            .await
            .base_offset,
        5
    );
    let offsets: Vec<i64> = fetch_all(&mut client, "t", 0)
        .await
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(offsets, (0..6).collect::<Vec<i64>>());
}

#[tokio::test]
async fn a_partition_metadata_file_a_crash_cut_is_written_again_at_the_next_start() {
    // Goal: partition.metadata is written without fsyncs, so a crash may leave it empty or
    // cut; the next start rewrites it with the topic id, as Kafka's tools read it.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    drop(client);
    let dir = broker.kill().await;
    let path = dir.path().join("t-0").join("partition.metadata");
    let written = std::fs::read_to_string(&path).expect("partition.metadata");
    assert!(written.starts_with("version: 0\ntopic_id: "), "{written:?}");
    std::fs::write(&path, "versi").expect("cut the file");
    let broker = TestBroker::start_in(dir, &[]).await;
    let _dir = broker.stop().await;
    let rewritten = std::fs::read_to_string(&path).expect("partition.metadata");
    assert_eq!(rewritten, written);
}

#[tokio::test]
async fn acks_zero_gets_no_response_but_is_appended() {
    // Goal: acks=0 produces are written and never answered.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let frame = client.frame(&produce_request("t", 0, batch(2, -1, -1, 0), 0), 9);
    client.send_raw(&frame).await;
    let data = fetch(&mut client, "t", 0, 0).await;
    assert_eq!(data.high_watermark, 2);
}

#[tokio::test]
async fn delete_records_moves_the_log_start_offset() {
    // Goal: DeleteRecords answers the new low watermark; earlier offsets are out of range,
    // ListOffsets earliest follows, and offsets past the high watermark are refused.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    produce(&mut client, "t", 0, batch(5, -1, -1, 0)).await;
    let delete = |offset: i64| {
        kafka_protocol::messages::DeleteRecordsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![
                kafka_protocol::messages::delete_records_request::DeleteRecordsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        kafka_protocol::messages::delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(offset),
                    ]),
            ])
    };
    let moved = client.call(&delete(3), 2).await.topics[0].partitions[0].clone();
    assert_eq!((moved.error_code, moved.low_watermark), (0, 3));
    assert_eq!(
        fetch(&mut client, "t", 0, 2).await.error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    assert_eq!(fetch(&mut client, "t", 0, 3).await.log_start_offset, 3);
    let beyond = client.call(&delete(9), 2).await.topics[0].partitions[0].clone();
    assert_eq!(beyond.error_code, ResponseError::OffsetOutOfRange.code());
}

#[tokio::test]
async fn retention_deletes_old_segments_in_the_background() {
    // Goal: with retention.ms and small segments, old segments go and the log start moves,
    // while the newest data stays. Method: poll with a deadline, no fixed sleeps.
    let broker = TestBroker::start(&[
        ("log.segment.bytes", "1024"),
        ("log.retention.ms", "60000"),
        ("log.retention.check.interval.ms", "20"),
    ])
    .await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    let old = now.as_millis() as i64 - 3_600_000;
    for _ in 0..20 {
        produce(&mut client, "t", 0, batch(3, -1, -1, old)).await;
    }
    produce(
        &mut client,
        "t",
        0,
        batch(3, -1, -1, now.as_millis() as i64),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let data = fetch(&mut client, "t", 0, 60).await;
        if data.log_start_offset > 0 {
            assert_eq!(data.error_code, 0, "the newest batch stays");
            assert_eq!(data.high_watermark, 63);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "retention did not run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates `topic` (one partition) with `message.timestamp.type` = `kind`.
async fn create_with_timestamp_type(client: &mut Client, topic: &str, kind: &str) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::CreateTopicsRequest;
    use kafka_protocol::protocol::StrBytes;
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("message.timestamp.type"))
        .with_value(Some(StrBytes::from_string(kind.to_string())));
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![config])])
        .with_timeout_ms(5000);
    assert_eq!(client.call(&request, 7).await.topics[0].error_code, 0);
}

#[tokio::test]
async fn a_log_append_time_topic_stamps_batches_with_the_brokers_time() {
    // Goal (issue 13): message.timestamp.type=LogAppendTime makes the leader stamp each
    // batch with its time, answer it as log_append_time_ms, and consumers read it as every
    // record's timestamp. Before, the config was accepted and ignored (-1, CreateTime).
    use kafka_protocol::records::{RecordBatchDecoder, TimestampType};
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_with_timestamp_type(&mut client, "stamped", "LogAppendTime").await;
    create_with_timestamp_type(&mut client, "created", "CreateTime").await;
    let before = now_ms();
    // A create time an hour old: the broker's time replaces it.
    let sent = produce(
        &mut client,
        "stamped",
        0,
        batch(3, -1, -1, before - 3_600_000),
    )
    .await;
    let after = now_ms();
    assert_eq!(sent.error_code, 0);
    let stamped = sent.log_append_time_ms;
    assert!(
        (before..=after).contains(&stamped),
        "{stamped} in {before}..={after}"
    );
    let data = fetch(&mut client, "stamped", 0, 0).await;
    let bytes = data.records.clone().expect("records");
    // Consumers take a LogAppendTime batch's max timestamp (bytes 35..43) for every record
    // (Java's DefaultRecordBatch; kafka-protocol's decoder does not, so it is read here).
    let max_timestamp = i64::from_be_bytes(bytes[35..43].try_into().expect("8 bytes"));
    assert_eq!(max_timestamp, stamped);
    // The decoder checks the CRC the broker recomputed.
    let sets = RecordBatchDecoder::decode_all(&mut bytes.clone()).expect("a valid batch");
    let records: Vec<_> = sets.iter().flat_map(|s| s.records.iter()).collect();
    assert_eq!(records.len(), 3);
    assert!(records
        .iter()
        .all(|r| r.timestamp_type == TimestampType::LogAppend));
    let created = produce(&mut client, "created", 0, batch(1, -1, -1, before)).await;
    assert_eq!((created.error_code, created.log_append_time_ms), (0, -1));
}

#[tokio::test]
async fn a_topics_min_insync_replicas_changed_live_applies_to_the_next_acks_all_produce() {
    // Goal: min.insync.replicas is read from the partition (set with its log config), and a
    // topic-level change reaches the next acks=all produce at once, either way. Method: one
    // node (ISR of one), IncrementalAlterConfigs to 2 then back to 1, Produce acks=-1.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "isr", 1).await, 0);
    let code = |response: kafka_protocol::messages::IncrementalAlterConfigsResponse| {
        response.responses[0].error_code
    };
    let raised = client
        .call(&alter_config(2, "isr", "min.insync.replicas", "2"), 1)
        .await;
    assert_eq!(code(raised), 0);
    let refused = produce(&mut client, "isr", 0, batch(1, -1, -1, now_ms())).await;
    assert_eq!(refused.error_code, ResponseError::NotEnoughReplicas.code());
    let lowered = client
        .call(&alter_config(2, "isr", "min.insync.replicas", "1"), 1)
        .await;
    assert_eq!(code(lowered), 0);
    let accepted = produce(&mut client, "isr", 0, batch(1, -1, -1, now_ms())).await;
    assert_eq!(accepted.error_code, 0);
}
