"""kafka-python (pure Python client): admin topics, produce and assign()-consume, offsets.

The consumer has group_id=None: it never talks to a group coordinator.
"""

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from helpers import TS_DELTAS, TS_EXPECTED, stored_codecs, wait_until

TIMEOUT_MS = 30_000


@pytest.fixture
def admin(bootstrap):
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    yield client
    client.close()


def create_topic(admin, name, partitions):
    admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}},
                        timeout_ms=TIMEOUT_MS, wait_for_metadata=True)


def new_consumer(bootstrap):
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", request_timeout_ms=TIMEOUT_MS,
                         consumer_timeout_ms=1000)


def test_admin_creates_lists_and_deletes_topics(admin, topic_name):
    """Goal: CreateTopics, Metadata and DeleteTopics through KafkaAdminClient, with the
    error codes for a duplicate create and an unknown delete."""
    topic = topic_name()
    create_topic(admin, topic, 3)
    assert topic in admin.list_topics()
    (desc,) = admin.describe_topics([topic])
    assert (desc["name"], desc["error_code"], desc["is_internal"]) == (topic, 0, False)
    assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2]
    assert all(p["leader_id"] >= 0 and p["error_code"] == 0 for p in desc["partitions"])

    with pytest.raises(TopicAlreadyExistsError):
        create_topic(admin, topic, 3)

    admin.delete_topics([topic], timeout_ms=TIMEOUT_MS)
    wait_until("the topic to leave list_topics", lambda: topic not in admin.list_topics())
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([topic_name("-never-created")], timeout_ms=TIMEOUT_MS)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_round_trip_keys_values_headers_over_three_partitions(bootstrap, admin, topic_name,
                                                              compression):
    """Goal: records come back exactly as sent, in order per partition. Method: an idempotent
    acks=all producer sends 3,000 records with keys, headers and timestamps to 3 explicit
    partitions; a consumer assign()s them, seeks to the beginning and reads to the end."""
    topic = topic_name()
    create_topic(admin, topic, 3)
    base = int(time.time() * 1000) - 3_600_000
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                             compression_type=compression, linger_ms=200)
    sent = {p: [] for p in range(3)}
    futures = []
    for i in range(3000):
        p = i % 3
        key = None if i % 7 == 0 else b"key-%d" % (i % 31)
        # Compressible (repeated) values: kafka-python sends a batch uncompressed when
        # compression would not shrink it.
        value = b"" if i % 10 == 0 else (b"value-%d-" % i) * (4 + i % 20)
        headers = [("i", b"%d" % i), ("kind", b"even" if i % 2 == 0 else b"odd")]
        futures.append((p, producer.send(topic, key=key, value=value, headers=headers,
                                         partition=p, timestamp_ms=base + i)))
        sent[p].append((key, value, headers, base + i))
    producer.flush(timeout=30)
    for p, f in futures:
        md = f.get(timeout=30)
        assert md.partition == p
    producer.close()

    consumer = new_consumer(bootstrap)
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got = {p: [] for p in range(3)}
    deadline = time.monotonic() + 60
    while sum(map(len, got.values())) < 3000 and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=500).items():
            got[tp.partition].extend(records)
    assert consumer.end_offsets(tps) == {tp: len(sent[tp.partition]) for tp in tps}
    assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
    consumer.close()

    for p in range(3):
        assert len(got[p]) == len(sent[p]), f"partition {p}"
        for offset, (record, (key, value, headers, ts)) in enumerate(zip(got[p], sent[p])):
            assert record.offset == offset
            assert record.key == key
            assert record.value == value
            assert list(record.headers) == headers
            assert record.timestamp == ts
            assert record.timestamp_type == 0, "CreateTime"
        assert stored_codecs(bootstrap, topic, p) == (compression or "none")


def test_offsets_for_times_beginning_and_end_offsets(bootstrap, admin, topic_name):
    """Goal: ListOffsets by timestamp (first offset whose timestamp is >= the target, None past
    the end) and earliest/latest. Method: 8 records with chosen timestamps, one batch each."""
    topic = topic_name()
    create_topic(admin, topic, 1)
    base = int(time.time() * 1000) - 3_600_000
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i, d in enumerate(TS_DELTAS):
        md = producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                           timestamp_ms=base + d).get(timeout=30)
        assert md.offset == i
    producer.close()

    consumer = new_consumer(bootstrap)
    tp = TopicPartition(topic, 0)
    for target, want in TS_EXPECTED:
        found = consumer.offsets_for_times({tp: base + target})[tp]
        if want is None:
            assert found is None, f"target base+{target}"
        else:
            assert (found.offset, found.timestamp) == (want, base + TS_DELTAS[want]), (
                f"target base+{target}")
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: len(TS_DELTAS)}
    consumer.close()


def test_legacy_alter_configs_sets_a_topic_config(admin, topic_name):
    """Goal: AlterConfigs, the legacy API (forced here; kafka-python picks it on brokers
    without IncrementalAlterConfigs), sets a topic config that DescribeConfigs then shows
    as the topic's own, and keeps the other override kafka-python resends."""
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    topic = topic_name()
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})],
                        timeout_ms=TIMEOUT_MS)
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "2000"})
    result = admin.alter_configs([resource], incremental=False)
    assert result == {"topic": {topic: "OK"}}, result
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    configs = described["topic"][topic]
    for key, value in [("retention.ms", "2000"), ("cleanup.policy", "compact")]:
        assert configs[key]["value"] == value, (key, configs[key])
        assert configs[key]["config_source"] == "DYNAMIC_TOPIC_CONFIG", (key, configs[key])
