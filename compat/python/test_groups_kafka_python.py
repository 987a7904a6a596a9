"""kafka-python consumer groups: KafkaConsumer with a group_id subscribes, splits partitions
with another member, commits, and a later consumer in the group resumes at the commits."""

import collections
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

TIMEOUT_MS = 30_000
PARTITIONS = 4


def produce(bootstrap, topic, per_partition):
    """Produces per_partition records to each partition; returns {partition: end offset}."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                             request_timeout_ms=TIMEOUT_MS)
    futures = [producer.send(topic, value=b"p%d-%d" % (p, i), partition=p)
               for p in range(PARTITIONS) for i in range(per_partition)]
    producer.flush()
    ends = {}
    for f in futures:
        md = f.get(timeout=30)
        ends[md.partition] = max(ends.get(md.partition, 0), md.offset + 1)
    producer.close()
    return ends


def member(bootstrap, group, topic):
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=TIMEOUT_MS,
                      session_timeout_ms=10_000, heartbeat_interval_ms=500)
    c.subscribe([topic])
    return c


def committed(admin, group):
    """The group's committed offsets by partition (OffsetFetch through the admin client)."""
    offsets = admin.list_group_offsets(group)[group]
    return {tp.partition: om.offset for tp, om in offsets.items()}


def pump_until(what, consumers, ledger, condition, timeout_s=30):
    """Polls the consumers in turn, counting each (partition, offset), until condition()."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what}"
        for c in consumers:
            for records in c.poll(timeout_ms=50).values():
                for r in records:
                    ledger[(r.partition, r.offset)] += 1


def test_group_members_split_partitions_commit_and_a_second_run_resumes(bootstrap,
                                                                       topic_name):
    """Goal: JoinGroup/SyncGroup/OffsetCommit/OffsetFetch as kafka-python uses them. Method:
    two members split 4 partitions disjointly and completely, read everything once and
    commit; after both closed, more records are produced and a new consumer in the group
    reads exactly those."""
    topic = topic_name()
    group = topic + "-group"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}},
                        timeout_ms=TIMEOUT_MS, wait_for_metadata=True)
    ledger = collections.Counter()
    a = member(bootstrap, group, topic)
    b = member(bootstrap, group, topic)
    try:
        def split():
            sa = {tp.partition for tp in a.assignment()}
            sb = {tp.partition for tp in b.assignment()}
            return len(sa) == len(sb) == 2 and sa | sb == set(range(PARTITIONS))
        pump_until("2 partitions each", [a, b], ledger, split)

        ends1 = produce(bootstrap, topic, 25)
        pump_until("everything consumed", [a, b], ledger, lambda: all(
            ledger[(p, o)] for p in range(PARTITIONS) for o in range(ends1[p])))
        assert all(n == 1 for n in ledger.values()), ledger
        a.commit()
        b.commit()
    finally:
        a.close()
        b.close()

    assert committed(admin, group) == ends1
    ends2 = produce(bootstrap, topic, 5)

    again = collections.Counter()
    c = member(bootstrap, group, topic)
    try:
        pump_until("the new records", [c], again, lambda: all(
            again[(p, ends2[p] - 1)] for p in range(PARTITIONS)))
        for p in range(PARTITIONS):
            assert c.committed(TopicPartition(topic, p)) == ends1[p]
            assert [o for (q, o) in sorted(again) if q == p] == list(range(ends1[p], ends2[p]))
        assert all(n == 1 for n in again.values()), again
        c.commit()
    finally:
        c.close()
    assert committed(admin, group) == ends2
    admin.close()
