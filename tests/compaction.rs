//! Log compaction through the real protocol: a topic created with `cleanup.policy=compact`
//! and small segments, keyed records produced, the background cleaner left to run (short
//! backoff), then everything fetched back.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{fetch, name, produce, Client, TestBroker};
use highwater::log::batch_encode::{encode_batch, plain_record};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::CreateTopicsRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

const TOPIC: &str = "compacted";

async fn create_compacted_topic(client: &mut Client, configs: &[(&str, &str)]) -> i16 {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(TOPIC))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(configs)])
        .with_timeout_ms(5000);
    client.call(&request, 7).await.topics[0].error_code
}

/// One batch of one record; `None` key or value is null.
fn record(key: Option<&str>, value: Option<&str>, compression: Compression) -> Bytes {
    let record = plain_record(
        0,
        common::now_ms(),
        key.map(|k| Bytes::from(k.to_string())),
        value.map(|v| Bytes::from(v.to_string())),
    );
    encode_batch(&[record], compression).expect("encode")
}

type Stored = (i64, String, Option<String>);

/// Every record up to the high watermark, following empty batches by their last offset.
async fn fetch_everything(client: &mut Client) -> Vec<Stored> {
    let mut all = Vec::new();
    let mut next = 0;
    loop {
        let data = fetch(client, TOPIC, 0, next).await;
        assert_eq!(data.error_code, 0, "fetch at {next}");
        if next >= data.high_watermark {
            return all;
        }
        let mut bytes = data.records.clone().expect("records");
        let mut advanced = false;
        for set in RecordBatchDecoder::decode_all(&mut bytes).expect("whole batches") {
            for r in set.records.iter().filter(|r| r.offset >= next) {
                let text = |b: &Bytes| String::from_utf8_lossy(b).to_string();
                all.push((
                    r.offset,
                    text(r.key.as_ref().expect("key")),
                    r.value.as_ref().map(text),
                ));
            }
        }
        let mut raw = data.records.clone().expect("records");
        while raw.len() >= 61 {
            let length = i32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]) as usize;
            let base = i64::from_be_bytes(raw[..8].try_into().expect("8 bytes"));
            let delta = i32::from_be_bytes([raw[23], raw[24], raw[25], raw[26]]);
            if raw.len() < 12 + length {
                break;
            }
            next = next.max(base + i64::from(delta) + 1);
            advanced = true;
            let _ = raw.split_to(12 + length);
        }
        assert!(advanced, "a fetch below the high watermark returns a batch");
    }
}

type Latest = BTreeMap<String, (i64, Option<String>)>;

/// Produces 80 records over keys `key-0`..`key-6`, gzip and uncompressed, the last write
/// of `key-6` a tombstone; returns each key's last offset and value.
async fn produce_keyed(client: &mut Client) -> Latest {
    let mut latest = Latest::new();
    for i in 0..80 {
        let key = format!("key-{}", i % 7);
        let value = (i != 76).then(|| format!("value-{i}"));
        let codec = [Compression::Gzip, Compression::None][i % 2];
        let batch = record(Some(&key), value.as_deref(), codec);
        let response = produce(client, TOPIC, 0, batch).await;
        assert_eq!(response.error_code, 0);
        latest.insert(key, (response.base_offset, value));
    }
    latest
}

/// Goal: a compacted topic keeps the latest value of every key at its original offset and
/// drops a tombstone once `delete.retention.ms` has passed, with the cleaner running in
/// the background; a record without a key is refused. Method: produce 80 keyed records
/// (the last write of one key a tombstone) into 1 KiB segments, poll with a deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_latest_value_per_key() {
    // 1 KiB segments from the broker default: a topic's segment.bytes is at least 1 MiB.
    let keys = [
        ("log.cleaner.backoff.ms", "50"),
        ("log.segment.bytes", "1024"),
    ];
    let broker = TestBroker::start(&keys).await;
    let mut client = broker.client().await;
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", "200"),
    ];
    assert_eq!(create_compacted_topic(&mut client, &configs).await, 0);
    let mut latest = produce_keyed(&mut client).await;
    let refused = produce(
        &mut client,
        TOPIC,
        0,
        record(None, Some("x"), Compression::None),
    )
    .await;
    assert_eq!(refused.error_code, 87, "INVALID_RECORD for a null key");

    let deadline = Instant::now() + Duration::from_secs(60);
    let tombstone_offset = latest["key-6"].0;
    loop {
        // Keep a little dirty data coming so that later rounds run and drop the tombstone.
        let filler = record(Some("filler"), Some("f"), Compression::None);
        let filled = produce(&mut client, TOPIC, 0, filler).await;
        latest.insert("filler".into(), (filled.base_offset, Some("f".into())));
        let stored = fetch_everything(&mut client).await;
        let offsets: Vec<i64> = stored.iter().map(|r| r.0).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets increase");
        for (key, (offset, value)) in &latest {
            let found = stored.iter().find(|r| r.0 == *offset);
            if value.is_some() {
                assert_eq!(
                    found,
                    Some(&(*offset, key.clone(), value.clone())),
                    "latest {key}"
                );
            }
        }
        let tombstone_gone = !stored.iter().any(|r| r.0 == tombstone_offset);
        let compacted = stored.iter().filter(|r| r.1.starts_with("key-")).count() <= 7;
        if tombstone_gone && compacted {
            assert!(
                !stored.iter().any(|r| r.1 == "key-6"),
                "deleted key is gone"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not compacted in time: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let checkpoint = broker.dir.path().join("cleaner-offset-checkpoint");
    let text = std::fs::read_to_string(checkpoint).expect("cleaner-offset-checkpoint");
    assert!(text.contains(&format!("{TOPIC} 0 ")), "{text}");
    broker.stop().await;
}

/// Goal (KIP-467): a batch with keyless records sent to a compacted topic is refused with
/// INVALID_RECORD naming each keyless record by its index in the batch, and Kafka's error
/// message, so that a client fails exactly those records. Before, only the code came back.
#[tokio::test]
async fn keyless_records_in_a_compacted_topic_are_named_in_record_errors() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let configs = [("cleanup.policy", "compact")];
    assert_eq!(create_compacted_topic(&mut client, &configs).await, 0);
    let keys = [Some("a"), None, Some("b"), None];
    let records: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let key = key.map(|k| Bytes::from(k.to_string()));
            plain_record(i as i64, common::now_ms(), key, Some(Bytes::from("v")))
        })
        .collect();
    let batch = encode_batch(&records, Compression::None).expect("encode");
    let refused = produce(&mut client, TOPIC, 0, batch).await;
    assert_eq!(refused.error_code, 87, "INVALID_RECORD");
    let message =
        format!("Compacted topic cannot accept message without key in topic partition {TOPIC}-0");
    let named: Vec<(i32, Option<String>)> = refused
        .record_errors
        .iter()
        .map(|e| {
            (
                e.batch_index,
                e.batch_index_error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    assert_eq!(
        named,
        [(1, Some(message.clone())), (3, Some(message.clone()))]
    );
    let summary = format!(
        "One or more records have been rejected due to 2 record errors in total, and only \
         showing the first three errors at most: [RecordError(batchIndex=1, message='{message}'), \
         RecordError(batchIndex=3, message='{message}')]"
    );
    assert_eq!(refused.error_message.as_deref(), Some(summary.as_str()));
    assert_eq!(
        fetch(&mut client, TOPIC, 0, 0).await.high_watermark,
        0,
        "nothing written"
    );
}
