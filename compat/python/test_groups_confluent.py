"""confluent-kafka (librdkafka 2.16) consumer groups: subscribe(), assignments, commits, leaving
and rejoining, cooperative-sticky rebalancing.

The members of a group are polled in turn from one thread; librdkafka joins, heartbeats and
fetches on its own threads, so a member that is not being polled still takes part in a
rebalance.
"""

import collections
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from helpers import committed_offsets, wait_until
from helpers import create_topic as create_topic_with

TIMEOUT_S = 30
CLIENT_ID = "compat-confluent-groups"
PARTITIONS = 6


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID})
    create_topic_with(admin, name, partitions, TIMEOUT_S)


def produce(bootstrap, topic, per_partition, partitions=PARTITIONS):
    """Produces per_partition records to each partition; returns {partition: end offset}."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                         "enable.idempotence": True, "acks": "all"})
    ends = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=b"p%d-%d" % (p, i), partition=p,
                             on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0, "all messages delivered"
    assert not errors, errors
    return ends


class Member:
    """A consumer in a group; records its rebalance callbacks and what it consumes."""

    def __init__(self, bootstrap, group, topic, name, ledger, **conf):
        self.name = name
        self.ledger = ledger
        self.events = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, **conf})
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._lost)
        self.closed = False

    def _assigned(self, _consumer, partitions):
        self.events.append(("assigned", sorted(p.partition for p in partitions)))

    def _revoked(self, _consumer, partitions):
        self.events.append(("revoked", sorted(p.partition for p in partitions)))

    def _lost(self, _consumer, partitions):
        self.events.append(("lost", sorted(p.partition for p in partitions)))

    def poll_once(self):
        msg = self.consumer.poll(0.05)
        if msg is None:
            return
        err = msg.error()
        assert err is None or err.code() == KafkaError._PARTITION_EOF, err
        if err is None:
            self.ledger[(msg.partition(), msg.offset())] += 1

    def assignment(self):
        return {tp.partition for tp in self.consumer.assignment()}

    def revocations(self):
        return [ps for kind, ps in self.events if kind == "revoked"]

    def commit(self):
        """Commits the offsets after everything polled so far; returns them by partition."""
        done = self.consumer.commit(asynchronous=False)
        return {tp.partition: tp.offset for tp in done}

    def close(self):
        if not self.closed:
            self.closed = True
            self.consumer.close()


def pump_until(what, members, condition, timeout_s=TIMEOUT_S):
    """Polls every member in turn until condition() holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what}"
        for m in members:
            m.poll_once()


def seen_all(ledger, ends):
    return all(ledger[(p, o)] > 0 for p, end in ends.items() for o in range(end))


def even_split(members):
    share = PARTITIONS // len(members)
    return lambda: all(len(m.assignment()) == share for m in members)


def assert_disjoint_and_complete(members):
    assignments = {m.name: m.assignment() for m in members}
    union = set().union(*assignments.values())
    assert union == set(range(PARTITIONS)), assignments
    assert sum(len(a) for a in assignments.values()) == PARTITIONS, assignments


def assert_delivered(ledger, partition, start, end, times, why):
    for o in range(start, end):
        assert ledger[(partition, o)] == times, \
            f"partition {partition} offset {o} delivered {ledger[(partition, o)]}x ({why})"


def committed(bootstrap, group, topic):
    """{partition: offset} of the group's commits, leaving out partitions without one."""
    got = committed_offsets(bootstrap, group, topic, PARTITIONS)
    return {p: o for p, (o, _) in got.items() if o >= 0}


def test_three_members_split_six_partitions_and_resume_from_commits(bootstrap, topic_name):
    """Goal: disjoint, complete assignments; when a member leaves, the others take over its
    partitions from its last commit, and a new member after all left resumes at the commits.
    Method: phase 1 committed by all, phase 2 committed by a and b only, c closes (leaves),
    phase 3; then c's phase-2 records must have come twice and all others once."""
    topic = topic_name()
    group = topic + "-group"
    create_topic(bootstrap, topic, PARTITIONS)
    ledger = collections.Counter()
    a, b, c = (Member(bootstrap, group, topic, n, ledger) for n in ("a", "b", "c"))
    members = [a, b, c]
    try:
        pump_until("an even split over 3", members, even_split(members))
        assert_disjoint_and_complete(members)

        ends1 = produce(bootstrap, topic, 20)
        pump_until("phase 1 consumed", members, lambda: seen_all(ledger, ends1))
        for m in members:
            m.commit()
        assert committed(bootstrap, group, topic) == ends1

        ends2 = produce(bootstrap, topic, 10)
        pump_until("phase 2 consumed", members, lambda: seen_all(ledger, ends2))
        a.commit()
        b.commit()
        of_c = c.assignment()
        c.close()

        survivors = [a, b]
        pump_until("an even split over 2", survivors, even_split(survivors))
        assert_disjoint_and_complete(survivors)
        ends3 = produce(bootstrap, topic, 10)
        pump_until("phase 3 consumed", survivors, lambda: seen_all(ledger, ends3))
        for p in range(PARTITIONS):
            assert_delivered(ledger, p, 0, ends1[p], 1, "committed by all")
            assert_delivered(ledger, p, ends1[p], ends2[p], 2 if p in of_c else 1,
                             "consumed by c, not committed" if p in of_c else "committed")
            assert_delivered(ledger, p, ends2[p], ends3[p], 1, "phase 3")
        a.commit()
        b.commit()
        a.close()
        b.close()
        assert committed(bootstrap, group, topic) == ends3

        # A new member, alone, starts every partition at the committed offset.
        again = collections.Counter()
        d = Member(bootstrap, group, topic, "d", again)
        members.append(d)
        ends4 = produce(bootstrap, topic, 5)
        pump_until("phase 4 consumed", [d], lambda: all(
            again[(p, ends4[p] - 1)] for p in range(PARTITIONS)))
        for p in range(PARTITIONS):
            assert_delivered(again, p, 0, ends3[p], 0, "before the commit")
            assert_delivered(again, p, ends3[p], ends4[p], 1, "after the commit")
    finally:
        for m in members:
            m.close()


def test_cooperative_sticky_moves_only_the_partitions_that_change_owner(bootstrap, topic_name):
    """Goal: partition.assignment.strategy=cooperative-sticky rebalances incrementally: a
    member that keeps partitions is never made to revoke them. Method: a alone holds 6 and
    commits; b joins (a must revoke exactly the 3 b gets), then c (a and b revoke 1 each)."""
    topic = topic_name()
    group = topic + "-group"
    create_topic(bootstrap, topic, PARTITIONS)
    ends = produce(bootstrap, topic, 5)
    ledger = collections.Counter()
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [Member(bootstrap, group, topic, "a", ledger, **conf)]
    a = members[0]
    try:
        pump_until("a holding all 6", members, even_split(members))
        pump_until("everything consumed", members, lambda: seen_all(ledger, ends))
        a.commit()
        assert a.events == [("assigned", list(range(PARTITIONS)))]

        members.append(Member(bootstrap, group, topic, "b", ledger, **conf))
        b = members[1]
        pump_until("an even split over 2", members, even_split(members))
        assert_disjoint_and_complete(members)
        kept = a.assignment()
        assert a.revocations() == [sorted(b.assignment())], a.events
        assert not [e for e in a.events if e[0] == "lost"], a.events

        members.append(Member(bootstrap, group, topic, "c", ledger, **conf))
        pump_until("an even split over 3", members, even_split(members))
        assert_disjoint_and_complete(members)
        assert a.assignment() <= kept, a.events
        assert len(a.revocations()) == 2 and len(a.revocations()[1]) == 1, a.events
        assert len(b.revocations()) == 1 and len(b.revocations()[0]) == 1, b.events
        # Partitions moved only after a had read and committed them: each record once.
        for p in range(PARTITIONS):
            assert_delivered(ledger, p, 0, ends[p], 1, "read by a")
    finally:
        for m in members:
            m.close()
