"""A librdkafka consumer (confluent-kafka) in a follower's rack reads from that follower
(KIP-392); one without a rack reads from the leader.

The cluster's nodes run with broker.rack=rack-N and Kafka's RackAwareReplicaSelector.
Produces 2,000 records of 100 bytes with acks=all to a new RF=3 topic of one partition,
then consumes them all, in order, twice: with client.rack set to a follower's rack, then
with no client.rack. librdkafka's statistics give the bytes received from each broker: the
first consumer must have received the records from the follower (the leader answers its
first fetch with only `preferred_read_replica`), the second from the leader.

Usage: fetch_from_follower.py BOOTSTRAP [TOPIC]   (TOPIC: a new name by default)
"""

import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

COUNT, SIZE = 2000, 100
DEADLINE_S = 60


def produce(bootstrap, topic):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for value in range(COUNT):
        producer.produce(topic, str(value).encode().ljust(SIZE, b"."), partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0, "records left unacknowledged"


def replicas_of(admin, topic):
    for _ in range(150):
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        if partition and partition.leader >= 0 and len(partition.isrs) == 3:
            return partition.leader, partition.replicas
        time.sleep(0.2)
    raise AssertionError("the partition never had a leader and an ISR of three")


def consume(bootstrap, topic, rack):
    """Consumes every record in order; returns the bytes received per broker id."""
    received = {}

    def on_stats(text):
        for broker in json.loads(text)["brokers"].values():
            if broker.get("nodeid", -1) >= 0:
                received[broker["nodeid"]] = broker["rxbytes"]

    config = {"bootstrap.servers": bootstrap, "group.id": f"{topic}-{rack or 'none'}",
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "statistics.interval.ms": 200, "stats_cb": on_stats}
    if rack:
        config["client.rack"] = rack
    consumer = Consumer(config)
    consumer.subscribe([topic])
    expected, deadline = 0, time.monotonic() + DEADLINE_S
    while expected < COUNT:
        assert time.monotonic() < deadline, f"only {expected} of {COUNT} records arrived"
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert not message.error(), message.error()
        assert int(message.value().rstrip(b".")) == expected, "a record out of order"
        expected += 1
    received.clear()
    while not received:  # statistics taken after the last record
        consumer.poll(0.2)
    consumer.close()
    return received


def main():
    bootstrap = sys.argv[1]
    topic = sys.argv[2] if len(sys.argv) > 2 else f"fetch-from-follower-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    leader, replicas = replicas_of(admin, topic)
    produce(bootstrap, topic)
    follower = next(r for r in replicas if r != leader)
    payload = COUNT * SIZE
    received = consume(bootstrap, topic, f"rack-{follower}")
    print(f"leader {leader}, consumer in rack-{follower}: bytes received {received}")
    assert received.get(follower, 0) > payload, "the follower did not serve the records"
    assert received.get(leader, 0) < payload, "the leader served the records"
    received = consume(bootstrap, topic, None)
    print(f"consumer without a rack: bytes received {received}")
    assert received.get(leader, 0) > payload, "the leader did not serve the records"
    print("fetch from follower: the rack's follower served its consumer")


if __name__ == "__main__":
    main()
