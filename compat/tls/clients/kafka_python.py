#!/usr/bin/env python3
"""kafka-python's round trip over a secured listener (compat/tls/run.sh): produces the
lines one, two, three to partition 0 of --topic (created on first use) and reads them back
from the beginning, printing each; exits 1 on an error or after 30 s.
TLS with --ca (and --cert/--key for a client certificate); SASL with --mechanism and
--user/--password, or OAUTHBEARER with the token in --token-file."""

import argparse
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.net.sasl.oauth import AbstractTokenProvider


class FileToken(AbstractTokenProvider):
    def __init__(self, path: str) -> None:
        super().__init__()
        with open(path, encoding="ascii") as f:
            self.value = f.read().strip()

    def token(self) -> str:
        return self.value


def options(args: argparse.Namespace) -> dict:
    opts = {"bootstrap_servers": args.bootstrap, "ssl_cafile": args.ca,
            "security_protocol": "SASL_SSL" if args.mechanism else "SSL"}
    if args.cert:
        opts.update(ssl_certfile=args.cert, ssl_keyfile=args.key)
    if args.mechanism == "OAUTHBEARER":
        opts.update(sasl_mechanism="OAUTHBEARER",
                    sasl_oauth_token_provider=FileToken(args.token_file))
    elif args.mechanism:
        opts.update(sasl_mechanism=args.mechanism, sasl_plain_username=args.user,
                    sasl_plain_password=args.password)
    return opts


def main() -> int:
    p = argparse.ArgumentParser()
    for flag in ("--bootstrap", "--topic", "--ca"):
        p.add_argument(flag, required=True)
    for flag in ("--cert", "--key", "--mechanism", "--user", "--password", "--token-file"):
        p.add_argument(flag)
    args = p.parse_args()
    producer = KafkaProducer(acks="all", **options(args))
    for line in ("one", "two", "three"):
        producer.send(args.topic, value=line.encode(), partition=0).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=30_000, **options(args))
    partition = TopicPartition(args.topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    deadline = time.monotonic() + 30
    got = 0
    for record in consumer:
        print(record.value.decode())
        got += 1
        if got == 3 or time.monotonic() > deadline:
            break
    consumer.close()
    return 0 if got == 3 else 1


if __name__ == "__main__":
    sys.exit(main())
