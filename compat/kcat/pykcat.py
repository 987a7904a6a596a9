#!/usr/bin/env python3
"""The subset of kcat's command line that compat/kcat/run.sh uses, on a current librdkafka.

Debian's kcat links librdkafka 2.0.2. This program takes the same flags and prints the same
output formats, but runs on the librdkafka bundled with confluent-kafka (2.16.x), so that
run.sh performs each operation with both generations of librdkafka.

Modes (as in kcat): -L metadata (-J for JSON), -P produce lines from stdin, -C consume,
-G GROUP TOPIC... balanced consumer in a group (auto-commit, committing on exit),
-Q offsets for timestamps. Two extra producer flags, which kcat lacks: --line-timestamps
(each input line starts with a CreateTime in ms and a space) and --flush-each (one request,
hence one batch, per message). The -C consumer never joins a group: librdkafka requires a
group.id, but partitions are only ever assign()ed and nothing is committed.
"""

import argparse
import json
import sys
import time

import confluent_kafka
from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Producer,
                             TopicPartition)

TIMEOUT_S = 60.0
# librdkafka's RD_KAFKA_OFFSET_TAIL(n) is RD_KAFKA_OFFSET_TAIL_BASE - n: n from the end.
OFFSET_TAIL_BASE = -2000


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    for flag in ("-L", "-P", "-C", "-Q"):
        mode.add_argument(flag, dest="mode", action="store_const", const=flag[1])
    mode.add_argument("-G", dest="group")
    p.add_argument("group_topics", nargs="*", metavar="TOPIC", help="topics of -G")
    p.add_argument("-b", dest="bootstrap", required=True)
    p.add_argument("-t", dest="topics", action="append", default=[])
    p.add_argument("-p", dest="partition", type=int)
    p.add_argument("-K", dest="key_delim")
    p.add_argument("-H", dest="headers", action="append", default=[])
    p.add_argument("-z", dest="compression")
    p.add_argument("-X", dest="config", action="append", default=[])
    p.add_argument("-o", dest="offset")
    p.add_argument("-e", dest="exit_at_end", action="store_true")
    p.add_argument("-f", dest="fmt")
    p.add_argument("-J", dest="json", action="store_true")
    p.add_argument("--line-timestamps", action="store_true")
    p.add_argument("--flush-each", action="store_true")
    return p.parse_intermixed_args(argv)


def client_config(args):
    conf = {"bootstrap.servers": args.bootstrap, "client.id": "compat-pykcat-rdkafka-2.16"}
    for kv in args.config:
        k, _, v = kv.partition("=")
        conf[k] = v
    return conf


def die(msg):
    print(f"% ERROR: {msg}", file=sys.stderr)
    sys.exit(1)


def metadata(args):
    client = Producer(client_config(args))
    topic = args.topics[0] if args.topics else None
    md = client.list_topics(topic=topic, timeout=TIMEOUT_S)
    brokers = [{"id": b.id, "name": f"{b.host}:{b.port}"} for b in md.brokers.values()]
    topics = []
    for t in md.topics.values():
        entry = {"topic": t.topic, "partitions": [
            {"partition": p.id, "leader": p.leader} for p in t.partitions.values()]}
        if t.error is not None:
            entry["error"] = str(t.error)
        topics.append(entry)
    if args.json:
        print(json.dumps({"controllerid": md.controller_id, "brokers": brokers,
                          "topics": topics}))
    else:
        print(f" {len(brokers)} brokers:")
        for b in brokers:
            print(f"  broker {b['id']} at {b['name']}")
        print(f" {len(topics)} topics:")
        for t in topics:
            print(f'  topic "{t["topic"]}" with {len(t["partitions"])} partitions:')


def read_lines():
    data = sys.stdin.buffer.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def produce(args):
    conf = client_config(args)
    if args.compression:
        conf["compression.codec"] = args.compression
    producer = Producer(conf)
    headers = [(h.partition("=")[0], h.partition("=")[2].encode()) for h in args.headers]
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    delim = args.key_delim.encode() if args.key_delim else None
    for line in read_lines():
        ts = 0
        if args.line_timestamps:
            ts_text, _, line = line.partition(b" ")
            ts = int(ts_text)
        key = None
        if delim is not None and delim in line:
            key, _, line = line.partition(delim)
        kwargs = {"key": key, "headers": headers or None, "timestamp": ts,
                  "on_delivery": on_delivery}
        if args.partition is not None:
            kwargs["partition"] = args.partition
        while True:
            try:
                producer.produce(args.topics[0], line, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        if args.flush_each and producer.flush(TIMEOUT_S) > 0:
            die("message not delivered within the timeout")
    left = producer.flush(TIMEOUT_S)
    if errors:
        die(f"{len(errors)} messages failed delivery, first: {errors[0]}")
    if left:
        die(f"{left} messages not delivered within {TIMEOUT_S}s")


def start_offset(text):
    if text == "beginning":
        return OFFSET_BEGINNING
    if text == "end":
        return OFFSET_END
    n = int(text)
    return OFFSET_TAIL_BASE + n if n < 0 else n


def render(fmt, msg):
    """kcat's -f format: %k key, %s value, %t topic, %p partition, %o offset,
    %T timestamp, %h headers (k=v,...), %%, and the escapes \\n \\t \\\\."""
    out = bytearray()
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c in "%\\" and i + 1 < len(fmt):
            d = fmt[i + 1]
            i += 2
            if c == "\\":
                out += {"n": b"\n", "t": b"\t", "\\": b"\\"}.get(d, b"\\" + d.encode())
            elif d == "k":
                out += msg.key() or b""
            elif d == "s":
                out += msg.value() or b""
            elif d == "t":
                out += msg.topic().encode()
            elif d == "p":
                out += str(msg.partition()).encode()
            elif d == "o":
                out += str(msg.offset()).encode()
            elif d == "T":
                out += str(msg.timestamp()[1]).encode()
            elif d == "h":
                out += b",".join(k.encode() + b"=" + (v or b"") for k, v in msg.headers() or [])
            elif d == "%":
                out += b"%"
            else:
                die(f"unsupported format %{d}")
        else:
            out += c.encode()
            i += 1
    return bytes(out)


def consume(args):
    conf = client_config(args)
    conf.update({"group.id": "compat-pykcat-assign-only", "enable.auto.commit": False,
                 "enable.auto.offset.store": False, "enable.partition.eof": True})
    consumer = Consumer(conf)
    topic = args.topics[0]
    if args.partition is not None:
        partitions = [args.partition]
    else:
        md = consumer.list_topics(topic=topic, timeout=TIMEOUT_S)
        partitions = sorted(md.topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, start_offset(args.offset or "end"))
                     for p in partitions])
    pending = set(partitions)
    fmt = args.fmt or "%s\\n"
    out = sys.stdout.buffer
    deadline = time.monotonic() + TIMEOUT_S
    while pending or not args.exit_at_end:
        if time.monotonic() > deadline:
            die(f"partitions {sorted(pending)} did not reach their end within {TIMEOUT_S}s")
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
                continue
            die(f"consume error: {msg.error()}")
        out.write(render(fmt, msg))
    out.flush()
    consumer.close()


def consume_group(args):
    """kcat -G: subscribes in a group; with -e, exits once every assigned partition reached
    its end. Partitions start at the group's commits, else at auto.offset.reset (-X).
    Offsets are auto-committed, and committed once more by close()."""
    if args.offset is not None:
        # kcat -G -o X starts every assigned partition at X, ignoring the commits.
        die("-o is not supported with -G; use -X auto.offset.reset=...")
    conf = client_config(args)
    conf.update({"group.id": args.group, "enable.partition.eof": True})
    consumer = Consumer(conf)
    assigned = set()
    at_end = set()

    def on_assign(_consumer, partitions):
        for tp in partitions:
            assigned.add((tp.topic, tp.partition))
        print(f"% Group {args.group} rebalanced: assigned: "
              f"{sorted(tp.partition for tp in partitions)}", file=sys.stderr)

    def on_revoke(_consumer, partitions):
        for tp in partitions:
            assigned.discard((tp.topic, tp.partition))
            at_end.discard((tp.topic, tp.partition))

    consumer.subscribe(args.group_topics, on_assign=on_assign, on_revoke=on_revoke)
    fmt = args.fmt or "%s\\n"
    out = sys.stdout.buffer
    deadline = time.monotonic() + TIMEOUT_S
    while not (args.exit_at_end and assigned and assigned <= at_end):
        if time.monotonic() > deadline:
            die(f"assigned partitions {sorted(assigned - at_end)} did not reach their end "
                f"within {TIMEOUT_S}s")
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add((msg.topic(), msg.partition()))
                continue
            die(f"consume error: {msg.error()}")
        at_end.discard((msg.topic(), msg.partition()))
        out.write(render(fmt, msg))
    out.flush()
    consumer.close()


def offsets_for_times(args):
    consumer = Consumer({**client_config(args), "group.id": "compat-pykcat-assign-only",
                         "enable.auto.commit": False})
    for spec in args.topics:
        topic, partition, ts = spec.rsplit(":", 2)
        found = consumer.offsets_for_times([TopicPartition(topic, int(partition), int(ts))],
                                           timeout=TIMEOUT_S)
        for tp in found:
            if tp.error is not None:
                die(f"offsets_for_times failed: {tp.error}")
            print(f"{tp.topic} [{tp.partition}] offset {tp.offset}")
    consumer.close()


def main():
    args = parse_args(sys.argv[1:])
    if not confluent_kafka.libversion()[0].startswith("2.16."):
        die(f"expected librdkafka 2.16.x, found {confluent_kafka.libversion()[0]}")
    if args.group is not None:
        if not args.group_topics:
            die("-G GROUP needs topics")
        consume_group(args)
        return
    if args.mode != "L" and not args.topics:
        die("-t topic is required")
    {"L": metadata, "P": produce, "C": consume, "Q": offsets_for_times}[args.mode](args)


if __name__ == "__main__":
    main()
