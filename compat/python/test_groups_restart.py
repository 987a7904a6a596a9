"""Committed offsets survive a restart of the broker under test (confluent-kafka).

Restarting needs the broker's owner: COMPAT_RESTART_BROKER names an executable that stops the
broker and starts it again on the same address and data, returning once it answers.
compat/with-highwater.sh sets it for its throwaway highwater; for the reference Kafka it is
compat/kafka-ref/restart.sh (`make compat-kafka-ref` sets it). Without it the test is skipped.
"""

import collections
import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from helpers import committed_offsets
from test_groups_confluent import (CLIENT_ID, Member, TIMEOUT_S, create_topic, produce,
                                   pump_until, seen_all)

PARTITIONS = 3


def committed(bootstrap, group, topic, retries=None):
    return committed_offsets(bootstrap, group, topic, PARTITIONS, retries)


def test_committed_offsets_survive_a_broker_restart(bootstrap, topic_name):
    """Goal: OffsetCommit is durable: after a restart the group's latest commits (not the
    largest), with their metadata, are fetched again and a member resumes at them, and a
    deleted group stays deleted. Method: group `kept` consumes and commits everything, then
    commits a lower offset for partition 0; group `gone` commits and is deleted; restart."""
    restart = os.environ.get("COMPAT_RESTART_BROKER")
    if not restart:
        pytest.skip("COMPAT_RESTART_BROKER is not set (compat/with-highwater.sh and "
                    "make compat-kafka-ref set it)")
    topic = topic_name()
    kept = topic + "-kept"
    gone = topic + "-gone"
    create_topic(bootstrap, topic, PARTITIONS)
    ends1 = produce(bootstrap, topic, 10, partitions=PARTITIONS)

    ledger = collections.Counter()
    m = Member(bootstrap, kept, topic, "before-restart", ledger)
    try:
        pump_until("the member holding all partitions", [m],
                   lambda: len(m.assignment()) == PARTITIONS)
        pump_until("everything consumed", [m], lambda: seen_all(ledger, ends1))
        m.commit()
        # A later commit of a lower offset replaces the earlier one.
        m.consumer.commit(offsets=[TopicPartition(topic, 0, 4, metadata="four")],
                          asynchronous=False)
    finally:
        m.close()
    want = {0: (4, "four"), 1: (ends1[1], None), 2: (ends1[2], None)}
    got = committed(bootstrap, kept, topic)
    # librdkafka reports an empty metadata string as None or "" depending on the version.
    assert {p: (o, md or None) for p, (o, md) in got.items()} == want

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": gone, "client.id": CLIENT_ID,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, 2) for p in range(PARTITIONS)],
             asynchronous=False)
    c.close()
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID})
    admin.delete_consumer_groups([gone], request_timeout=TIMEOUT_S)[gone].result(TIMEOUT_S)

    out = subprocess.run([restart], capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, f"{restart} failed:\n{out.stdout}\n{out.stderr}"

    retries = []
    restarted = time.monotonic()
    got = committed(bootstrap, kept, topic, retries)
    print(f"first OffsetFetch after the restart answered after "
          f"{time.monotonic() - restarted:.1f}s; not ready before: {retries}")
    assert {p: (o, md or None) for p, (o, md) in got.items()} == want, "after the restart"
    assert all(o < 0 for o, _ in committed(bootstrap, gone, topic).values()), \
        "the deleted group has no offsets after the restart"
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID})
    groups = {g.group_id for g in admin.list_consumer_groups(
        request_timeout=TIMEOUT_S).result(TIMEOUT_S).valid}
    assert kept in groups and gone not in groups, groups

    ends2 = produce(bootstrap, topic, 2, partitions=PARTITIONS)
    again = collections.Counter()
    m = Member(bootstrap, kept, topic, "after-restart", again)
    try:
        pump_until("the new member reading to the end", [m], lambda: all(
            again[(p, ends2[p] - 1)] for p in range(PARTITIONS)))
        starts = {0: 4, 1: ends1[1], 2: ends1[2]}
        for p in range(PARTITIONS):
            offsets = sorted(o for (q, o) in again if q == p)
            assert offsets == list(range(starts[p], ends2[p])), f"partition {p}"
        assert all(n == 1 for n in again.values()), again
    finally:
        m.close()
