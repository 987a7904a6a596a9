"""confluent-kafka (librdkafka 2.16): admin, produce and assign()-consume, offsets for times.

The consumer is given a group.id because librdkafka requires one, but it only ever assign()s
partitions and commits nothing.
"""

import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TopicCollection,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from helpers import TS_DELTAS, TS_EXPECTED, stored_codecs, wait_until, create_topic

TIMEOUT_S = 30
CLIENT_ID = "compat-confluent-python"


@pytest.fixture
def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID})


def produce(bootstrap, topic, messages, **conf):
    """Produces (partition, key, value, headers, timestamp) tuples; returns acked offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "enable.idempotence": True, "acks": "all", **conf})
    acked = {}
    errors = []

    def on_delivery(err, msg, i):
        if err is not None:
            errors.append(err)
        else:
            acked[i] = (msg.partition(), msg.offset())

    for i, (partition, key, value, headers, ts) in enumerate(messages):
        producer.produce(topic, value=value, key=key, partition=partition, headers=headers,
                         timestamp=ts,
                         on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0, "all messages delivered"
    assert not errors, errors
    return acked


def consume_all(bootstrap, topic, partitions):
    """Reads every partition from the beginning to its end; returns {partition: [msg]}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "group.id": "compat-assign-only",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    at_end = set()
    deadline = time.monotonic() + TIMEOUT_S
    while len(at_end) < partitions:
        assert time.monotonic() < deadline, f"only partitions {at_end} reached their end"
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            at_end.add(msg.partition())
            continue
        got[msg.partition()].append(msg)
    consumer.close()
    return got


def test_round_trip_keys_values_headers_over_four_partitions(bootstrap, admin, topic_name):
    """Goal: what the producer sent is what the consumer reads, field by field, in order per
    partition. Method: 400 messages over 4 explicit partitions with null and empty keys and
    values, repeated and null-valued headers and explicit timestamps."""
    topic = topic_name()
    create_topic(admin, topic, 4)
    base = int(time.time() * 1000) - 3_600_000
    messages = []
    for i in range(400):
        key = None if i % 9 == 0 else (b"" if i % 9 == 1 else b"key-%d" % (i % 13))
        value = None if i % 11 == 0 else (b"" if i % 11 == 1 else bytes(range(i % 256)) * 3)
        headers = [("n", b"%d" % i), ("dup", b"first"), ("dup", b"second"), ("nil", None)]
        messages.append((i % 4, key, value, headers, base + i))
    # One batch per partition: librdkafka sends a batch uncompressed when compression would
    # not shrink it, and a lone tiny message would not shrink.
    acked = produce(bootstrap, topic, messages, **{"compression.type": "lz4", "linger.ms": 500})

    got = consume_all(bootstrap, topic, 4)
    for p in range(4):
        want = [(i, m) for i, m in enumerate(messages) if m[0] == p]
        assert len(got[p]) == len(want), f"partition {p}"
        for offset, ((i, (_, key, value, headers, ts)), msg) in enumerate(zip(want, got[p])):
            assert msg.offset() == offset == acked[i][1], f"message {i}"
            assert acked[i][0] == p
            assert msg.key() == key, f"key of message {i}"
            assert msg.value() == value, f"value of message {i}"
            assert msg.headers() == headers, f"headers of message {i}"
            assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, ts), f"timestamp of message {i}"
        assert stored_codecs(bootstrap, topic, p) == "lz4", f"partition {p} stored as lz4"


def test_log_append_time_topic_gives_every_record_the_brokers_time(bootstrap, admin,
                                                                  topic_name):
    """Goal: with message.timestamp.type=LogAppendTime the broker's time replaces the
    producer's, in the delivery report and for the consumer. Method: 20 messages an hour
    old in one batch; both see one LOG_APPEND_TIME timestamp within the produce window."""
    topic = topic_name()
    create_topic(admin, topic, 1, config={"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "linger.ms": 500})
    reported = []
    before = int(time.time() * 1000)
    for i in range(20):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=before - 3_600_000,
                         on_delivery=lambda err, msg: reported.append((err, msg.timestamp())))
    assert producer.flush(TIMEOUT_S) == 0
    after = int(time.time() * 1000)
    assert all(err is None for err, _ in reported), reported
    stamps = {ts for _, ts in reported}
    assert len(stamps) == 1, stamps
    ((kind, stamp),) = stamps
    assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= after, (kind, stamp)
    got = consume_all(bootstrap, topic, 1)[0]
    assert [m.timestamp() for m in got] == [(TIMESTAMP_LOG_APPEND_TIME, stamp)] * 20


def test_keyless_records_fail_alone_in_a_compacted_topic(bootstrap, admin, topic_name):
    """Goal (KIP-467): the broker names the keyless records of a batch sent to a compacted
    topic, so librdkafka fails them with INVALID_RECORD and their batch mates with
    _INVALID_DIFFERENT_RECORD (all four got INVALID_RECORD from a broker without record
    errors). Method: keys a, null, b, null in one batch."""
    topic = topic_name()
    create_topic(admin, topic, 1, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "linger.ms": 500, "enable.idempotence": False, "retries": 0})
    failed = {}
    for i, key in enumerate([b"a", None, b"b", None]):
        producer.produce(topic, key=key, value=b"v", partition=0,
                         on_delivery=lambda err, msg, i=i: failed.__setitem__(i, err.code()))
    assert producer.flush(TIMEOUT_S) == 0
    assert failed == {0: KafkaError._INVALID_DIFFERENT_RECORD, 1: KafkaError.INVALID_RECORD,
                      2: KafkaError._INVALID_DIFFERENT_RECORD, 3: KafkaError.INVALID_RECORD}


def test_a_record_older_than_the_window_fails_its_batch(bootstrap, admin, topic_name):
    """Goal (KIP-937): with message.timestamp.before.max.ms, a two-hour-old record between
    two current ones in one batch is refused: librdkafka fails all three with
    INVALID_TIMESTAMP (highwater checked only a batch's first and largest timestamps and
    accepted it)."""
    topic = topic_name()
    create_topic(admin, topic, 1, config={"message.timestamp.before.max.ms": "3600000"})
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "linger.ms": 500, "enable.idempotence": False, "retries": 0})
    now = int(time.time() * 1000)
    failed = {}
    for i, ts in enumerate([now, now - 7_200_000, now]):
        producer.produce(topic, value=b"v", partition=0, timestamp=ts,
                         on_delivery=lambda err, msg, i=i: failed.__setitem__(
                             i, err.code() if err else None))
    assert producer.flush(TIMEOUT_S) == 0
    assert failed == {0: KafkaError.INVALID_TIMESTAMP, 1: KafkaError.INVALID_TIMESTAMP,
                      2: KafkaError.INVALID_TIMESTAMP}, failed


# (config, value, Kafka 4.1.1's refusal); None: accepted.
TOPIC_CONFIG_CASES = [
    ("segment.bytes", "1000",
     "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"),
    ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
    ("min.cleanable.dirty.ratio", "2", "Invalid value 2.0 for configuration "
     "min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("retention.ms", "-5",
     "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ("retention.ms", "abc",
     "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ("flush.messages", "0",
     "Invalid value 0 for configuration flush.messages: Value must be at least 1"),
    ("preallocate", "maybe", "Invalid value maybe for configuration preallocate: "
     "Expected value to be either true or false"),
    ("cleanup.policy", "compact,foo", "Invalid value foo for configuration cleanup.policy: "
     "String must be one of: compact, delete"),
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ("retention.ms", "-1", None),
]


def test_topic_configs_are_checked_at_kafkas_bounds_with_its_messages(bootstrap, admin,
                                                                      topic_name):
    """Goal (issue 13): CreateTopics refuses a topic config outside Kafka 4's range with
    INVALID_CONFIG and Kafka's ConfigException text (highwater accepted segment.ms=0,
    flush.messages=0, a dirty ratio of 2 and others before). Method: one topic per case
    through the AdminClient (kafka-topics checks configs itself before sending)."""
    for key, value, refusal in TOPIC_CONFIG_CASES:
        name = topic_name()
        futures = admin.create_topics([NewTopic(name, 1, 1, config={key: value})])
        if refusal is None:
            futures[name].result(TIMEOUT_S)
            continue
        with pytest.raises(KafkaException) as raised:
            futures[name].result(TIMEOUT_S)
        error = raised.value.args[0]
        assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG, refusal), (key, value)


def test_offsets_for_times_and_watermarks(bootstrap, admin, topic_name):
    """Goal: ListOffsets by timestamp gives the first offset whose timestamp is >= the target,
    -1 past the end; watermarks and MAX_TIMESTAMP agree. Method: 8 messages in one batch."""
    topic = topic_name()
    create_topic(admin, topic, 1)
    base = int(time.time() * 1000) - 3_600_000
    produce(bootstrap, topic, [(0, b"k%d" % i, b"v%d" % i, None, base + d)
                               for i, d in enumerate(TS_DELTAS)], **{"linger.ms": 2000})

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "group.id": "compat-assign-only",
                         "enable.auto.commit": False})
    for target, want in TS_EXPECTED:
        (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + target)],
                                           timeout=TIMEOUT_S)
        assert tp.error is None
        assert tp.offset == (-1 if want is None else want), f"target base+{target}"
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S) == (
        0, len(TS_DELTAS))
    consumer.close()

    tp = TopicPartition(topic, 0)
    result = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(TIMEOUT_S)
    assert (result.offset, result.timestamp) == (6, base + 60)
    result = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(TIMEOUT_S)
    assert result.offset == 0
    result = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(TIMEOUT_S)
    assert result.offset == len(TS_DELTAS)


def test_admin_create_describe_delete(bootstrap, admin, topic_name):
    """Goal: the topic life cycle through librdkafka's admin API. Method: create with 3
    partitions, describe, delete, wait until metadata no longer lists it."""
    topic = topic_name()
    create_topic(admin, topic, 3)
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT_S)
    assert desc.name == topic
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader is not None for p in desc.partitions)
    assert str(desc.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA", "a topic id (Metadata v10+)"

    admin.delete_topics([topic], operation_timeout=TIMEOUT_S)[topic].result(TIMEOUT_S)
    wait_until("the topic to disappear",
               lambda: topic not in admin.list_topics(timeout=TIMEOUT_S).topics)
