"""Transactions (confluent-kafka / librdkafka) across a kill -9 of the coordinator.

A transactional producer writes 40 transactions of 60 records each over a 6-partition RF=3
topic (every fifth aborted on purpose). In the middle of transaction 15, between two of
its writes, the broker leading the coordinator's `__transaction_state` partition is killed
-9 (broker pids from $CLUSTER_PIDS, "1:pid,2:pid,3:pid"). The producer carries on with the
new coordinator; a transaction whose commit fails is aborted and written again under a new
number. Then a read_committed consumer reads every partition to its end: every committed
transaction is there whole and once, nothing of an aborted one is, and a read_uncommitted
consumer does see the aborted records. Prints the killed node.

Usage: transactions_across_failover.py BOOTSTRAP TOPIC
"""

import os
import signal
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS, TRANSACTIONS, PER_TXN, KILL_AT = 6, 40, 60, 15
TIMEOUT_S = 60


def java_hash(text):
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    data, h = text.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_leader(admin, transactional_id):
    partition = (java_hash(transactional_id) & 0x7FFFFFFF) % 50
    for _ in range(300):
        topics = admin.list_topics("__transaction_state", timeout=10).topics
        meta = topics.get("__transaction_state")
        if meta and meta.error is None and partition in meta.partitions:
            leader = meta.partitions[partition].leader
            if leader >= 0:
                return leader
        time.sleep(0.2)
    raise AssertionError("no leader for the coordinator's partition")


def run_transaction(producer, topic, number, abort, kill=None):
    producer.begin_transaction()
    for i in range(PER_TXN):
        if kill is not None and i == PER_TXN // 2:
            producer.flush(TIMEOUT_S)
            kill()
        value = f"{'abort' if abort else 'commit'}:{number}:{i}".encode()
        producer.produce(topic, value, partition=i % PARTITIONS)
        producer.poll(0)
    if abort:
        # Sent first: librdkafka drops records not yet sent when it aborts.
        producer.flush(TIMEOUT_S)
        producer.abort_transaction(TIMEOUT_S)
        return False
    try:
        producer.commit_transaction(TIMEOUT_S)
        return True
    except KafkaException as e:
        if not e.args[0].txn_requires_abort():
            raise
        print(f"transaction {number}: commit failed ({e.args[0]}), aborted", flush=True)
        producer.abort_transaction(TIMEOUT_S)
        return False


def read_all(bootstrap, topic, isolation):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values, at_end, deadline = [], set(), time.time() + TIMEOUT_S
    while len(at_end) < PARTITIONS and time.time() < deadline:
        msg = consumer.poll(1)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                at_end.add(msg.partition())
            continue
        at_end.discard(msg.partition())
        values.append(msg.value().decode())
    consumer.close()
    assert len(at_end) == PARTITIONS, f"{isolation}: only {sorted(at_end)} read to the end"
    return values


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    pids = dict(item.split(":") for item in os.environ["CLUSTER_PIDS"].split(","))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(TIMEOUT_S)
    transactional_id = f"failover-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    killed = []

    def kill():
        leader = coordinator_leader(admin, transactional_id)
        os.kill(int(pids[str(leader)]), signal.SIGKILL)
        killed.append(leader)
        print(f"killed node {leader}, the coordinator", flush=True)

    committed, aborted, number = set(), set(), 0
    for t in range(TRANSACTIONS):
        abort = t % 5 == 4
        ok = run_transaction(producer, topic, number, abort, kill if t == KILL_AT else None)
        (committed if ok else aborted).add(number)
        number += 1
    assert killed, "the coordinator was not killed"

    seen = read_all(bootstrap, topic, "read_committed")
    by_txn = {}
    for value in seen:
        kind, txn, i = value.split(":")
        assert kind == "commit" and int(txn) in committed, f"read_committed saw {value}"
        by_txn.setdefault(int(txn), []).append(int(i))
    for txn in committed:
        assert sorted(by_txn.get(txn, [])) == list(range(PER_TXN)), f"transaction {txn} not whole once"
    uncommitted = read_all(bootstrap, topic, "read_uncommitted")
    assert any(v.startswith("abort:") for v in uncommitted), "aborted records reach read_uncommitted"
    print(f"killed node {killed[0]}")
    print(f"{len(committed)} transactions committed whole, {len(aborted)} aborted and never read")


if __name__ == "__main__":
    main()
