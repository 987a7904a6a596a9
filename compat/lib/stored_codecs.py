#!/usr/bin/env python3
"""Prints the compression codecs of the record batches a broker stores for one partition.

A consumer cannot tell whether a batch was compressed, and a client may quietly send
uncompressed data when it thinks the broker lacks a codec (librdkafka before 2.11.1 turns LZ4
off unless FindCoordinator v0 is advertised). So the compression tests read the batches back
with a raw Fetch v4 (supported by Kafka 4.x and highwater) and look at each batch's
attributes (bits 0-2: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).

Prints the distinct codecs, comma-separated and sorted (e.g. "lz4", or "lz4,none" if some
batches were not compressed). Reads from offset 0 to the high watermark. The bootstrap broker
must lead the partition (true of the single-node brokers the suites run against).
Standard library only.

Usage: stored_codecs.py HOST:PORT TOPIC PARTITION
"""

import socket
import struct
import sys

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
FETCH_KEY, FETCH_VERSION = 1, 4
MAX_BYTES = 64 * 1024 * 1024
TIMEOUT_S = 30


class Reader:
    """Big-endian reader over one response body."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string(self):
        n = self.take(">h")
        value = self.data[self.pos:self.pos + n]
        self.pos += max(n, 0)
        return value.decode()

    def bytes(self):
        n = self.take(">i")
        value = self.data[self.pos:self.pos + n] if n >= 0 else b""
        self.pos += max(n, 0)
        return value


def encode_string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def fetch(sock, correlation_id, topic, partition, offset):
    """One Fetch v4 for one partition; returns (error_code, high_watermark, records)."""
    body = struct.pack(">iiiib", -1, 100, 1, MAX_BYTES, 0)
    body += struct.pack(">i", 1) + encode_string(topic)
    body += struct.pack(">iiqi", 1, partition, offset, MAX_BYTES)
    header = struct.pack(">hhi", FETCH_KEY, FETCH_VERSION, correlation_id)
    header += encode_string("compat-stored-codecs")
    request = header + body
    sock.sendall(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    r = Reader(recv_exact(sock, size))
    if r.take(">i") != correlation_id:
        sys.exit("stored_codecs: correlation id mismatch")
    r.take(">i")  # throttle_time_ms
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            r.take(">i")  # partition
            error = r.take(">h")
            high_watermark = r.take(">q")
            r.take(">q")  # last_stable_offset
            aborted = r.take(">i")
            for _ in range(max(aborted, 0)):
                r.take(">qq")
            return error, high_watermark, r.bytes()
    sys.exit("stored_codecs: the Fetch response has no partition")


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            sys.exit("stored_codecs: the broker closed the connection")
        buf += chunk
    return bytes(buf)


def batches(records):
    """Yields (last_offset, codec) of each complete v2 batch in a records blob."""
    pos = 0
    while pos + 61 <= len(records):
        base_offset, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break  # a batch cut off by the size limit
        magic = records[pos + 16]
        if magic != 2:
            sys.exit(f"stored_codecs: batch at offset {base_offset} has magic {magic}")
        attributes, last_offset_delta = struct.unpack_from(">hi", records, pos + 21)
        yield base_offset + last_offset_delta, CODECS.get(attributes & 7, str(attributes & 7))
        pos += 12 + length


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    host, port = sys.argv[1].rsplit(":", 1)
    topic, partition = sys.argv[2], int(sys.argv[3])
    codecs = set()
    offset, correlation_id = 0, 0
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        while True:
            correlation_id += 1
            error, high_watermark, records = fetch(sock, correlation_id, topic, partition,
                                                   offset)
            if error != 0:
                sys.exit(f"stored_codecs: Fetch error {error} at offset {offset}")
            if offset >= high_watermark:
                break
            last = None
            for last, codec in batches(records):
                codecs.add(codec)
            if last is None:
                sys.exit(f"stored_codecs: no complete batch at offset {offset}")
            offset = last + 1
    print(",".join(sorted(codecs)))


if __name__ == "__main__":
    main()
