"""What the benchmark asks a broker over a raw socket, without a client library (so no JVM
start is counted): free loopback ports to give a broker, and Metadata v1, which says when a
broker is up and which brokers a node lists.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import time

from . import parsers
from .errors import BenchError
from .processes import write_live_file

PROBE_RECV_TIMEOUT_S = 5.0
BROKER_START_TIMEOUT_S = 120.0

# Reserved for other local clusters and the compat suites: never used by the bench.
RESERVED_PORTS = {9092, 9093, 9094, 9192, 9193, 9194, 19092, 19093}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports, none of RESERVED_PORTS."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports and port not in RESERVED_PORTS:
            ports.append(port)
    return ports


def metadata_request(correlation_id: int) -> bytes:
    """Metadata v1 (all topics), header v1 with client id "bench-probe"."""
    client_id = b"bench-probe"
    body = struct.pack(">hhih", 3, 1, correlation_id, len(client_id)) + client_id
    body += struct.pack(">i", -1)
    return struct.pack(">i", len(body)) + body


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def ask_metadata(port: int, correlation_id: int) -> tuple[int, list[int], float] | None:
    """Sends Metadata v1 to `port`; the answer's correlation id, the client port of every
    broker it lists, and the monotonic time it was read. None when nothing answers in full
    (refused, closed, cut short)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(PROBE_RECV_TIMEOUT_S)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(metadata_request(correlation_id))
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            got_id, ports = parsers.metadata_v1_broker_ports(recv_exact(sock, size))
            return got_id, ports, time.monotonic()
        except (OSError, struct.error):
            return None


def wait_for_metadata(port: int, proc: subprocess.Popen, started: float) -> float:
    """Polls until a Metadata response lists the broker; returns the monotonic time then.

    Connection attempts are refused in microseconds, so the loop polls every 0.1 ms for the
    first 100 ms (highwater's range), then backs off to 2 ms so as not to steal a core from
    a JVM that is starting up. The watchdog learns of the broker after 50 ms or at the end.
    """
    request_id = 0
    watchdog_told = False
    while True:
        elapsed = time.monotonic() - started
        if not watchdog_told and elapsed > 0.05:
            write_live_file()
            watchdog_told = True
        if proc.poll() is not None:
            raise BenchError(f"the broker exited during start-up (status {proc.returncode})")
        if elapsed > BROKER_START_TIMEOUT_S:
            raise BenchError(f"no Metadata answer on port {port} after {elapsed:.0f}s")
        request_id += 1
        answer = ask_metadata(port, request_id)
        if answer is not None and answer[0] == request_id and port in answer[1]:
            return answer[2]
        time.sleep(0.0001 if elapsed < 0.1 else 0.001 if elapsed < 1 else 0.002)


def metadata_ports(port: int) -> set[int]:
    """The client ports of the brokers a Metadata v1 response from `port` lists (an
    unfenced broker's); empty when nothing answers."""
    answer = ask_metadata(port, 1)
    return set() if answer is None else set(answer[1])
