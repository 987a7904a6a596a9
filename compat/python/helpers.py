"""Helpers shared by the Python compat tests."""

import pathlib
import subprocess
import sys
import time

import pytest

STORED_CODECS = pathlib.Path(__file__).resolve().parents[1] / "lib" / "stored_codecs.py"


def wait_until(what, condition, timeout_s=30.0):
    """Polls condition() every 100 ms until it is true; fails the test after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


# Timestamps (ms after a base) of offsets 0..7: out of order at 3, a tie at 4 and 5, the largest
# (60) not last. TS_EXPECTED maps a target to the first offset whose timestamp is >= target
# (Kafka: the first batch whose max timestamp is >= target, then the first record in it that
# is), None past the end.
TS_DELTAS = [10, 20, 30, 25, 40, 40, 60, 50]
TS_EXPECTED = [(-100_000, 0), (5, 0), (10, 0), (11, 1), (20, 1), (21, 2), (25, 2), (26, 2),
               (30, 2), (31, 4), (40, 4), (41, 6), (50, 6), (51, 6), (60, 6), (61, None),
               (100_000, None)]


def stored_codecs(bootstrap, topic, partition):
    """The distinct codecs of the batches the broker stores for a partition, read with a raw
    Fetch: a client may quietly send uncompressed batches, which a consumer cannot see."""
    out = subprocess.run([sys.executable, str(STORED_CODECS), bootstrap, topic, str(partition)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# Kafka 4.1.1 answered OffsetFetch with NOT_COORDINATOR on a fresh broker (while it created
# __consumer_offsets) and right after a restart (while it loaded it); librdkafka's committed()
# fails on that instead of retrying, so the tests retry, as an application would.
def committed_offsets(bootstrap, group, topic, partitions, retries=None, timeout_s=30.0):
    """{partition: (offset, metadata)} of a group's commits (offset -1001: none), read by a
    confluent-kafka consumer that does not join the group. Retries while the coordinator is
    not ready, appending each such error's name to `retries`."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    not_ready = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                 KafkaError.COORDINATOR_NOT_AVAILABLE}
    deadline = time.monotonic() + timeout_s
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "client.id": "compat-committed-offsets"})
    try:
        while True:
            try:
                got = c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                  timeout=timeout_s)
                break
            except KafkaException as e:
                if e.args[0].code() not in not_ready or time.monotonic() > deadline:
                    raise
                if retries is not None:
                    retries.append(e.args[0].name())
                time.sleep(0.5)
        for tp in got:
            assert tp.error is None, tp.error
        return {tp.partition: (tp.offset, tp.metadata) for tp in got}
    finally:
        c.close()


def create_topic(admin, name, partitions, timeout_s=30, config=None):
    """Creates `name` with confluent-kafka's AdminClient `admin` (one replica, topic
    `config` if given) and waits until every partition has a leader."""
    from confluent_kafka.admin import NewTopic
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                            replication_factor=1, config=config or {})],
                                  operation_timeout=timeout_s)
    futures[name].result(timeout_s)

    def ready():
        md = admin.list_topics(topic=name, timeout=timeout_s).topics.get(name)
        return (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values()))
    wait_until(f"leaders for {name}", ready, timeout_s)
