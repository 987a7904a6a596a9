//! Valid request frames for the `request` fuzz target: the seed corpus (`gen_seeds`) and
//! the requests the target replays once at start-up so that topics and records exist.
//!
//! A frame here is what `parse_request` takes: request header then body, without the
//! 4-byte length prefix.

pub mod sasl;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Topics the target creates at start-up.
pub const TOPIC_A: &str = "fuzz-a";
pub const TOPIC_B: &str = "fuzz-b";

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn name(text: &str) -> TopicName {
    TopicName(s(text))
}

/// Encodes `body` at `version` behind a request header with `correlation_id`; `None` when
/// the message cannot be encoded at that version.
pub fn frame<R: Request + Encodable>(body: &R, version: i16, correlation_id: i32) -> Option<Bytes> {
    let key = ApiKey::try_from(R::KEY).ok()?;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(s("fuzz")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}

/// One record batch (v2) of `count` records, idempotent when `producer_id >= 0`.
pub fn batch(count: i32, producer_id: i64, base_sequence: i32, compression: Compression) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: if producer_id >= 0 { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: if producer_id >= 0 {
                base_sequence + i
            } else {
                -1
            },
            timestamp: 1_700_000_000_000 + i64::from(i),
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("record batch");
    buf.freeze()
}

fn create_topics(validate_only: bool) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(name(TOPIC_A))
                .with_num_partitions(2)
                .with_replication_factor(1),
            CreatableTopic::default()
                .with_name(name(TOPIC_B))
                .with_num_partitions(1)
                .with_replication_factor(-1)
                .with_configs(vec![
                    CreatableTopicConfig::default()
                        .with_name(s("cleanup.policy"))
                        .with_value(Some(s("delete"))),
                    CreatableTopicConfig::default()
                        .with_name(s("segment.bytes"))
                        .with_value(Some(s("1048576"))),
                ]),
        ])
        .with_timeout_ms(5000)
        .with_validate_only(validate_only)
}

fn produce(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

fn fetch(topic: &str, partition: i32, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 16)])])
}

fn list_offsets(timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(TOPIC_A))
            .with_partitions(vec![
                ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp),
                ListOffsetsPartition::default()
                    .with_partition_index(1)
                    .with_current_leader_epoch(0)
                    .with_timestamp(timestamp),
            ])])
}

/// Frames replayed once when the target starts: two topics, records and an idempotent
/// producer's first batch (the first producer id of a fresh broker).
pub fn setup() -> Vec<Bytes> {
    let mut frames = Vec::new();
    frames.extend(frame(&create_topics(false), 7, 0));
    for partition in 0..2 {
        let records = batch(5, -1, -1, Compression::None);
        frames.extend(frame(&produce(TOPIC_A, partition, records, -1), 9, 0));
    }
    frames.extend(frame(
        &InitProducerIdRequest::default()
            .with_transaction_timeout_ms(-1)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        4,
        0,
    ));
    frames.extend(frame(
        &produce(TOPIC_B, 0, batch(3, 0, 0, Compression::None), -1),
        9,
        0,
    ));
    frames
}

/// Adds `body` at every version in `versions` that it encodes at.
fn add<R: Request + Encodable>(
    out: &mut Vec<(String, Bytes)>,
    label: &str,
    body: &R,
    versions: std::ops::RangeInclusive<i16>,
) {
    for version in versions {
        if let Some(bytes) = frame(body, version, 1) {
            out.push((format!("{label}-v{version}"), bytes));
        }
    }
}

/// The seed corpus: every served API at every served version, with a few variants each.
pub fn seeds() -> Vec<(String, Bytes)> {
    let mut out = Vec::new();
    let api_versions = ApiVersionsRequest::default()
        .with_client_software_name(s("fuzz"))
        .with_client_software_version(s("1.0"));
    add(&mut out, "api-versions", &api_versions, 0..=5);

    let all = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(true);
    add(&mut out, "metadata-all", &all, 0..=13);
    let some = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(TOPIC_A))),
            MetadataRequestTopic::default().with_name(Some(name("fuzz-auto"))),
        ]))
        .with_allow_auto_topic_creation(true);
    add(&mut out, "metadata-topics", &some, 0..=13);

    add(&mut out, "create-topics", &create_topics(false), 2..=7);
    add(
        &mut out,
        "create-topics-validate",
        &create_topics(true),
        2..=7,
    );

    let plain = produce(TOPIC_A, 0, batch(3, -1, -1, Compression::None), -1);
    add(&mut out, "produce", &plain, 3..=13);
    let acks1 = produce(TOPIC_A, 1, batch(1, -1, -1, Compression::None), 1);
    add(&mut out, "produce-acks1", &acks1, 9..=9);
    let acks0 = produce(TOPIC_A, 1, batch(2, -1, -1, Compression::None), 0);
    add(&mut out, "produce-acks0", &acks0, 9..=9);
    let idempotent = produce(TOPIC_B, 0, batch(2, 0, 3, Compression::None), -1);
    add(&mut out, "produce-idempotent", &idempotent, 9..=9);
    let gzip = produce(TOPIC_B, 0, batch(4, -1, -1, Compression::Gzip), -1);
    add(&mut out, "produce-gzip", &gzip, 9..=9);
    let mut two = batch(2, -1, -1, Compression::None).to_vec();
    two.extend_from_slice(&batch(3, -1, -1, Compression::None));
    let two = produce(TOPIC_A, 0, Bytes::from(two), -1);
    add(&mut out, "produce-two-batches", &two, 9..=9);

    add(&mut out, "fetch", &fetch(TOPIC_A, 0, 0), 4..=18);
    add(&mut out, "fetch-middle", &fetch(TOPIC_A, 1, 3), 12..=12);
    add(
        &mut out,
        "fetch-future",
        &fetch(TOPIC_B, 0, 1_000_000),
        12..=12,
    );

    add(&mut out, "list-offsets-latest", &list_offsets(-1), 1..=10);
    add(&mut out, "list-offsets-earliest", &list_offsets(-2), 7..=7);
    add(&mut out, "list-offsets-max-ts", &list_offsets(-3), 7..=7);
    add(
        &mut out,
        "list-offsets-ts",
        &list_offsets(1_700_000_000_002),
        7..=7,
    );

    let epochs = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name(TOPIC_A))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])]);
    add(&mut out, "offset-for-leader-epoch", &epochs, 2..=4);

    let configs = DescribeConfigsRequest::default()
        .with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(TOPIC_B))
                .with_configuration_keys(None),
            DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(s("1"))
                .with_configuration_keys(Some(vec![s("log.segment.bytes")])),
        ])
        .with_include_synonyms(true)
        .with_include_documentation(true);
    add(&mut out, "describe-configs", &configs, 1..=4);
    let configs = configs.with_include_documentation(false);
    add(&mut out, "describe-configs-nodoc", &configs, 1..=2);

    add(
        &mut out,
        "describe-cluster",
        &DescribeClusterRequest::default().with_endpoint_type(1),
        0..=2,
    );

    let group = FindCoordinatorRequest::default()
        .with_key(s("fuzz-group"))
        .with_key_type(0);
    add(&mut out, "find-coordinator-group", &group, 0..=3);
    let batched = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s("fuzz-txn"), s("fuzz-txn-2")]);
    add(&mut out, "find-coordinator-batched", &batched, 4..=6);

    let init = InitProducerIdRequest::default()
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    add(&mut out, "init-producer-id", &init, 0..=5);

    let partitions = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(TOPIC_B))
            .with_count(3)])
        .with_timeout_ms(5000);
    add(&mut out, "create-partitions", &partitions, 0..=3);

    let delete = DeleteTopicsRequest::default()
        .with_topic_names(vec![name("fuzz-auto")])
        .with_timeout_ms(5000);
    add(&mut out, "delete-topics", &delete, 1..=5);
    let delete = DeleteTopicsRequest::default()
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(name("fuzz-auto")))
        ])
        .with_timeout_ms(5000);
    add(&mut out, "delete-topics", &delete, 6..=6);
    out
}
