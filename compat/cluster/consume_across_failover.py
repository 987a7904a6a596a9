"""A librdkafka consumer (confluent-kafka) keeps consuming across a leader change.

Produces 3,000 counter records with acks=all to a new RF=3 topic, consumes a third with
assign(), kills -9 the partition's leader (the broker pids come from $CLUSTER_PIDS as
"1:pid,2:pid,3:pid"), then consumes on from the new leader, produces 1,000 more and
consumes those: every value must arrive exactly once and in order (librdkafka validates
its position with OffsetForLeaderEpoch after the change, KIP-320). Prints the killed node.

Usage: consume_across_failover.py BOOTSTRAP TOPIC
"""

import os
import signal
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

FIRST, SECOND = 3000, 1000
DEADLINE_S = 90


def produce(bootstrap, topic, start, count):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    failures = []
    for value in range(start, start + count):
        producer.produce(topic, str(value).encode(), partition=0,
                         on_delivery=lambda err, _msg: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0, "records left unacknowledged"
    assert not failures, failures


def leader_of(client, topic, other_than=-1):
    for _ in range(300):
        partitions = client.list_topics(topic, timeout=10).topics[topic].partitions
        if partitions and partitions[0].leader >= 0 and partitions[0].leader != other_than:
            return partitions[0].leader
        time.sleep(0.2)
    raise AssertionError(f"no leader for the topic other than {other_than}")


def consume_until(consumer, seen, count):
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < count:
        assert time.monotonic() < deadline, f"only {len(seen)} of {count} records arrived"
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert not message.error(), message.error()
        seen.append(int(message.value()))


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    pids = dict(item.split(":") for item in os.environ["CLUSTER_PIDS"].split(","))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    produce(bootstrap, topic, 0, FIRST)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic + "-unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    consume_until(consumer, seen, FIRST // 3)
    leader = leader_of(consumer, topic)
    os.kill(int(pids[str(leader)]), signal.SIGKILL)
    print(f"killed node {leader}", flush=True)
    new_leader = leader_of(consumer, topic, other_than=leader)
    consume_until(consumer, seen, FIRST)
    produce(bootstrap, topic, FIRST, SECOND)
    consume_until(consumer, seen, FIRST + SECOND)
    consumer.close()
    assert seen == list(range(FIRST + SECOND)), "records lost, duplicated or out of order"
    print(f"consumed {len(seen)} records in order across the change to node {new_leader}")


if __name__ == "__main__":
    main()
