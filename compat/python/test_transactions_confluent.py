"""confluent-kafka (librdkafka 2.16) transactions: commit and abort as read_committed and
read_uncommitted consumers see them, offsets sent to a transaction, the last stable offset
held by an open transaction, and fencing of a zombie producer.

Every blocking client call has an explicit timeout (TIMEOUT_S or less), so a broker without
transactions fails each test within about half a minute instead of hanging it. Transactional
producers are never close()d: confluent-kafka's close() aborts an open transaction with an
infinite timeout; they are destroyed (garbage-collected) instead, which does not wait.

Offsets asserted below are Kafka's: every commit or abort marker takes one offset in each
partition of the transaction, and a consumer never sees the markers themselves. Markers are
written after EndTxn has been answered, so the readers wait for them instead of expecting
them at once.
"""

import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions,
                             IsolationLevel, KafkaError,
                             KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, OffsetSpec

from helpers import committed_offsets, wait_until, create_topic

TIMEOUT_S = 30
CLIENT_ID = "compat-confluent-txn"
# No transaction in these tests stays open for more than a few seconds; the broker aborts one
# that does after this long (Kafka's transaction.max.timeout.ms is 15 min).
TXN_TIMEOUT_MS = 60_000
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no commit for the partition


@pytest.fixture
def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID})


def txn_producer(bootstrap, txn_id, **conf):
    """A transactional producer whose transactions the broker times out after
    TXN_TIMEOUT_MS; init_transactions() is left to the test."""
    return Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                     "transactional.id": txn_id, "transaction.timeout.ms": TXN_TIMEOUT_MS,
                     "acks": "all", **conf})


def plain_producer(bootstrap):
    return Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                     "enable.idempotence": True, "acks": "all"})


class Acks:
    """A delivery callback: acked[value] = (partition, offset); errors as they came."""

    def __init__(self):
        self.acked = {}
        self.errors = []

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())


def send(producer, topic, records, flush=True):
    """Produces (partition, value) pairs; with flush, waits until all are acked and returns
    {value: (partition, offset)}."""
    acks = Acks()
    for partition, value in records:
        producer.produce(topic, value=value, key=b"k-" + value, partition=partition,
                         on_delivery=acks)
        producer.poll(0)
    if flush:
        assert producer.flush(TIMEOUT_S) == 0, "all records delivered"
        assert not acks.errors, acks.errors
        assert len(acks.acked) == len(records)
    return acks


def spread(prefix, per_partition, partitions):
    """per_partition records for each partition, values prefix-<partition>-<i>."""
    return [(p, b"%s-%d-%d" % (prefix, p, i))
            for i in range(per_partition) for p in range(partitions)]


def assert_offsets(acks, records, first):
    """Each partition's records were acked at consecutive offsets from first[partition]."""
    for p in sorted({p for p, _ in records}):
        values = [v for q, v in records if q == p]
        got = [acks.acked[v] for v in values]
        want = [(p, first[p] + i) for i in range(len(values))]
        assert got == want, f"offsets of partition {p}"


class Reader:
    """An assign()-only consumer of every partition from offset 0 at one isolation level.
    records[p] = [(offset, value)] in the order received; eof[p] = the offset of the latest
    end-of-partition event, cleared by a later record."""

    def __init__(self, bootstrap, topic, partitions, isolation):
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "client.id": f"{CLIENT_ID}-{isolation}",
            "group.id": "compat-assign-only", "isolation.level": isolation,
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": True, "fetch.wait.max.ms": 100})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                              for p in range(partitions)])
        self.records = {p: [] for p in range(partitions)}
        self.eof = {}

    def poll_for(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._poll_once(0.1)

    def _poll_once(self, timeout):
        msg = self.consumer.poll(timeout)
        if msg is None:
            return
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            self.eof[msg.partition()] = msg.offset()
            return
        self.records[msg.partition()].append((msg.offset(), msg.value()))
        self.eof.pop(msg.partition(), None)

    def until_end(self, ends, timeout_s=TIMEOUT_S):
        """Polls until each partition p has reported its end at offset >= ends[p]."""
        deadline = time.monotonic() + timeout_s
        while not all(self.eof.get(p, -1) >= end for p, end in ends.items()):
            assert time.monotonic() < deadline, (
                f"timed out after {timeout_s}s: ends {self.eof}, wanted {ends}; "
                f"{ {p: len(r) for p, r in self.records.items()} } records")
            self._poll_once(0.2)

    def values(self, partition):
        return [v for _, v in self.records[partition]]

    def close(self):
        self.consumer.close()


def fails_fatally(what, call):
    """Runs call(), which must raise KafkaException with a fatal error; returns the error."""
    with pytest.raises(KafkaException) as info:
        call()
    err = info.value.args[0]
    assert err.fatal(), f"{what}: {err.name()} ({err.code()}) is not fatal: {err}"
    return err


def test_committed_transaction_is_read_whole_by_read_committed(bootstrap, admin, topic_name):
    """Goal: a committed transaction over three partitions is delivered whole to a
    read_committed consumer, and its commit marker takes one offset per partition. Method:
    300 records in one transaction, commit; then a second transaction of 3 on the same
    producer; the consumer reads to the end of each partition."""
    topic = topic_name()
    create_topic(admin, topic, 3)
    producer = txn_producer(bootstrap, topic + "-txn")
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    first = spread(b"first", 100, 3)
    acks = send(producer, topic, first, flush=False)
    producer.commit_transaction(TIMEOUT_S)
    assert not acks.errors, acks.errors
    assert_offsets(acks, first, {p: 0 for p in range(3)})

    producer.begin_transaction()
    second = spread(b"second", 1, 3)
    acks2 = send(producer, topic, second, flush=False)
    producer.commit_transaction(TIMEOUT_S)
    assert not acks2.errors, acks2.errors
    # The first commit's marker sits at 100 in each partition.
    assert_offsets(acks2, second, {p: 101 for p in range(3)})

    reader = Reader(bootstrap, topic, 3, "read_committed")
    try:
        reader.until_end({p: 103 for p in range(3)})
        for p in range(3):
            want = [(i, b"first-%d-%d" % (p, i)) for i in range(100)]
            want.append((101, b"second-%d-0" % p))
            assert reader.records[p] == want, f"partition {p}"
            assert reader.consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=TIMEOUT_S) == (0, 103)
    finally:
        reader.close()


def test_aborted_transaction_is_seen_only_by_read_uncommitted(bootstrap, admin, topic_name):
    """Goal: records of an aborted transaction never reach a read_committed consumer but do
    reach a read_uncommitted one; the committed transaction after it is read by both, at its
    offsets past the abort marker. Method: 10 records per partition written (flushed) and
    aborted, then 10 per partition committed, by one producer."""
    topic = topic_name()
    create_topic(admin, topic, 3)
    producer = txn_producer(bootstrap, topic + "-txn")
    producer.init_transactions(TIMEOUT_S)

    producer.begin_transaction()
    aborted = spread(b"aborted", 10, 3)
    # Flushed first: abort_transaction() purges records not yet sent, and these must be in
    # the log for the test to mean anything.
    acks = send(producer, topic, aborted)
    assert_offsets(acks, aborted, {p: 0 for p in range(3)})
    producer.abort_transaction(TIMEOUT_S)

    producer.begin_transaction()
    committed = spread(b"committed", 10, 3)
    acks = send(producer, topic, committed, flush=False)
    producer.commit_transaction(TIMEOUT_S)
    assert not acks.errors, acks.errors
    # Aborted records at 0-9, the abort marker at 10, committed at 11-20, commit marker 21.
    assert_offsets(acks, committed, {p: 11 for p in range(3)})
    ends = {p: 22 for p in range(3)}

    rc = Reader(bootstrap, topic, 3, "read_committed")
    ru = Reader(bootstrap, topic, 3, "read_uncommitted")
    try:
        rc.until_end(ends)
        ru.until_end(ends)
        for p in range(3):
            want_committed = [(11 + i, b"committed-%d-%d" % (p, i)) for i in range(10)]
            want_aborted = [(i, b"aborted-%d-%d" % (p, i)) for i in range(10)]
            assert rc.records[p] == want_committed, f"read_committed, partition {p}"
            assert ru.records[p] == want_aborted + want_committed, \
                f"read_uncommitted, partition {p}"
    finally:
        rc.close()
        ru.close()


def test_offsets_sent_to_a_transaction_commit_with_it(bootstrap, admin, topic_name):
    """Goal: send_offsets_to_transaction() commits a group's offsets atomically with the
    transaction's records (KIP-447, with the consumer's group metadata): nothing is committed
    when the transaction aborts, and the input's end offsets are when it commits. Method: a
    subscribed consumer reads 30 input records; a transaction copies them to an output topic
    and sends the consumer's positions; first aborted, then the same again committed."""
    source = topic_name("-in")
    sink = topic_name("-out")
    group = source + "-group"
    create_topic(admin, source, 3)
    create_topic(admin, sink, 3)
    inputs = spread(b"in", 10, 3)
    send(plain_producer(bootstrap), source, inputs)

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
    producer = txn_producer(bootstrap, source + "-txn")
    try:
        consumer.subscribe([source])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(inputs):
            assert time.monotonic() < deadline, f"only {len(got)} input records consumed"
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.partition(), msg.value()))
        assert sorted(got) == sorted(inputs)
        positions = consumer.position(consumer.assignment())
        assert sorted((tp.partition, tp.offset) for tp in positions) == [
            (p, 10) for p in range(3)]

        producer.init_transactions(TIMEOUT_S)

        def copy_in_a_transaction(prefix):
            producer.begin_transaction()
            outputs = [(p, prefix + v) for p, v in got]
            send(producer, sink, outputs)
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(), TIMEOUT_S)
            return outputs

        copy_in_a_transaction(b"aborted-")
        producer.abort_transaction(TIMEOUT_S)
        assert committed(bootstrap, group, source) == {p: NO_OFFSET for p in range(3)}, \
            "nothing committed by the aborted transaction"

        outputs = copy_in_a_transaction(b"out-")
        producer.commit_transaction(TIMEOUT_S)

        # Read back through the member itself and through the admin API (OffsetFetch with
        # require_stable, so a pending transactional commit would not count).
        assert committed(bootstrap, group, source) == {p: 10 for p in range(3)}
        mine = consumer.committed([TopicPartition(source, p) for p in range(3)],
                                  timeout=TIMEOUT_S)
        assert sorted((tp.partition, tp.offset) for tp in mine) == [(p, 10) for p in range(3)]
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(source, p)
                                                        for p in range(3)])]
        listed = admin.list_consumer_group_offsets(
            request, require_stable=True, request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
        assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == [
            (p, 10) for p in range(3)]
    finally:
        consumer.close()

    # The output: the aborted copy at 0-9, its marker at 10, the committed copy at 11-20.
    reader = Reader(bootstrap, sink, 3, "read_committed")
    try:
        reader.until_end({p: 22 for p in range(3)})
        for p in range(3):
            assert reader.values(p) == [v for q, v in outputs if q == p], f"partition {p}"
            assert [o for o, _ in reader.records[p]] == list(range(11, 21))
    finally:
        reader.close()


def committed(bootstrap, group, topic):
    """{partition: committed offset} of the group, read by a consumer outside the group."""
    return {p: o for p, (o, _) in committed_offsets(bootstrap, group, topic, 3).items()}


def list_latest(admin, tp, isolation):
    result = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation,
                                request_timeout=TIMEOUT_S)[tp].result(TIMEOUT_S)
    return result.offset


def test_an_open_transaction_holds_back_read_committed_consumers(bootstrap, admin, topic_name):
    """Goal: while a transaction is open, read_committed consumers stop at its first offset
    (the last stable offset), even for records of other producers written after it, and
    ListOffsets(latest) at READ_COMMITTED answers that offset (at READ_UNCOMMITTED the high
    watermark); read_uncommitted consumers read on.
    Once it commits, everything up to the marker is readable. Method: plain records at 0-1,
    an open transaction at 2-4, plain records at 5-9, then the commit (marker at 10)."""
    topic = topic_name()
    create_topic(admin, topic, 1)
    tp = TopicPartition(topic, 0)
    plain = plain_producer(bootstrap)
    before = [(0, b"before-%d" % i) for i in range(2)]
    send(plain, topic, before)

    txn = txn_producer(bootstrap, topic + "-txn")
    txn.init_transactions(TIMEOUT_S)
    txn.begin_transaction()
    opened = [(0, b"open-%d" % i) for i in range(3)]
    acks = send(txn, topic, opened)
    assert_offsets(acks, opened, {0: 2})
    after = [(0, b"after-%d" % i) for i in range(5)]
    acks = send(plain, topic, after)
    assert_offsets(acks, after, {0: 5})

    rc = Reader(bootstrap, topic, 1, "read_committed")
    ru = Reader(bootstrap, topic, 1, "read_uncommitted")
    try:
        ru.until_end({0: 10})
        assert ru.values(0) == [v for _, v in before + opened + after]
        rc.until_end({0: 2})
        rc.poll_for(3)
        assert rc.records[0] == [(0, b"before-0"), (1, b"before-1")], \
            "nothing past the open transaction's first offset"
        assert rc.eof.get(0) == 2, "the end a read_committed consumer sees is the LSO"

        assert list_latest(admin, tp, IsolationLevel.READ_COMMITTED) == 2, "the LSO"
        assert list_latest(admin, tp, IsolationLevel.READ_UNCOMMITTED) == 10, "the HWM"
        # librdkafka queries watermarks with ListOffsets at the consumer's isolation level.
        assert rc.consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (0, 2)
        assert ru.consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (0, 10)

        txn.commit_transaction(TIMEOUT_S)
        rc.until_end({0: 11})
        assert rc.records[0] == [(i, v) for i, (_, v) in enumerate(before + opened + after)]
        wait_until("the LSO to pass the commit marker",
                   lambda: list_latest(admin, tp, IsolationLevel.READ_COMMITTED) == 11)
        assert list_latest(admin, tp, IsolationLevel.READ_UNCOMMITTED) == 11
        assert rc.consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (0, 11)
    finally:
        rc.close()
        ru.close()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
        bootstrap, admin, topic_name):
    """Goal: init_transactions() of a new producer with the same transactional.id aborts the
    old one's open transaction and fences it: the old producer's next commit fails with a
    fatal error, and so does anything it tries after; the new one works. Method: the zombie
    writes one record in an open transaction; the new producer initialises, the zombie
    writes another and commits; the new producer commits one record."""
    topic = topic_name()
    create_topic(admin, topic, 1)
    txn_id = topic + "-txn"
    zombie = txn_producer(bootstrap, txn_id)
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    acks = send(zombie, topic, [(0, b"zombie-0")])
    assert acks.acked[b"zombie-0"] == (0, 0)

    successor = txn_producer(bootstrap, txn_id)
    successor.init_transactions(TIMEOUT_S)

    late = send(zombie, topic, [(0, b"zombie-1")], flush=False)
    # Kafka answers the zombie's Produce with INVALID_PRODUCER_EPOCH (47); librdkafka makes
    # that its fatal _FENCED, and the commit fails with it without sending EndTxn.
    err = fails_fatally("the zombie's commit", lambda: zombie.commit_transaction(TIMEOUT_S))
    assert err.code() == KafkaError._FENCED, err
    zombie.poll(0)
    assert b"zombie-1" not in late.acked, "the fenced producer's record was not appended"
    # librdkafka keeps the failed commit as the API call in progress (another call would be
    # refused with _CONFLICT): it is called again and answers the same fatal error.
    for what, call in (("commit_transaction() again", zombie.commit_transaction),
                       ("abort_transaction()", zombie.abort_transaction)):
        err = fails_fatally(what, lambda call=call: call(TIMEOUT_S))
        assert err.code() == KafkaError._FENCED, f"{what}: {err}"
    with pytest.raises(KafkaException) as info:
        zombie.produce(topic, value=b"zombie-2", partition=0)
    assert info.value.args[0].code() == KafkaError._FATAL, "produce() refused once fatal"

    successor.begin_transaction()
    acks = send(successor, topic, [(0, b"successor-0")], flush=False)
    successor.commit_transaction(TIMEOUT_S)
    assert not acks.errors, acks.errors
    # zombie-0 at 0, the abort marker from the successor's init_transactions() at 1.
    assert acks.acked[b"successor-0"] == (0, 2)

    rc = Reader(bootstrap, topic, 1, "read_committed")
    ru = Reader(bootstrap, topic, 1, "read_uncommitted")
    try:
        rc.until_end({0: 4})
        ru.until_end({0: 4})
        assert rc.records[0] == [(2, b"successor-0")]
        assert ru.records[0] == [(0, b"zombie-0"), (2, b"successor-0")]
    finally:
        rc.close()
        ru.close()
