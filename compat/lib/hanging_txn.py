#!/usr/bin/env python3
"""Tries to make a hanging transaction, for cli-tools.sh's kafka-transactions tests.

Speaks the protocol itself (no client would do this): FindCoordinator v1 for the
transactional id, InitProducerId v1, then a transactional Produce v7 of one record
"hanging-PARTITION" (timestamp AGE_MS in the past) to PARTITION of TOPIC *without*
AddPartitionsToTxn. A broker that verifies transactional writes (KIP-890 part 1,
`transaction.partition.verification.enable`, on by default) refuses it with
INVALID_TXN_STATE (48); one that does not appends it, and the partition then holds an open
transaction its coordinator knows nothing of: a hanging transaction.

Prints "init ERROR PRODUCER_ID EPOCH" and "produce ERROR BASE_OFFSET". Every call is bounded
(30 s socket timeout, 60 tries 0.5 s apart while the coordinator loads).
Usage: hanging_txn.py HOST:PORT TRANSACTIONAL_ID TOPIC PARTITION AGE_MS
Needs kafka-python (compat/.venv) for the record batch encoding.
"""

import socket
import struct
import sys
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

RETRIABLE = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS


def string(b):
    return struct.pack(">h", len(b)) + b


class Conn:
    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def call(self, key, version, body):
        self.correlation += 1
        msg = struct.pack(">hhi", key, version, self.correlation) + string(b"hanging-txn") + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self.recv(4))[0]
        data = self.recv(size)
        if struct.unpack(">i", data[:4])[0] != self.correlation:
            sys.exit("hanging_txn: response to another request")
        return data[4:]

    def recv(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                sys.exit("hanging_txn: the broker closed the connection")
            data += chunk
        return data


def retry(what, attempt):
    for _ in range(60):
        err, result = attempt()
        if err not in RETRIABLE:
            return err, result
        time.sleep(0.5)
    sys.exit(f"hanging_txn: {what} still answers {err} after 30 s")


def main():
    address, txn, topic = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
    partition, age_ms = int(sys.argv[4]), int(sys.argv[5])
    conn = Conn(address)

    # FindCoordinator v1: key, key_type 1 (transaction). A single broker: it is the one.
    def find():
        r = conn.call(10, 1, string(txn) + struct.pack(">b", 1))
        return struct.unpack(">ih", r[:6])[1], None

    err, _ = retry("FindCoordinator", find)
    if err != 0:
        sys.exit(f"hanging_txn: FindCoordinator answered {err}")

    # InitProducerId v1: transactional_id, transaction_timeout_ms.
    def init():
        r = conn.call(22, 1, string(txn) + struct.pack(">i", 300_000))
        _, err, pid, epoch = struct.unpack(">ihqh", r[:16])
        return err, (pid, epoch)

    err, (pid, epoch) = retry("InitProducerId", init)
    print("init", err, pid, epoch, flush=True)
    if err != 0:
        sys.exit(1)

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                        producer_id=pid, producer_epoch=epoch,
                                        base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000) - age_ms, key=None,
                   value=b"hanging-%d" % partition, headers=[])
    batch = bytes(builder.build())
    # Produce v7: transactional_id, acks -1, timeout, [topic, [partition, records]].
    body = (string(txn) + struct.pack(">hi", -1, 30_000) + struct.pack(">i", 1) + string(topic)
            + struct.pack(">ii", 1, partition) + struct.pack(">i", len(batch)) + batch)
    r = conn.call(0, 7, body)
    # [topic: name, [partition: index, error, base_offset, ...]], throttle
    at = 4 + 2 + struct.unpack(">h", r[4:6])[0] + 4
    _, err, base = struct.unpack(">ihq", r[at:at + 14])
    print("produce", err, base, flush=True)


if __name__ == "__main__":
    main()
