#!/usr/bin/env python3
"""highwater against Apache Kafka 4.1.1 on one machine, with Kafka's own perf tools.

Runs two phases, each as alternating rounds (highwater, Kafka, highwater, Kafka, ...), every
broker freshly started on an empty data dir under the same work dir:

1. throughput: start-up and idle figures, then ProducerPerformance unthrottled for every
   workload (record size x acks x partitions) with the broker's CPU time read from
   /proc/<pid>/stat around each run, then an assign()-based consumer over what was produced;
2. latency: ProducerPerformance at a fixed rate, half of Kafka's median unthrottled rate of
   phase 1 for the same workload, then end-to-end latency;
3. RF=3 vs RF=1 (issues 5 and 7): a three-node cluster of each broker per round,
   ProducerPerformance (100 B, acks=all, 6 partitions) to an RF=3 and an RF=1 topic,
   unthrottled and at a fixed rate, with the CPU time of the three brokers summed.

Consumption and end-to-end latency are measured with bench/java/BenchTool.java (assign(),
no consumer group: the figures of the first runs, before highwater had groups) and, in full
mode, with Kafka's own ConsumerPerformance (a consumer group) and EndToEndLatency (group.id,
commitSync() when done), against both brokers.

Writes <out>/<stem>.md, .json and .png (highwater/Kafka ratios of the medians) and prints
the table. Every process this script starts is killed when it ends, however it ends.
Usage: bench/run.sh full|smoke|rf3|txn (see bench/README.md; rf3: only the third section;
txn: only the transactional runs).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import parsers

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
LIBS = ROOT / ".kafka-ref" / "libs"
KAFKA_VERSION = "4.1.1"
KAFKA_LOG4J = ROOT / "compat" / "kafka-ref" / "log4j2.properties"
TOOLS_LOG4J = ROOT / "compat" / "java" / "tools-log4j2.properties"
HIGHWATER_CONFIG = ROOT / "config" / "server.toml"

# The JVM settings of Kafka's own scripts: kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS,
# kafka-server-start.sh's heap for the broker, the perf-test scripts' heap for the tools.
JVM_PERFORMANCE_OPTS = [
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
    "-Duser.language=en", "-Duser.country=US",
]
BROKER_HEAP = ["-Xmx1G", "-Xms1G"]
TOOL_HEAP = ["-Xmx512M"]

PROBE_RECV_TIMEOUT_S = 5.0
TOOL_POLL_S = 0.25
BROKER_START_TIMEOUT_S = 120.0
BROKER_STOP_GRACE_S = 20.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A broker or tool failed; the message says which and shows the end of its output."""


@dataclasses.dataclass(frozen=True)
class Workload:
    """One ProducerPerformance workload."""

    size: int
    acks: str
    partitions: int

    @property
    def key(self) -> str:
        return f"{self.size}B-acks{self.acks}-p{self.partitions}"

    @property
    def label(self) -> str:
        size = "1 KiB" if self.size == 1024 else f"{self.size} B"
        parts = "1 partition" if self.partitions == 1 else f"{self.partitions} partitions"
        return f"{size}, acks={self.acks}, {parts}"

    def topic(self, phase: str) -> str:
        return f"bench-{phase}-{self.key}"


@dataclasses.dataclass(frozen=True)
class Plan:
    """How much to run; full mode stays under 30 minutes on 2 busy cores."""

    mode: str
    rounds: int
    workloads: tuple[Workload, ...]
    unthrottled_records: dict[int, int]  # by record size
    fixed_rate_seconds: float
    warmup_fraction: float  # unthrottled warm-up records, as a fraction of the measured
    warmup_seconds: float  # fixed-rate warm-up, at the same rate
    broker_warmup_records: int  # 100 B records produced and consumed before measuring
    end_to_end: tuple[tuple[int, str], ...]  # (size, acks)
    end_to_end_records: int
    settle_s: float
    tool_timeout_s: float
    kafka_references: bool
    # Which parts run: "single" (the two single-node phases), "rf3" (RF=3 vs RF=1 on three
    # nodes per broker). Defaults: what results written before the RF=3 section hold.
    sections: tuple[str, ...] = ("single",)
    rf3_brokers: tuple[str, ...] = ("kafka", "highwater")
    rf3_rounds: int = 0
    rf3_records: int = 0  # 100 B records per unthrottled run
    # records/s of the fixed-rate runs, the same for both brokers and RFs of a round; 0:
    # half of the median of Kafka's RF=3 unthrottled rates measured so far in this run
    rf3_rate: int = 0
    rf3_fixed_seconds: float = 0.0
    # Transactional ProducerPerformance runs (--transactional-id, a commit every
    # TXN_DURATION_MS), each read back by a read_committed consumer, in the throughput phase.
    transactional: tuple[Workload, ...] = ()
    latency_phase: bool = True


def all_workloads() -> tuple[Workload, ...]:
    return tuple(Workload(size, acks, parts)
                 for size in (100, 1024) for acks in ("1", "all") for parts in (1, 6))


# A transaction per 100 ms (ProducerPerformance --transaction-duration-ms); transactions
# need idempotence, so acks=all.
TXN_DURATION_MS = 100
TXN_WORKLOADS = (Workload(100, "all", 1), Workload(1024, "all", 6))


PLANS = {
    "full": Plan(
        mode="full", rounds=3, workloads=all_workloads(),
        unthrottled_records={100: 1_000_000, 1024: 200_000},
        fixed_rate_seconds=6.0, warmup_fraction=0.25, warmup_seconds=2.0,
        broker_warmup_records=1_000_000,
        end_to_end=((100, "1"), (100, "all")), end_to_end_records=2_000,
        settle_s=3.0, tool_timeout_s=300.0, kafka_references=True,
        sections=("single", "rf3"), rf3_rounds=3, rf3_records=1_000_000, rf3_rate=0,
        rf3_fixed_seconds=6.0, transactional=TXN_WORKLOADS),
    "smoke": Plan(
        mode="smoke", rounds=1,
        workloads=(Workload(100, "1", 1), Workload(1024, "all", 6)),
        unthrottled_records={100: 50_000, 1024: 10_000},
        fixed_rate_seconds=1.5, warmup_fraction=0.5, warmup_seconds=1.0,
        broker_warmup_records=0,
        end_to_end=((100, "all"),), end_to_end_records=100,
        settle_s=0.5, tool_timeout_s=120.0, kafka_references=False,
        sections=("single", "rf3"), rf3_brokers=("highwater",), rf3_rounds=1,
        rf3_records=20_000, rf3_rate=5_000, rf3_fixed_seconds=1.5,
        transactional=(Workload(100, "all", 1),)),
}
# Only the RF=3 section, at full size: `bench/run.sh rf3`.
PLANS["rf3"] = dataclasses.replace(PLANS["full"], mode="rf3", sections=("rf3",))
# Only the transactional runs, at full size: `bench/run.sh txn`.
PLANS["txn"] = dataclasses.replace(PLANS["full"], mode="txn", sections=("single",),
                                   workloads=(), end_to_end=(), latency_phase=False)


# --- processes ---------------------------------------------------------------------------

LIVE: list[subprocess.Popen] = []
LIVE_FILE: Path | None = None  # "pid starttime" per live child, read by the watchdog
WATCHDOG_POLL_S = 0.2


def start_time(pid: int) -> str:
    """Field 22 of /proc/<pid>/stat: with the pid, it names one process, not a reused id."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()[19]


def write_live_file() -> None:
    if LIVE_FILE is None:
        return
    lines = []
    for proc in LIVE:
        try:
            lines.append(f"{proc.pid} {start_time(proc.pid)}\n")
        except OSError:
            pass  # already gone
    tmp = LIVE_FILE.with_suffix(".tmp")
    tmp.write_text("".join(lines))
    tmp.replace(LIVE_FILE)


def watchdog(parent: int, live_file: Path, remove_work_dir: bool) -> int:
    """Runs as its own process: once `parent` (this script) is gone, however it went, SIGKILLs
    the children it had listed in live_file that are still the same processes, and removes
    the work dir (live_file's) unless --keep."""
    while os.getppid() == parent:
        time.sleep(WATCHDOG_POLL_S)
    try:
        entries = [line.split() for line in live_file.read_text().splitlines()]
    except OSError:
        return 0
    for pid, started in entries:
        try:
            if start_time(int(pid)) == started:
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    live_file.unlink(missing_ok=True)
    if remove_work_dir:
        shutil.rmtree(live_file.parent, ignore_errors=True)
    return 0


def start_watchdog(work: Path, keep: bool) -> subprocess.Popen:
    global LIVE_FILE  # noqa: PLW0603 (one registry per process)
    LIVE_FILE = work / "live-processes"
    write_live_file()
    return subprocess.Popen([sys.executable, __file__, "_watchdog", str(os.getpid()),
                             str(LIVE_FILE), "keep" if keep else "remove"],
                            stdin=subprocess.DEVNULL, start_new_session=True)


def spawn(cmd: list[str], stdout: Path, stderr: Path, cwd: Path,
          env: dict[str, str] | None = None, tell_watchdog: bool = True) -> subprocess.Popen:
    """Starts a child in its own session (a ctrl-c reaches only this script, which stops
    it). No preexec_fn: that would make Python fork instead of vfork and add 2-3 ms to
    every start, which the start-up figure would count; the watchdog covers a SIGKILL.
    A broker being timed tells the watchdog later (write_live_file), off the clock."""
    with open(stdout, "ab") as out, open(stderr, "ab") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT if stderr == stdout else err,
                                cwd=cwd, env=env, start_new_session=True)
    LIVE.append(proc)
    if tell_watchdog:
        write_live_file()
    return proc


def stop(proc: subprocess.Popen, grace_s: float) -> int | None:
    """SIGTERM, then SIGKILL after grace_s; returns the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            print(f"bench: pid {proc.pid} ignored SIGTERM for {grace_s:.0f}s; SIGKILL",
                  file=sys.stderr)
            proc.kill()
            proc.wait()
    forget(proc)
    return proc.returncode


def forget(proc: subprocess.Popen) -> None:
    if proc in LIVE:
        LIVE.remove(proc)
        write_live_file()


def kill_all() -> None:
    for proc in list(LIVE):
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        forget(proc)


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} unreadable)"
    return "\n".join(f"    {line}" for line in text[-lines:])


def run_tool(cmd: list[str], name: str, workdir: Path, timeout_s: float,
             broker: Broker | None = None) -> str:
    """Runs a tool to completion; returns its stdout or raises BenchError with its output.
    Stops it at once if `broker` (the one it talks to) exits meanwhile."""
    out, err = workdir / f"{name}.out", workdir / f"{name}.err"
    proc = spawn(cmd, out, err, workdir)
    deadline = time.monotonic() + timeout_s
    rc, why = None, ""
    while rc is None and not why:
        try:
            rc = proc.wait(timeout=TOOL_POLL_S)
        except subprocess.TimeoutExpired:
            if broker is not None and broker.exited():
                why = f"stopped: {broker.name} exited while it ran\n{broker.log_tail()}"
            elif time.monotonic() > deadline:
                why = f"timed out after {timeout_s:.0f}s"
    if rc is None:
        proc.kill()
        proc.wait()
    forget(proc)
    if rc != 0:
        why = why or f"exited with {rc}"
        raise BenchError(f"{name} {why}\n  command: {' '.join(cmd[-12:])}\n"
                         f"  stdout:\n{tail(out)}\n  stderr:\n{tail(err)}")
    return out.read_text(errors="replace")


def java_cmd(main_class: str, args: list[str], classpath: str,
             heap: list[str] = TOOL_HEAP) -> list[str]:
    return ["java", *heap, *JVM_PERFORMANCE_OPTS,
            f"-Dlog4j2.configurationFile={TOOLS_LOG4J}", "-cp", classpath, main_class, *args]


# --- /proc -------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), in seconds."""
    return parsers.proc_stat_ticks(Path(f"/proc/{pid}/stat").read_text()) / CLK_TCK


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile, ... from /proc/<pid>/status, in KiB."""
    return parsers.proc_status_kib(Path(f"/proc/{pid}/status").read_text())


# --- the Metadata probe ------------------------------------------------------------------

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


def metadata_lists_port(sock: socket.socket, correlation_id: int, port: int) -> bool:
    """Reads a Metadata v1 response; true when its broker list holds our port."""
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    got_id, ports = parsers.metadata_v1_broker_ports(recv_exact(sock, size))
    return got_id == correlation_id and port in ports


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
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(PROBE_RECV_TIMEOUT_S)
            try:
                sock.connect(("127.0.0.1", port))
                sock.sendall(metadata_request(request_id))
                if metadata_lists_port(sock, request_id, port):
                    return time.monotonic()
            except (OSError, struct.error):
                pass
        time.sleep(0.0001 if elapsed < 0.1 else 0.001 if elapsed < 1 else 0.002)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def metadata_ports(port: int) -> set[int]:
    """The client ports of the brokers a Metadata v1 response from `port` lists (an
    unfenced broker's); empty when nothing answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(PROBE_RECV_TIMEOUT_S)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(metadata_request(1))
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            data = recv_exact(sock, size)
        except (OSError, struct.error):
            return set()
    try:
        return set(parsers.metadata_v1_broker_ports(data)[1])
    except struct.error:
        return set()


# Reserved for other local clusters and the compat suites: never used by the bench.
RESERVED_PORTS = {9092, 9093, 9094, 9192, 9193, 9194, 19092, 19093}


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports, none of RESERVED_PORTS."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports and port not in RESERVED_PORTS:
            ports.append(port)
    return ports


# --- brokers -----------------------------------------------------------------------------

class Broker:
    """A broker process started by this script in its own session directory."""

    name = ""

    def __init__(self, ctx: Context, session_dir: Path) -> None:
        self.ctx = ctx
        self.dir = session_dir
        self.port = free_ports(1)[0]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.stdout = session_dir / "broker.log"
        self.log = self.stdout  # where the broker logs; Kafka's goes to logs/server.log

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> dict:
        return {}

    def env(self) -> dict[str, str] | None:
        return None

    def start(self) -> dict:
        """Starts the broker; returns start-up figures (time to first Metadata response)."""
        info = self.prepare()
        cmd = self.command()
        started = time.monotonic()
        self.proc = spawn(cmd, self.stdout, self.stdout, self.dir, self.env(),
                          tell_watchdog=False)
        spawned = time.monotonic()
        try:
            answered = wait_for_metadata(self.port, self.proc, started)
        except BenchError as err:
            raise BenchError(f"{self.name}: {err}\n{self.log_tail()}") from None
        finally:
            write_live_file()
        info.update(pid=self.proc.pid, spawn_ms=(spawned - started) * 1e3,
                    start_to_metadata_ms=(answered - started) * 1e3)
        return info

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def check_alive(self, during: str) -> None:
        if self.proc is None or self.proc.poll() is not None:
            status = None if self.proc is None else self.proc.returncode
            raise BenchError(f"{self.name} exited (status {status}) during {during}\n"
                             f"{self.log_tail()}")

    def log_tail(self) -> str:
        return f"  end of the {self.name} log ({self.log}):\n{tail(self.log, 40)}"

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc, BROKER_STOP_GRACE_S)

    def cpu_pids(self) -> str:
        return str(self.pid())


class Highwater(Broker):
    name = "highwater"

    def command(self) -> list[str]:
        return [str(self.ctx.highwater_bin), "serve", "--config", str(HIGHWATER_CONFIG),
                "--listeners", self.bootstrap, "--log-dirs", str(self.dir / "data")]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("RUST_LOG", None)  # the config's default level (info), as Kafka logs INFO
        return env


# What every Kafka node of the suite shares: start.sh's single-node settings for the
# internal topics, and groups that form at once.
KAFKA_COMMON_PROPERTIES = """num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
"""


class Kafka(Broker):
    name = "kafka"

    def __init__(self, ctx: Context, session_dir: Path) -> None:
        super().__init__(ctx, session_dir)
        self.controller_port = free_ports(1)[0]
        self.props = session_dir / "server.properties"
        self.log = session_dir / "logs" / "server.log"

    def prepare(self) -> dict:
        """Writes server.properties (as compat/kafka-ref/start.sh) and formats the storage."""
        (self.dir / "logs").mkdir(parents=True)
        data = self.dir / "data"
        self.props.write_text(f"""\
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://{self.bootstrap},CONTROLLER://127.0.0.1:{self.controller_port}
advertised.listeners=PLAINTEXT://{self.bootstrap}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}
log.dirs={data}
""" + KAFKA_COMMON_PROPERTIES)
        began = time.monotonic()
        run_tool(java_cmd("kafka.tools.StorageTool",
                          ["format", "--standalone", "-t", kafka_cluster_id(),
                           "-c", str(self.props)], self.ctx.kafka_classpath, ["-Xmx256M"]),
                 "kafka-storage-format", self.dir, 120)
        return {"format_s": time.monotonic() - began}

    def command(self) -> list[str]:
        return ["java", *BROKER_HEAP, *JVM_PERFORMANCE_OPTS,
                f"-Dkafka.logs.dir={self.dir / 'logs'}", "-Dkafka.request.log.level=WARN",
                f"-Dlog4j2.configurationFile={KAFKA_LOG4J}",
                "-cp", self.ctx.kafka_classpath, "kafka.Kafka", str(self.props)]

    def log_tail(self) -> str:
        return (f"  end of the kafka log ({self.log}):\n{tail(self.log, 40)}\n"
                f"  end of its stdout ({self.stdout}):\n{tail(self.stdout, 20)}")


def kafka_cluster_id() -> str:
    """A random Kafka Uuid in its base64url form (what kafka-storage random-uuid prints)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


BROKERS = {"highwater": Highwater, "kafka": Kafka}


# --- three-node clusters (the RF=3 section) ----------------------------------------------

CLUSTER_NODES = 3
CLUSTER_STOP_GRACE_S = 10.0
HIGHWATER_CLUSTER_CONFIGS = ROOT / "config" / "cluster"


class Cluster:
    """Three combined broker+controller nodes of one kind on free loopback ports, each with
    its own data dir under the session dir. Quacks like a Broker where the tools need one:
    name, bootstrap (all three), dir, exited(), check_alive(), log_tail(), cpu_pids()."""

    name = ""

    def __init__(self, ctx: Context, session_dir: Path) -> None:
        self.ctx = ctx
        self.dir = session_dir
        ports = free_ports(2 * CLUSTER_NODES)
        self.ports, self.controller_ports = ports[:CLUSTER_NODES], ports[CLUSTER_NODES:]
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.node_dirs = [session_dir / f"node-{i + 1}" for i in range(CLUSTER_NODES)]
        self.procs: list[subprocess.Popen] = []

    def voters(self) -> str:
        return ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(self.controller_ports))

    def prepare(self) -> None:
        for node_dir in self.node_dirs:
            node_dir.mkdir(parents=True)

    def command(self, node: int) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str] | None:
        return None

    def node_log(self, node: int) -> Path:
        return self.node_dirs[node] / "stdout.log"

    def start(self) -> dict:
        """Starts the three nodes together and waits until each answers a Metadata request
        listing all three brokers (registered and unfenced)."""
        self.prepare()
        began = time.monotonic()
        for node in range(CLUSTER_NODES):
            self.procs.append(spawn(self.command(node), self.node_dirs[node] / "stdout.log",
                                    self.node_dirs[node] / "stdout.log", self.node_dirs[node],
                                    self.env()))
        want = set(self.ports)
        pending = set(self.ports)
        while pending:
            self.check_alive("start-up")
            if time.monotonic() - began > BROKER_START_TIMEOUT_S:
                raise BenchError(f"{self.name} cluster: after {BROKER_START_TIMEOUT_S:.0f}s, "
                                 f"ports {sorted(pending)} do not list all of "
                                 f"{sorted(want)} in Metadata\n{self.log_tail()}")
            pending = {p for p in pending if not want <= metadata_ports(p)}
            if pending:
                time.sleep(0.1)
        return {"pids": [proc.pid for proc in self.procs],
                "start_to_ready_ms": (time.monotonic() - began) * 1e3}

    def cpu_pids(self) -> str:
        return ",".join(str(proc.pid) for proc in self.procs)

    def exited(self) -> bool:
        return any(proc.poll() is not None for proc in self.procs)

    def check_alive(self, during: str) -> None:
        for node, proc in enumerate(self.procs):
            if proc.poll() is not None:
                raise BenchError(f"{self.name} node {node + 1} exited (status "
                                 f"{proc.returncode}) during {during}\n{self.log_tail()}")

    def log_tail(self) -> str:
        return "\n".join(f"  end of the {self.name} node {node + 1} log "
                         f"({self.node_log(node)}):\n{tail(self.node_log(node), 15)}"
                         for node in range(CLUSTER_NODES))

    def stop(self) -> None:
        """SIGTERM to all three at once (one at a time, the last ones would wait for a
        quorum that is gone), SIGKILL after CLUSTER_STOP_GRACE_S."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + CLUSTER_STOP_GRACE_S
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            forget(proc)


def highwater_node_config(node: int, port: int, controller_port: int, voters: str,
                          data: Path) -> str:
    """config/cluster/node-N.toml with this run's ports, voters and data dir."""
    text = (HIGHWATER_CLUSTER_CONFIGS / f"node-{node + 1}.toml").read_text()
    for pattern, value in (
            (r'^listeners = .*$',
             f'listeners = "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"'),
            (r'^"controller\.quorum\.voters" = .*$', f'"controller.quorum.voters" = "{voters}"'),
            (r'^"log\.dirs" = .*$', f'"log.dirs" = "{data}"')):
        text, count = re.subn(pattern, lambda _m, v=value: v, text, flags=re.MULTILINE)
        if count != 1:
            raise BenchError(f"config/cluster/node-{node + 1}.toml: expected one line "
                             f"matching {pattern}, found {count}")
    return "# Generated by bench/bench.py from config/cluster/; ports and data dir replaced.\n" \
        + text


class HighwaterCluster(Cluster):
    name = "highwater"

    def prepare(self) -> None:
        super().prepare()
        for node, node_dir in enumerate(self.node_dirs):
            (node_dir / "node.toml").write_text(highwater_node_config(
                node, self.ports[node], self.controller_ports[node], self.voters(),
                node_dir / "data"))

    def command(self, node: int) -> list[str]:
        return [str(self.ctx.highwater_bin), "serve", "--config",
                str(self.node_dirs[node] / "node.toml")]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("RUST_LOG", None)
        return env


class KafkaCluster(Cluster):
    name = "kafka"

    def node_log(self, node: int) -> Path:
        return self.node_dirs[node] / "logs" / "server.log"

    def props(self, node: int) -> Path:
        return self.node_dirs[node] / "server.properties"

    def prepare(self) -> None:
        """server.properties per node (compat/kafka-ref/start.sh's, with a static quorum of
        the three controllers) and one storage format per node with a shared cluster id."""
        super().prepare()
        cluster_id = kafka_cluster_id()
        for node, node_dir in enumerate(self.node_dirs):
            (node_dir / "logs").mkdir()
            bootstrap = f"127.0.0.1:{self.ports[node]}"
            self.props(node).write_text(f"""\
process.roles=broker,controller
node.id={node + 1}
listeners=PLAINTEXT://{bootstrap},CONTROLLER://127.0.0.1:{self.controller_ports[node]}
advertised.listeners=PLAINTEXT://{bootstrap}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
controller.quorum.voters={self.voters()}
log.dirs={node_dir / "data"}
""" + KAFKA_COMMON_PROPERTIES)
            run_tool(java_cmd("kafka.tools.StorageTool",
                              ["format", "-t", cluster_id, "-c", str(self.props(node))],
                              self.ctx.kafka_classpath, ["-Xmx256M"]),
                     "kafka-storage-format", node_dir, 120)

    def command(self, node: int) -> list[str]:
        node_dir = self.node_dirs[node]
        return ["java", *BROKER_HEAP, *JVM_PERFORMANCE_OPTS,
                f"-Dkafka.logs.dir={node_dir / 'logs'}", "-Dkafka.request.log.level=WARN",
                f"-Dlog4j2.configurationFile={KAFKA_LOG4J}",
                "-cp", self.ctx.kafka_classpath, "kafka.Kafka", str(self.props(node))]


CLUSTERS = {"highwater": HighwaterCluster, "kafka": KafkaCluster}


# --- tools -------------------------------------------------------------------------------

@dataclasses.dataclass
class Context:
    """What every session needs: the plan, the work dir and the class paths."""

    plan: Plan
    work: Path
    highwater_bin: Path
    kafka_classpath: str
    tool_classpath: str
    keep: bool
    began: float

    def log(self, message: str) -> None:
        elapsed = time.monotonic() - self.began
        print(f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}] {message}", flush=True)


def result_line(out: str, tool: str) -> dict[str, float]:
    """The key=value pairs of BenchTool's "RESULT ..." line."""
    result = parsers.result_line(out)
    if result is None:
        raise BenchError(f"{tool} printed no RESULT line:\n{out[-2000:]}")
    return result


def broker_sample(broker: Broker) -> dict:
    mem = memory_kib(broker.pid())
    return {"broker_rss_kib": mem.get("VmRSS"), "broker_anon_kib": mem.get("RssAnon"),
            "broker_hwm_kib": mem.get("VmHWM")}


def create_topics(ctx: Context, broker: Broker | Cluster,
                  topics: list[tuple[str, int]] | list[tuple[str, int, int]]) -> None:
    """(name, partitions[, replication factor]); waits for leaders and full ISRs."""
    specs = [":".join(str(part) for part in topic) for topic in topics]
    out = run_tool(java_cmd("BenchTool", ["create-topics", broker.bootstrap, *specs],
                            ctx.tool_classpath), "create-topics", broker.dir,
                   ctx.plan.tool_timeout_s, broker)
    if int(result_line(out, "create-topics")["topics"]) != len(topics):
        raise BenchError(f"create-topics created fewer than {len(topics)} topics")


def producer_performance(ctx: Context, broker: Broker, topic: str, w: Workload,
                         records: int, throughput: int, warmup_records: int,
                         transactional: bool = False) -> dict:
    """Kafka's ProducerPerformance after a warm-up in the same JVM (BenchTool producer-perf);
    the broker's CPU time is read around the measured run only. Transactional: a
    transactional id of its own, a commit every TXN_DURATION_MS."""
    args = ["--topic", topic, "--num-records", str(records), "--record-size", str(w.size),
            "--throughput", str(throughput)]
    if transactional:
        args += ["--transactional-id", f"{topic}-txn",
                 "--transaction-duration-ms", str(TXN_DURATION_MS)]
    args += ["--producer-props", f"bootstrap.servers={broker.bootstrap}", f"acks={w.acks}"]
    name = f"producer-{topic}"
    out = run_tool(java_cmd("BenchTool", ["producer-perf", broker.cpu_pids(), str(CLK_TCK),
                                          str(warmup_records), *args], ctx.tool_classpath),
                   name, broker.dir, ctx.plan.tool_timeout_s, broker)
    broker.check_alive(f"ProducerPerformance on {topic}")
    summary = parsers.producer_summary(out)
    if summary is None:
        raise BenchError(f"ProducerPerformance on {topic} printed no summary:\n{out[-2000:]}")
    sent = summary.pop("sent")
    if sent != records:
        raise BenchError(f"ProducerPerformance on {topic}: {sent} of {records} records "
                         f"acknowledged ({broker.name})\n{tail(broker.dir / f'{name}.err')}")
    cpu = result_line(out, "BenchTool producer-perf")
    tool = "ProducerPerformance (transactional)" if transactional else "ProducerPerformance"
    return {"tool": tool, "topic": topic, "workload": w.key,
            "records": records, "warmup_records": warmup_records,
            "throughput_arg": throughput, **summary,
            "payload_bytes": records * w.size, "broker_cpu_s": cpu["broker_cpu_s"],
            "broker_minflt": int(cpu["broker_minflt"]),
            "broker_majflt": int(cpu["broker_majflt"]), "wall_s": cpu["wall_s"],
            **(broker_sample(broker) if isinstance(broker, Broker) else {})}


def consume(ctx: Context, broker: Broker, topic: str, records: int,
            isolation: str = "read_uncommitted") -> dict:
    out = run_tool(java_cmd("BenchTool", ["consume", broker.bootstrap, topic, str(records),
                                          "10000", isolation], ctx.tool_classpath),
                   f"consume-{topic}", broker.dir, ctx.plan.tool_timeout_s, broker)
    broker.check_alive(f"consuming {topic}")
    tool = ("BenchTool consume (assign)" if isolation == "read_uncommitted"
            else f"BenchTool consume (assign, {isolation})")
    return {"tool": tool, "topic": topic,
            **result_line(out, "BenchTool consume"), **broker_sample(broker)}


def consumer_performance_reference(ctx: Context, broker: Broker, topic: str,
                                   records: int) -> dict:
    """Kafka's own ConsumerPerformance (subscribe, a consumer group)."""
    args = ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--messages",
            str(records), "--group", f"bench-{topic}", "--timeout", "30000", "--hide-header"]
    out = run_tool(java_cmd("org.apache.kafka.tools.ConsumerPerformance", args,
                            ctx.kafka_classpath), f"consumer-perf-{topic}", broker.dir,
                   ctx.plan.tool_timeout_s, broker)
    result = parsers.consumer_performance(out)
    if result is None:
        raise BenchError(f"ConsumerPerformance on {topic}: unexpected output\n{out[-2000:]}")
    if result["records"] < records:
        raise BenchError(f"ConsumerPerformance on {topic} read {result['records']} of {records}")
    return {"tool": "ConsumerPerformance", "topic": topic, **result}


def end_to_end(ctx: Context, broker: Broker, topic: str, size: int, acks: str) -> dict:
    records = ctx.plan.end_to_end_records
    out = run_tool(java_cmd("BenchTool", ["end-to-end", broker.bootstrap, topic,
                                          str(records), acks, str(size)],
                            ctx.tool_classpath), f"end-to-end-{topic}", broker.dir,
                   ctx.plan.tool_timeout_s, broker)
    broker.check_alive(f"end-to-end on {topic}")
    return {"tool": "BenchTool end-to-end (assign)", "topic": topic, "size": size,
            "acks": acks, **result_line(out, "BenchTool end-to-end")}


def end_to_end_reference(ctx: Context, broker: Broker, topic: str, size: int,
                         acks: str) -> dict:
    """Kafka's own EndToEndLatency (group.id set, commitSync() at the end)."""
    records = ctx.plan.end_to_end_records
    out = run_tool(java_cmd("org.apache.kafka.tools.EndToEndLatency",
                            [broker.bootstrap, topic, str(records), acks, str(size)],
                            ctx.kafka_classpath), f"e2e-latency-{topic}", broker.dir,
                   ctx.plan.tool_timeout_s, broker)
    latency = parsers.end_to_end_latency(out)
    if latency is None:
        raise BenchError(f"EndToEndLatency on {topic}: unexpected output\n{out[-2000:]}")
    return {"tool": "EndToEndLatency", "topic": topic, "size": size, "acks": acks,
            "records": records, **latency}


# --- sessions ----------------------------------------------------------------------------

def consumed_workloads(plan: Plan) -> list[Workload]:
    """One workload per (record size, partitions): the data to read back."""
    seen, picked = set(), []
    for w in plan.workloads:
        if (w.size, w.partitions) not in seen:
            seen.add((w.size, w.partitions))
            picked.append(w)
    return picked


def stored_records(plan: Plan, w: Workload) -> int:
    """Records in a throughput topic: the warm-up's and the measured run's."""
    records = plan.unthrottled_records[w.size]
    return records + int(records * plan.warmup_fraction)


def e2e_topic(size: int, acks: str, reference: bool = False) -> str:
    return f"bench-e2e{'-ref' if reference else ''}-{size}B-acks{acks}"


WARMUP = Workload(100, "1", 6)


def warmup_topics(plan: Plan) -> list[tuple[str, int]]:
    return [(WARMUP.topic("warmup"), WARMUP.partitions)] if plan.broker_warmup_records else []


def warm_up_broker(ctx: Context, broker: Broker) -> list[dict]:
    """Produces plan.broker_warmup_records unthrottled and reads them back, so that the
    figures come from a warm broker (for Kafka: its JIT); not counted in any figure."""
    records = ctx.plan.broker_warmup_records
    if records == 0:
        return []
    topic = WARMUP.topic("warmup")
    run = producer_performance(ctx, broker, topic, WARMUP, records, -1, 0)
    run.update(tool="ProducerPerformance (broker warm-up)", workload="broker warm-up")
    read = consume(ctx, broker, topic, records)
    read["tool"] = "BenchTool consume (broker warm-up)"
    ctx.log(f"  {broker.name} warmed up: {run['mb_per_s']:.1f} MB/s produced, "
            f"{read['mb_per_s']:.1f} MB/s consumed")
    return [run, read]


def transactional_runs(ctx: Context, broker: Broker) -> list[dict]:
    """ProducerPerformance with transactions, each topic then read by read_committed."""
    plan, runs = ctx.plan, []
    for w in plan.transactional:
        records = plan.unthrottled_records[w.size]
        runs.append(producer_performance(ctx, broker, w.topic("x"), w, records, -1,
                                         int(records * plan.warmup_fraction), True))
        ctx.log(f"  {broker.name} transactional {w.label}: {runs[-1]['mb_per_s']:.1f} MB/s, "
                f"broker CPU {runs[-1]['broker_cpu_s']:.2f} s")
        runs.append(consume(ctx, broker, w.topic("x"), stored_records(plan, w),
                            "read_committed"))
        ctx.log(f"  {broker.name} read_committed {w.topic('x')}: "
                f"{runs[-1]['mb_per_s']:.1f} MB/s")
    return runs


def throughput_runs(ctx: Context, broker: Broker) -> list[dict]:
    plan = ctx.plan
    create_topics(ctx, broker, [(w.topic("t"), w.partitions) for w in plan.workloads]
                  + [(w.topic("x"), w.partitions) for w in plan.transactional]
                  + warmup_topics(plan))
    runs = warm_up_broker(ctx, broker)
    for w in plan.workloads:
        records = plan.unthrottled_records[w.size]
        runs.append(producer_performance(ctx, broker, w.topic("t"), w, records, -1,
                                         int(records * plan.warmup_fraction)))
        ctx.log(f"  {broker.name} {w.label}: {runs[-1]['mb_per_s']:.1f} MB/s, "
                f"broker CPU {runs[-1]['broker_cpu_s']:.2f} s")
    for w in consumed_workloads(plan):
        records = stored_records(plan, w)
        runs.append(consume(ctx, broker, w.topic("t"), records))
        ctx.log(f"  {broker.name} consume {w.topic('t')}: {runs[-1]['mb_per_s']:.1f} MB/s")
        if plan.kafka_references:
            runs.append(consumer_performance_reference(ctx, broker, w.topic("t"), records))
    return runs + transactional_runs(ctx, broker)


def latency_runs(ctx: Context, broker: Broker, rates: dict[str, int]) -> list[dict]:
    plan = ctx.plan
    topics = [(w.topic("l"), w.partitions) for w in plan.workloads]
    topics += [(e2e_topic(size, acks), 1) for size, acks in plan.end_to_end]
    if plan.kafka_references:
        topics += [(e2e_topic(size, acks, True), 1) for size, acks in plan.end_to_end]
    create_topics(ctx, broker, topics + warmup_topics(plan))
    runs = warm_up_broker(ctx, broker)
    for w in plan.workloads:
        rate = rates[w.key]
        records = max(1, int(rate * plan.fixed_rate_seconds))
        runs.append(producer_performance(ctx, broker, w.topic("l"), w, records, rate,
                                         int(rate * plan.warmup_seconds)))
        runs[-1]["target_rate"] = rate
        ctx.log(f"  {broker.name} {w.label} at {rate} rec/s: p50/p99/p99.9 "
                f"{runs[-1]['p50_ms']}/{runs[-1]['p99_ms']}/{runs[-1]['p999_ms']} ms")
    for size, acks in plan.end_to_end:
        runs.append(end_to_end(ctx, broker, e2e_topic(size, acks), size, acks))
        ctx.log(f"  {broker.name} end-to-end {size} B acks={acks}: p50/p99 "
                f"{runs[-1]['p50_ms']:.2f}/{runs[-1]['p99_ms']:.2f} ms")
        if plan.kafka_references:
            runs.append(end_to_end_reference(ctx, broker, e2e_topic(size, acks, True),
                                             size, acks))
    return runs


def idle_figures(broker: Broker, settle_s: float) -> dict:
    """CPU use over the first settle_s after the first Metadata answer, then VmRSS."""
    pid = broker.pid()
    cpu_before, began = cpu_seconds(pid), time.monotonic()
    time.sleep(settle_s)
    cpu_s, wall_s = cpu_seconds(pid) - cpu_before, time.monotonic() - began
    mem = memory_kib(pid)
    return {"idle_rss_kib": mem["VmRSS"], "idle_anon_kib": mem.get("RssAnon"),
            "idle_cpu_pct": 100.0 * cpu_s / wall_s}


def run_session(ctx: Context, kind: str, phase: str, round_no: int,
                rates: dict[str, int] | None = None) -> dict:
    session_dir = ctx.work / f"{phase}-r{round_no}-{kind}"
    session_dir.mkdir()
    broker = BROKERS[kind](ctx, session_dir)
    record: dict = {"broker": kind, "phase": phase, "round": round_no}
    began = time.monotonic()
    ctx.log(f"{phase} round {round_no}: {kind}")
    try:
        record.update(broker.start())
        ctx.log(f"  {kind} answered Metadata {record['start_to_metadata_ms']:.1f} ms "
                f"after its start")
        record.update(idle_figures(broker, ctx.plan.settle_s))
        if phase == "throughput":
            record["runs"] = throughput_runs(ctx, broker)
        else:
            assert rates is not None
            record["runs"] = latency_runs(ctx, broker, rates)
        broker.check_alive("the session")
        mem = memory_kib(broker.pid())
        record["end_memory_kib"] = {k: mem[k] for k in
                                    ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem")
                                    if k in mem}
    finally:
        broker.stop()
    record["wall_s"] = time.monotonic() - began
    if not ctx.keep:
        shutil.rmtree(session_dir, ignore_errors=True)
    return record


def fixed_rates(sessions: list[dict], plan: Plan) -> dict[str, int]:
    """Half of Kafka's median unthrottled records/s per workload, from this run."""
    rates = {}
    for w in plan.workloads:
        kafka = [r["records_per_s"] for s in sessions if s["broker"] == "kafka"
                 for r in s["runs"] if r["tool"] == "ProducerPerformance"
                 and r["workload"] == w.key]
        rates[w.key] = max(1, int(statistics.median(kafka) / 2))
    return rates


RF3_WORKLOAD_PARTITIONS = 6


def rf3_topic(rf: int, kind: str) -> str:
    return f"bench-rf{rf}-{kind}"


def rf3_workload() -> Workload:
    return Workload(100, "all", RF3_WORKLOAD_PARTITIONS)


def rf3_fixed_rate(plan: Plan, sessions: list[dict]) -> int:
    """The fixed rate of a round: plan.rf3_rate if set, else half of the median of Kafka's
    RF=3 unthrottled records/s in `sessions` (Kafka runs first in every round)."""
    if plan.rf3_rate:
        return plan.rf3_rate
    kafka = [r["records_per_s"] for s in sessions if s["broker"] == "kafka"
             for r in s["runs"] if r["kind"] == "unthrottled" and r["rf"] == 3]
    if not kafka:
        raise BenchError("no Kafka RF=3 rate to derive the fixed rate from (use --rf3-rate)")
    return max(1, int(statistics.median(kafka) / 2))


def run_rf3_session(ctx: Context, kind: str, round_no: int, earlier: list[dict]) -> dict:
    """One three-node cluster of `kind`: ProducerPerformance (100 B, acks=all, 6 partitions)
    unthrottled and at the round's fixed rate (rf3_fixed_rate over the `earlier` sessions
    and this one), to an RF=3 and an RF=1 topic of the same cluster (the order of the two
    swaps every round); broker CPU summed over the three nodes."""
    plan = ctx.plan
    session_dir = ctx.work / f"rf3-r{round_no}-{kind}"
    session_dir.mkdir()
    cluster = CLUSTERS[kind](ctx, session_dir)
    record: dict = {"broker": kind, "phase": "rf3", "round": round_no, "runs": []}
    began = time.monotonic()
    ctx.log(f"rf3 round {round_no}: {kind}, three nodes")
    w = rf3_workload()
    rfs = (1, 3) if round_no % 2 else (3, 1)
    try:
        record.update(cluster.start())
        ctx.log(f"  {kind}: all three brokers in Metadata "
                f"{record['start_to_ready_ms'] / 1e3:.1f} s after the start")
        create_topics(ctx, cluster, [(rf3_topic(rf, part), w.partitions, rf)
                                     for rf in rfs for part in ("t", "l")])
        for rf in rfs:
            records = plan.rf3_records
            run = producer_performance(ctx, cluster, rf3_topic(rf, "t"), w, records, -1,
                                       int(records * plan.warmup_fraction))
            run.update(rf=rf, kind="unthrottled")
            record["runs"].append(run)
            ctx.log(f"  {kind} RF={rf} unthrottled: {run['mb_per_s']:.1f} MB/s, "
                    f"brokers' CPU {run['broker_cpu_s']:.2f} s")
        rate = rf3_fixed_rate(plan, [*earlier, record])
        for rf in rfs:
            run = producer_performance(ctx, cluster, rf3_topic(rf, "l"), w,
                                       max(1, int(rate * plan.rf3_fixed_seconds)), rate,
                                       int(rate * plan.warmup_seconds))
            run.update(rf=rf, kind="fixed", target_rate=rate)
            record["runs"].append(run)
            ctx.log(f"  {kind} RF={rf} at {rate} rec/s: p50/p99/p99.9 "
                    f"{run['p50_ms']}/{run['p99_ms']}/{run['p999_ms']} ms")
        cluster.check_alive("the session")
    finally:
        cluster.stop()
    record["wall_s"] = time.monotonic() - began
    if not ctx.keep:
        shutil.rmtree(session_dir, ignore_errors=True)
    return record


def run_rf3(ctx: Context) -> list[dict]:
    sessions = []
    for round_no in range(1, ctx.plan.rf3_rounds + 1):
        for kind in ctx.plan.rf3_brokers:
            sessions.append(run_rf3_session(ctx, kind, round_no, sessions))
    return sessions


@dataclasses.dataclass
class Rf3Row:
    """One row of the RF=3 vs RF=1 table: per-session values by (broker, rf)."""

    key: str
    label: str
    unit: str
    better: str
    values: dict[str, dict[str, list[float]]]  # broker -> "rf1"/"rf3" -> values

    def median(self, broker: str, rf: int) -> float | None:
        values = self.values.get(broker, {}).get(f"rf{rf}") or []
        return statistics.median(values) if values else None

    def rf_ratio(self, broker: str) -> float | None:
        return ratio_of(self.median(broker, 3), self.median(broker, 1))

    def broker_ratio(self) -> float | None:
        return ratio_of(self.median("highwater", 3), self.median("kafka", 3))

    def as_json(self) -> dict:
        return {"key": self.key, "label": self.label, "unit": self.unit,
                "better": self.better, "values": self.values,
                "medians": {b: {f"rf{rf}": self.median(b, rf) for rf in (1, 3)}
                            for b in self.values},
                "ratio_rf3_over_rf1": {b: self.rf_ratio(b) for b in self.values},
                "ratio_highwater_over_kafka_rf3": self.broker_ratio()}


def ratio_of(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def rf3_rates(sessions: list[dict]) -> list[int]:
    """The fixed rate of each round, in order."""
    rates: dict[int, int] = {}
    for s in sessions:
        for run in s["runs"]:
            if run["kind"] == "fixed":
                rates.setdefault(s["round"], run["target_rate"])
    return [rates[r] for r in sorted(rates)]


def rf3_rate_label(sessions: list[dict]) -> str:
    """"50,000" when every round ran at one rate, else "29,104–30,511"."""
    rates = rf3_rates(sessions) or [0]
    if min(rates) == max(rates):
        return f"{rates[0]:,}"
    return f"{min(rates):,}–{max(rates):,}"


def collect_rf3(sessions: list[dict], plan: Plan) -> list[Rf3Row]:
    rows: list[Rf3Row] = []

    def add(key: str, label: str, unit: str, better: str, kind: str, pick) -> None:
        values: dict[str, dict[str, list[float]]] = {}
        for s in sessions:
            for run in s["runs"]:
                if run["kind"] == kind:
                    values.setdefault(s["broker"], {"rf1": [], "rf3": []})[
                        f"rf{run['rf']}"].append(pick(run))
        if values:
            rows.append(Rf3Row(key, label, unit, better, values))

    def cpu(run: dict) -> float:
        return run["broker_cpu_s"] / (run["payload_bytes"] / 1e9)

    add("rf3.unthrottled.mb_per_s", f"unthrottled, {plan.rf3_records:,} records: throughput",
        "MB/s", "higher", "unthrottled", lambda r: r["mb_per_s"])
    add("rf3.unthrottled.p99_ms", "unthrottled: p99 (queueing in the producer)", "ms",
        "lower", "unthrottled", lambda r: r["p99_ms"])
    add("rf3.unthrottled.cpu_s_per_gb", "unthrottled: CPU of the 3 brokers per GB", "s/GB",
        "lower", "unthrottled", cpu)
    at = f"at {rf3_rate_label(sessions)} rec/s"
    for field, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
        add(f"rf3.fixed.{field}", f"{at}: {name}", "ms", "lower",
            "fixed", lambda r, f=field: r[f])
    add("rf3.fixed.records_per_s", f"{at}: rate achieved", "rec/s",
        "higher", "fixed", lambda r: r["records_per_s"])
    add("rf3.fixed.cpu_s_per_gb", f"{at}: CPU of the 3 brokers per GB",
        "s/GB", "lower", "fixed", cpu)
    starts: dict[str, dict[str, list[float]]] = {}
    for s in sessions:
        starts.setdefault(s["broker"], {"rf1": [], "rf3": []})["rf3"].append(
            s["start_to_ready_ms"] / 1e3)
    if starts:
        rows.append(Rf3Row("rf3.cluster_ready_s",
                           "cluster start → all 3 brokers in Metadata (per cluster)", "s",
                           "lower", starts))
    return rows


def rf3_cell(row: Rf3Row, broker: str, rf: int) -> str:
    values = row.values.get(broker, {}).get(f"rf{rf}") or []
    if not values:
        return "—"
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def plain_ratio(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}×"


def rf3_rate_description(results: dict, plan: Plan) -> str:
    rates = ", ".join(f"{r:,}" for r in rf3_rates(results.get("rf3_sessions", [])))
    if plan.rf3_rate:
        return f"{plan.rf3_rate:,} records/s"
    return ("half of the median of Kafka's RF=3 unthrottled rates measured up to the round "
            f"(records/s by round: {rates})")


def rf3_markdown(results: dict, plan: Plan, rows: list[Rf3Row]) -> list[str]:
    """The "RF=3 vs RF=1" section (its own H2, so that the README copy demotes it too)."""
    if not rows:
        return []
    brokers = [b for b in ("highwater", "kafka") if b in plan.rf3_brokers]
    rounds = plan.rf3_rounds
    lines = [
        "", "## RF=3 vs RF=1 (three local brokers, ProducerPerformance, 100 B, acks=all, "
        f"{RF3_WORKLOAD_PARTITIONS} partitions)", "",
        f"- Per broker kind, a cluster of three combined broker+controller nodes on this one "
        f"machine, started fresh for each of {rounds} round(s)"
        + (" (Kafka, then highwater)" if len(brokers) == 2 else
           f" ({brokers[0]} only)") + "; an RF=3 and an RF=1 topic "
        f"({RF3_WORKLOAD_PARTITIONS} partitions, leaders spread over the three) on the same "
        "cluster, their order swapped every round. highwater: config/cluster/node-N.toml with "
        "free ports and temp data dirs; Kafka: start.sh's properties with a static quorum of "
        "the three controllers and -Xmx1G each.",
        f"- Fixed rate: {rf3_rate_description(results, plan)}, for "
        f"{plan.rf3_fixed_seconds:g} s after a {plan.warmup_seconds:g} s warm-up, the same "
        "for both brokers and both RFs of a round. "
        "Unthrottled: a warm-up of a quarter of the records in the same JVM first. "
        "CPU: utime+stime of the three broker processes summed, per 10^9 payload bytes.",
        "- Ratios are of the medians. RF=3/RF=1 is the cost of replication on each broker; "
        "hw/Kafka compares the RF=3 medians. The three brokers and the producer JVM share "
        "the machine's cores (and other work runs beside them), so these are rough figures.",
        "",
    ]
    head = "| metric | unit |"
    rule = "|---|---|"
    for b in brokers:
        name = "highwater" if b == "highwater" else "Kafka"
        head += f" {name} RF=1 | {name} RF=3 | {name} RF=3/RF=1 |"
        rule += "---|---|---|"
    if len(brokers) == 2:
        head += " hw/Kafka at RF=3 |"
        rule += "---|"
    lines += [head, rule]
    for row in rows:
        line = f"| {row.label} | {row.unit} |"
        for b in brokers:
            line += (f" {rf3_cell(row, b, 1)} | {rf3_cell(row, b, 3)} | "
                     f"{plain_ratio(row.rf_ratio(b))} |")
        if len(brokers) == 2:
            line += f" {plain_ratio(row.broker_ratio())} |"
        lines.append(line)
    return lines


def check_smoke_rf3(rows: list[Rf3Row], plan: Plan) -> None:
    """Smoke mode: every RF=3 figure is there for both RFs of every broker that ran."""
    problems = []
    for row in rows:
        for broker in plan.rf3_brokers:
            for rf in ((3,) if row.key == "rf3.cluster_ready_s" else (1, 3)):
                values = row.values.get(broker, {}).get(f"rf{rf}") or []
                if len(values) != plan.rf3_rounds:
                    problems.append(f"{row.key}: {len(values)} values for {broker} RF={rf}, "
                                    f"expected {plan.rf3_rounds}")
                elif any(not math.isfinite(v) or v < 0 for v in values):
                    problems.append(f"{row.key}: {broker} RF={rf} {values} not finite ≥ 0")
                elif row.better == "higher" and min(values) <= 0:
                    problems.append(f"{row.key}: {broker} RF={rf} {values} is zero")
    if not rows:
        problems.append("no RF=3 figures at all")
    if problems:
        raise BenchError("smoke: implausible RF=3 figures:\n  " + "\n  ".join(problems))


# --- figures -----------------------------------------------------------------------------

@dataclasses.dataclass
class Metric:
    """One row of the table: per-session values of each broker, and their medians."""

    key: str
    section: str
    label: str
    unit: str
    better: str  # "higher" or "lower"
    values: dict[str, list[float]]

    def median(self, broker: str) -> float | None:
        values = self.values.get(broker) or []
        return statistics.median(values) if values else None

    def ratio(self) -> float | None:
        ours, theirs = self.median("highwater"), self.median("kafka")
        if ours is None or theirs is None or theirs == 0:
            return None
        return ours / theirs

    def as_json(self) -> dict:
        return {"key": self.key, "section": self.section, "label": self.label,
                "unit": self.unit, "better": self.better, "values": self.values,
                "median_highwater": self.median("highwater"),
                "median_kafka": self.median("kafka"), "ratio": self.ratio()}


SECTIONS = {
    "broker": "Broker",
    "produce": "Produce, unthrottled (ProducerPerformance --throughput -1)",
    "fixed": "Produce at a fixed rate: half of Kafka's median unthrottled rate "
             "(ProducerPerformance --throughput R; latency from send() to ack, whole ms)",
    "consume": "Consume everything produced by the unthrottled runs",
    "e2e": "End to end: produce one record, poll it back, repeat",
    "txn": "Transactions: ProducerPerformance --transactional-id, a commit every "
           f"{TXN_DURATION_MS} ms (--transaction-duration-ms), then a read_committed "
           "assign() consumer of it all",
}


def collect(sessions: list[dict], plan: Plan, rates: dict[str, int]) -> list[Metric]:
    metrics: list[Metric] = []

    def add(key: str, section: str, label: str, unit: str, better: str,
            pick) -> None:  # pick(session) -> value or None
        values: dict[str, list[float]] = {"highwater": [], "kafka": []}
        for s in sessions:
            value = pick(s)
            if value is not None:
                values[s["broker"]].append(value)
        if values["highwater"] or values["kafka"]:
            metrics.append(Metric(key, section, label, unit, better, values))

    def runs(s: dict, phase: str, **match) -> list[dict]:
        if s["phase"] != phase:
            return []
        return [r for r in s["runs"] if all(r.get(k) == v for k, v in match.items())]

    def one(s: dict, phase: str, field: str, **match) -> float | None:
        found = runs(s, phase, **match)
        return found[0][field] if found else None

    def cpu_per_gb(s: dict, phase: str, tool: str = "ProducerPerformance",
                   **match) -> float | None:
        found = runs(s, phase, tool=tool, **match)
        payload = sum(r["payload_bytes"] for r in found)
        return sum(r["broker_cpu_s"] for r in found) / (payload / 1e9) if found else None

    def faults_per_mb(s: dict, phase: str) -> float | None:
        found = runs(s, phase, tool="ProducerPerformance")
        payload = sum(r["payload_bytes"] for r in found)
        return sum(r["broker_minflt"] for r in found) / (payload / 1e6) if found else None

    settle = plan.settle_s
    add("start_to_metadata_ms", "broker", "process start → first Metadata response", "ms",
        "lower", lambda s: s["start_to_metadata_ms"])
    add("exec_to_metadata_ms", "broker",
        "the same, from the return of the spawn (exec done)", "ms", "lower",
        lambda s: s["start_to_metadata_ms"] - s["spawn_ms"])
    add("idle_rss_mib", "broker", f"idle RSS ({settle:g} s after the first Metadata)",
        "MiB", "lower", lambda s: s["idle_rss_kib"] / 1024)
    add("idle_cpu_pct", "broker", f"CPU in those {settle:g} s", "% of a core", "lower",
        lambda s: s["idle_cpu_pct"])
    add("peak_rss_mib", "broker", "peak RSS (VmHWM) of a throughput session", "MiB",
        "lower", lambda s: s["end_memory_kib"]["VmHWM"] / 1024
        if s["phase"] == "throughput" else None)
    add("anon_rss_mib", "broker", "peak anonymous RSS (RssAnon after each run)",
        "MiB", "lower", lambda s: max(r["broker_anon_kib"] for r in s["runs"]
                                      if "broker_anon_kib" in r) / 1024
        if s["phase"] == "throughput" else None)
    add("cpu_s_per_gb", "broker", "CPU per GB produced, unthrottled (all workloads)",
        "s/GB", "lower", lambda s: cpu_per_gb(s, "throughput"))
    add("minflt_per_mb", "broker",
        "minor page faults per MB produced, unthrottled", "faults/MB", "lower",
        lambda s: faults_per_mb(s, "throughput"))
    add("cpu_s_per_gb_fixed", "broker",
        "CPU per GB produced at the fixed rates (same load)", "s/GB", "lower",
        lambda s: cpu_per_gb(s, "latency"))
    for w in plan.workloads:
        add(f"produce.{w.key}.mb_per_s", "produce", f"{w.label}: throughput", "MB/s",
            "higher", lambda s, w=w: one(s, "throughput", "mb_per_s",
                                         tool="ProducerPerformance", workload=w.key))
    for w in plan.workloads:
        add(f"produce.{w.key}.cpu_s_per_gb", "produce", f"{w.label}: broker CPU", "s/GB",
            "lower", lambda s, w=w: cpu_per_gb(s, "throughput", workload=w.key))
    for w in plan.workloads:
        for field, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
            add(f"fixed.{w.key}.{field}", "fixed",
                f"{w.label} at {rates[w.key]:,} rec/s: {name}", "ms", "lower",
                lambda s, w=w, f=field: one(s, "latency", f, tool="ProducerPerformance",
                                            workload=w.key))
    for w in consumed_workloads(plan):
        topic = w.topic("t")
        records = stored_records(plan, w)
        size = "1 KiB" if w.size == 1024 else f"{w.size} B"
        label = f"{records:,} × {size}, {w.partitions} partition(s)"
        add(f"consume.{w.size}B-p{w.partitions}.mb_per_s", "consume",
            f"{label}: assign() consumer", "MB/s", "higher",
            lambda s, t=topic: one(s, "throughput", "mb_per_s",
                                   tool="BenchTool consume (assign)", topic=t))
        add(f"consume.{w.size}B-p{w.partitions}.reference_mb_per_s", "consume",
            f"{label}: Kafka's ConsumerPerformance (group; fetch.MB.sec)", "MB/s", "higher",
            lambda s, t=topic: one(s, "throughput", "fetch_mb_per_s",
                                   tool="ConsumerPerformance", topic=t))
    txn_tool = "ProducerPerformance (transactional)"
    for w in plan.transactional:
        add(f"txn.{w.key}.mb_per_s", "txn", f"{w.label}: throughput", "MB/s", "higher",
            lambda s, w=w: one(s, "throughput", "mb_per_s", tool=txn_tool, workload=w.key))
        add(f"txn.{w.key}.cpu_s_per_gb", "txn", f"{w.label}: broker CPU", "s/GB", "lower",
            lambda s, w=w: cpu_per_gb(s, "throughput", txn_tool, workload=w.key))
        add(f"txn.{w.key}.read_committed_mb_per_s", "txn",
            f"{w.label}: read_committed consumer", "MB/s", "higher",
            lambda s, t=w.topic("x"): one(s, "throughput", "mb_per_s",
                                          tool="BenchTool consume (assign, read_committed)",
                                          topic=t))
    for size, acks in plan.end_to_end:
        for field, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
            add(f"e2e.{size}B-acks{acks}.{field}", "e2e",
                f"{size} B, acks={acks}, {plan.end_to_end_records:,} records: {name}", "ms",
                "lower", lambda s, sz=size, a=acks, f=field: one(
                    s, "latency", f, tool="BenchTool end-to-end (assign)", size=sz, acks=a))
            add(f"e2e.{size}B-acks{acks}.reference.{field}", "e2e",
                f"{size} B, acks={acks}: Kafka's EndToEndLatency {name} (whole ms)", "ms",
                "lower", lambda s, sz=size, a=acks, f=field: one(
                    s, "latency", f, tool="EndToEndLatency", size=sz, acks=a))
    return metrics


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def goals(metrics: list[Metric]) -> list[dict]:
    """Issue 7's goals against this run's medians."""
    by_key = {m.key: m for m in metrics}

    def ratio(key: str) -> float | None:
        return by_key[key].ratio() if key in by_key else None

    throughput = [m.ratio() for m in metrics
                  if m.section == "produce" and m.key.endswith(".mb_per_s")]
    p99 = [m.ratio() for m in metrics if m.section == "fixed" and m.key.endswith(".p99_ms")]
    start = by_key["start_to_metadata_ms"].median("highwater")
    idle = by_key["idle_rss_mib"].median("highwater")
    rows = [
        ("broker CPU per GB produced, unthrottled", "≤ 1/3 of Kafka's (ratio ≤ 0.33)",
         ratio("cpu_s_per_gb"), lambda v: v <= 1 / 3, "ratio"),
        ("broker CPU per GB produced, at the fixed rates", "≤ 1/3 of Kafka's (ratio ≤ 0.33)",
         ratio("cpu_s_per_gb_fixed"), lambda v: v <= 1 / 3, "ratio"),
        ("produce throughput (geometric mean over workloads)", "≥ 1.5× Kafka's",
         geomean(throughput), lambda v: v >= 1.5, "ratio"),
        ("produce throughput (worst workload)", "≥ 1.5× Kafka's",
         min((v for v in throughput if v is not None), default=None),
         lambda v: v >= 1.5, "ratio"),
        ("p99 at the fixed rate (geometric mean over workloads)", "≤ 1/2 of Kafka's",
         geomean(p99), lambda v: v <= 0.5, "ratio"),
        ("p99 at the fixed rate (worst workload)", "≤ 1/2 of Kafka's",
         max((v for v in p99 if v is not None), default=None), lambda v: v <= 0.5, "ratio"),
        ("start to first Metadata response", "≤ 5 ms", start, lambda v: v <= 5, "ms"),
        ("idle RSS", "≤ 10 MiB", idle, lambda v: v <= 10, "MiB"),
    ]
    return [{"goal": name, "target": target, "measured": value, "unit": unit,
             "met": None if value is None else bool(test(value))}
            for name, target, value, test, unit in rows]


# --- output ------------------------------------------------------------------------------

def fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def cell(metric: Metric, broker: str) -> str:
    values = metric.values.get(broker) or []
    if not values:
        return "—"
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def ratio_cell(metric: Metric) -> str:
    ratio = metric.ratio()
    if ratio is None:
        return "—"
    good = ratio > 1 if metric.better == "higher" else ratio < 1
    mark = "" if abs(ratio - 1) < 0.05 else (" ✓" if good else " ✗")
    return f"{ratio:.2f}×{mark}"


def markdown(results: dict, metrics: list[Metric], plan: Plan,
             rf3_rows: list[Rf3Row]) -> str:
    meta = results["meta"]
    single = "single" in plan.sections
    if single:
        scope = (f"- {meta['rounds']} round(s) per phase, brokers alternating (highwater "
                 f"first), each freshly started on an empty data dir under "
                 f"{meta['work_dir_fs']}; suite took {meta['duration_s'] / 60:.1f} min")
    else:
        scope = (f"- Only the RF=3 section (bench/run.sh rf3): {plan.rf3_rounds} round(s), "
                 f"data dirs under {meta['work_dir_fs']}; took "
                 f"{meta['duration_s'] / 60:.1f} min")
    lines = [
        f"# highwater vs Apache Kafka {KAFKA_VERSION}: {meta['date']} ({meta['mode']})",
        "",
        f"- highwater {meta['highwater_commit']}{' (dirty tree)' if meta['dirty'] else ''},"
        f" binary sha256 {meta['highwater_sha256'][:12]}; Apache Kafka {KAFKA_VERSION} "
        f"(Maven Central jars), Java {meta['java']}",
        f"- {meta['machine']['cpus']} CPUs ({meta['machine']['cpu_model']}), "
        f"{meta['machine']['mem_gib']:.0f} GiB, {meta['machine']['kernel']}; load average "
        f"{meta['loadavg_start']} at the start, {meta['loadavg_end']} at the end",
        scope,
        "- Cells: median (min–max) over the sessions; the ratio is highwater's median over "
        "Kafka's; ✓ = better for highwater, ✗ = worse (within 5 %: no mark).",
    ]
    if not single:
        lines += rf3_markdown(results, plan, rf3_rows)
        return "\n".join(lines) + "\n"
    lines += [
        "- The single-node tables run one broker per session; on one node acks=all is the "
        "same as acks=1. Replication is measured in the RF=3 vs RF=1 table (three nodes)"
        + ("." if "rf3" in plan.sections else ", not part of this run."),
    ]
    lines += [f"- {note}" for note in results["notes"]]
    lines += ["", "## Goals (issue 7)", "", "| goal | target | measured | met |",
              "|---|---|---|---|"]
    for g in results["goals"]:
        measured = "—" if g["measured"] is None else (
            f"{g['measured']:.2f}×" if g["unit"] == "ratio" else
            f"{fmt(g['measured'])} {g['unit']}")
        met = "—" if g["met"] is None else ("yes" if g["met"] else "no")
        lines.append(f"| {g['goal']} | {g['target']} | {measured} | {met} |")
    for section, title in SECTIONS.items():
        rows = [m for m in metrics if m.section == section]
        if not rows:
            continue
        lines += ["", f"## {title}", "", "| metric | unit | highwater | Kafka | hw/Kafka |",
                  "|---|---|---|---|---|"]
        lines += [f"| {m.label} | {m.unit} | {cell(m, 'highwater')} | {cell(m, 'kafka')} | "
                  f"{ratio_cell(m)} |" for m in rows]
    lines += rf3_markdown(results, plan, rf3_rows)
    return "\n".join(lines) + "\n"


SHORT_SECTIONS = {"broker": "broker", "produce": "produce", "fixed": "fixed rate",
                  "consume": "consume", "e2e": "end to end", "txn": "transactions"}
CHART_LIMIT_LOG2 = 6  # bars stop at 1/64x and 64x; the label keeps the real ratio


def chart(metrics: list[Metric], path: Path, title: str) -> None:
    """A horizontal bar per metric: highwater/Kafka on a log scale, green when better."""
    import matplotlib  # noqa: PLC0415 (the venv has it; needed only here)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = [m for m in metrics if m.ratio() is not None and m.ratio() > 0]
    if not rows:
        raise BenchError("no highwater/Kafka ratio to chart")
    labels = [f"{SHORT_SECTIONS[m.section]}: {m.label}" for m in rows]
    ratios = [m.ratio() for m in rows]
    logs = [max(-CHART_LIMIT_LOG2, min(CHART_LIMIT_LOG2, math.log2(r))) for r in ratios]
    colors = ["#9e9e9e" if abs(r - 1) < 0.05 else
              "#2e7d32" if (r > 1) == (m.better == "higher") else "#c62828"
              for r, m in zip(ratios, rows)]
    fig, ax = plt.subplots(figsize=(11, 0.26 * len(rows) + 1.4))
    positions = list(range(len(rows)))[::-1]
    ax.barh(positions, logs, color=colors)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(positions, labels, fontsize=7)
    ticks = list(range(-CHART_LIMIT_LOG2, CHART_LIMIT_LOG2 + 1, 2))
    ax.set_xticks(ticks, [f"1/{2 ** -t}×" if t < 0 else f"{2 ** t}×" for t in ticks])
    ax.set_xlim(-CHART_LIMIT_LOG2 - 1.5, CHART_LIMIT_LOG2 + 1.5)
    for y, r, x in zip(positions, ratios, logs):
        ax.text(x, y, f" {r:.2g}× ", va="center", fontsize=6, ha="left" if x >= 0 else "right")
    ax.set_xlabel("highwater / Kafka, medians (log scale). Green: better for highwater; "
                  "red: worse; grey: within 5 %.")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def update_readme(table: str, stem: str) -> None:
    """Replaces the block between the bench:latest markers in bench/README.md."""
    readme = BENCH / "README.md"
    begin, end = "<!-- bench:latest:begin -->", "<!-- bench:latest:end -->"
    text = readme.read_text() if readme.exists() else ""
    if begin not in text or end not in text:
        print("bench: bench/README.md has no bench:latest markers; not updated",
              file=sys.stderr)
        return
    body = table.split("\n", 1)[1].strip()  # without the H1
    body = body.replace("\n## ", "\n#### ")
    block = (f"{begin}\nFrom [`results/{stem}.md`](results/{stem}.md) (raw figures: "
             f"[`{stem}.json`](results/{stem}.json), chart: [`{stem}.png`](results/{stem}.png))."
             f"\n\n![highwater/Kafka ratios](results/{stem}.png)\n\n{body}\n{end}")
    head, rest = text.split(begin, 1)
    readme.write_text(head + block + rest.split(end, 1)[1])


# --- main --------------------------------------------------------------------------------

def command_output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> dict:
    cpu_model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {"cpus": os.cpu_count(), "cpu_model": cpu_model, "mem_gib": mem_kib / 2**20,
            "kernel": f"Linux {platform.release()}"}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def prepare(plan: Plan, work: Path, binary: Path, keep: bool, began: float) -> Context:
    """Checks the Kafka jars, snapshots the highwater binary, compiles BenchTool."""
    for jar in (f"kafka_2.13-{KAFKA_VERSION}.jar", f"kafka-tools-{KAFKA_VERSION}.jar"):
        if not (LIBS / jar).exists():
            raise BenchError(f"no {jar} in {LIBS}: run compat/install-deps.sh "
                             "(make compat-deps)")
    if not os.access(binary, os.X_OK):
        raise BenchError(f"no highwater binary at {binary}: run make build")
    # A copy, so that a rebuild during the run cannot change the broker under test.
    snapshot = work / "highwater"
    shutil.copy2(binary, snapshot)
    classes = work / "classes"
    classes.mkdir()
    kafka_classpath = f"{LIBS}/*"
    run_tool(["javac", "-d", str(classes), "-cp", kafka_classpath,
              str(BENCH / "java" / "BenchTool.java")], "javac", work, 180)
    return Context(plan, work, snapshot, kafka_classpath, f"{classes}:{kafka_classpath}",
                   keep, began)


def run_phases(ctx: Context) -> tuple[list[dict], dict[str, int]]:
    sessions: list[dict] = []
    if "single" not in ctx.plan.sections:
        return sessions, {}
    for round_no in range(1, ctx.plan.rounds + 1):
        for kind in ("highwater", "kafka"):
            sessions.append(run_session(ctx, kind, "throughput", round_no))
    if not ctx.plan.latency_phase:
        return sessions, {}
    rates = fixed_rates(sessions, ctx.plan)
    ctx.log("fixed rates (half of Kafka's median records/s): "
            + ", ".join(f"{k} {v:,}" for k, v in rates.items()))
    for round_no in range(1, ctx.plan.rounds + 1):
        for kind in ("highwater", "kafka"):
            sessions.append(run_session(ctx, kind, "latency", round_no, rates))
    return sessions, rates


NOTES = [
    "Consumption is measured on both brokers twice: with bench/java/BenchTool `consume` "
    "(assign() and seekToBeginning, ConsumerPerformance's consumer settings, no group.id) "
    "and with Kafka's own ConsumerPerformance 4.1.1 (subscribe(), a consumer group; its "
    "fetch.MB.sec, which leaves out the rebalance).",
    "End-to-end latency likewise: BenchTool `end-to-end` (assign(), no group.id, in "
    "microseconds) and Kafka's own EndToEndLatency 4.1.1 (group.id set, commitSync() after "
    "its loop; whole milliseconds).",
    "Start-up is timed from just before the broker's process is spawned to the first "
    "Metadata v1 response listing the broker (a raw-socket probe polling every 0.1 ms, "
    "then 2 ms after the first second). Kafka's storage is formatted before that "
    "(kafka-storage format), not counted. Kafka runs with kafka-server-start.sh's JVM "
    "settings (-Xmx1G -Xms1G, G1).",
    "RSS counts the file pages a process maps: highwater mmaps its segments, so its RSS "
    "grows with the data produced (page cache that Kafka also uses, but through write() "
    "and so outside its RSS). The anonymous-RSS row leaves those pages out.",
    "Broker CPU: utime+stime of the broker process (/proc/PID/stat) over each measured "
    "ProducerPerformance run, per 10^9 payload bytes.",
    "ProducerPerformance uses the producer's defaults of Kafka 4.1 (linger.ms=5, "
    "batch.size=16384, idempotence on) as users run it; its latencies are whole "
    "milliseconds. It has no warm-up option, and in a fresh JVM the first second (JIT, "
    "class loading) dominates a short run's p99, so BenchTool `producer-perf` runs it "
    "twice in one JVM: a warm-up to the same topic (a quarter of the records unthrottled, "
    "2 s at fixed rates), then the measured run, whose own summary is reported.",
]


def check_smoke(metrics: list[Metric]) -> None:
    """Smoke mode: every figure is there for both brokers and is plausible."""
    problems = []
    for m in metrics:
        for broker in ("highwater", "kafka"):
            values = m.values.get(broker) or []
            if not values:
                problems.append(f"{m.key}: no value for {broker}")
            elif any(not math.isfinite(v) or v < 0 for v in values):
                problems.append(f"{m.key}: {broker} value {values} not a finite figure ≥ 0")
            elif m.unit != "ms" and m.better == "higher" and min(values) <= 0:
                problems.append(f"{m.key}: {broker} value {values} is zero")
    if problems:
        raise BenchError("smoke: implausible figures:\n  " + "\n  ".join(problems))


def write_outputs(out_dir: Path, results: dict, plan: Plan, stem: str | None = None) -> Path:
    """Computes the table from the raw sessions and writes <stem>.md, .json and .png."""
    single = "single" in plan.sections
    metrics = collect(results["sessions"], plan, results["fixed_rates"]) if single else []
    rf3_rows = collect_rf3(results.get("rf3_sessions", []), plan)
    if plan.mode == "smoke":
        check_smoke(metrics)
        check_smoke_rf3(rf3_rows, plan)
    results["metrics"] = [m.as_json() for m in metrics]
    results["goals"] = goals(metrics) if single else []
    results["rf3_metrics"] = [row.as_json() for row in rf3_rows]
    out_dir.mkdir(parents=True, exist_ok=True)
    if stem is None:
        mode = results["meta"]["mode"]
        stem = results["meta"]["date"] + ("" if mode in ("full", "smoke") else f"-{mode}")
        if (out_dir / f"{stem}.md").exists():
            stem = f"{stem}-{dt.datetime.now().strftime('%H%M%S')}"
    results["meta"]["stem"] = stem
    table = markdown(results, metrics, plan, rf3_rows)
    (out_dir / f"{stem}.md").write_text(table)
    (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    if not single:
        return out_dir / f"{stem}.md"
    png = out_dir / f"{stem}.png"
    chart(metrics, png, f"highwater / Apache Kafka {KAFKA_VERSION}, {stem} "
                        f"({results['meta']['mode']}, medians of {plan.rounds} round(s))")
    if png.stat().st_size < 1000:
        raise BenchError(f"{png} is suspiciously small")
    return out_dir / f"{stem}.md"


def plan_from_json(data: dict) -> Plan:
    fields = dict(data)
    fields["workloads"] = tuple(Workload(**w) for w in data["workloads"])
    fields["unthrottled_records"] = {int(k): v for k, v in data["unthrottled_records"].items()}
    fields["end_to_end"] = tuple(tuple(pair) for pair in data["end_to_end"])
    for name in ("sections", "rf3_brokers"):
        if name in data:
            fields[name] = tuple(data[name])
    return Plan(**fields)


def render(path: Path, update: bool) -> int:
    """Re-computes a run's .md and .png (and its .json's tables) from its raw sessions."""
    results = json.loads(path.read_text())
    plan = plan_from_json(results["meta"]["plan"])
    results["notes"] = NOTES
    md = write_outputs(path.parent, results, plan, path.stem)
    if update and "single" in plan.sections:
        update_readme(md.read_text(), path.stem)
    print(md.read_text())
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=[*sorted(PLANS), "render"],
                        help="render: re-compute the tables and chart of RESULTS_JSON")
    parser.add_argument("results_json", nargs="?", type=Path, help="for render")
    parser.add_argument("--rounds", type=int, help="rounds per phase (default: the mode's)")
    parser.add_argument("--rf3-rounds", type=int,
                        help="rounds of the RF=3 section (default: the mode's)")
    parser.add_argument("--rf3-rate", type=int,
                        help="records/s of the RF=3 section's fixed-rate runs (default: half of "
                        "Kafka's RF=3 unthrottled rate)")
    parser.add_argument("--out", type=Path,
                        help="where to write <date>.md/.json/.png (full: bench/results; "
                             "smoke: a temporary dir, deleted)")
    parser.add_argument("--highwater-bin", type=Path,
                        default=ROOT / "target" / "release" / "highwater")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="parent of the scratch dir holding both brokers' data "
                             "(default: $TMPDIR or /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument("--no-readme", action="store_true",
                        help="full mode: do not update bench/README.md")
    return parser.parse_args(argv)


def on_signal(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mode == "render":
        if args.results_json is None:
            print("bench: render needs a results .json", file=sys.stderr)
            return 2
        return render(args.results_json, not args.no_readme)
    plan = PLANS[args.mode]
    if args.rounds:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    if args.rf3_rounds:
        plan = dataclasses.replace(plan, rf3_rounds=args.rf3_rounds)
    if args.rf3_rate:
        plan = dataclasses.replace(plan, rf3_rate=args.rf3_rate)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    began = time.monotonic()
    started_at = dt.datetime.now().astimezone()
    load_start = loadavg()
    work = Path(tempfile.mkdtemp(prefix="highwater-bench.", dir=args.work_dir))
    guard = start_watchdog(work, args.keep)
    try:
        ctx = prepare(plan, work, args.highwater_bin, args.keep, began)
        parts = ([f"{plan.rounds} round(s) per single-node phase"]
                 if "single" in plan.sections else [])
        if "rf3" in plan.sections:
            parts.append(f"{plan.rf3_rounds} RF=3 round(s) ({', '.join(plan.rf3_brokers)})")
        ctx.log(f"bench {plan.mode}: {', '.join(parts)}, work dir {work}")
        sessions, rates = run_phases(ctx)
        rf3_sessions = run_rf3(ctx) if "rf3" in plan.sections else []
        results = {
            "meta": {
                "date": started_at.strftime("%Y-%m-%d"), "started_at": started_at.isoformat(),
                "mode": plan.mode, "rounds": plan.rounds,
                "duration_s": time.monotonic() - began,
                "highwater_commit": command_output(["git", "rev-parse", "--short", "HEAD"]),
                "dirty": command_output(["git", "status", "--porcelain",
                                         "--untracked-files=no"]) != "",
                "highwater_sha256": hashlib.sha256(ctx.highwater_bin.read_bytes()).hexdigest(),
                "java": java_version(),
                "machine": machine(), "loadavg_start": load_start, "loadavg_end": loadavg(),
                "work_dir_fs": command_output(["df", "--output=source,target", str(work)])
                .splitlines()[-1].split()[0],
                "plan": dataclasses.asdict(plan),
                "jvm": {"broker": BROKER_HEAP + JVM_PERFORMANCE_OPTS,
                        "tools": TOOL_HEAP + JVM_PERFORMANCE_OPTS},
            },
            "fixed_rates": rates,
            "notes": NOTES,
            "goals": [],
            "metrics": [],
            "sessions": sessions,
            "rf3_metrics": [],
            "rf3_sessions": rf3_sessions,
        }
        out_dir = args.out or (work / "results" if plan.mode == "smoke" else BENCH / "results")
        md = write_outputs(out_dir, results, plan)
        if plan.mode == "full" and not args.no_readme and args.out is None:  # not rf3
            update_readme(md.read_text(), results["meta"]["stem"])
        print()
        print(md.read_text())
        kept = "" if out_dir != work / "results" else " (smoke: deleted on exit; --out keeps)"
        kept = (" (+ .json)" if "single" not in plan.sections else " (+ .json, .png)") + kept
        ctx.log(f"bench {plan.mode}: done in {(time.monotonic() - began) / 60:.1f} min; "
                f"{md}{kept}")
        return 0
    except BenchError as err:
        print(f"\nbench {plan.mode}: FAILED: {err}", file=sys.stderr)
        return 1
    finally:
        kill_all()
        guard.kill()
        guard.wait()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return parsers.java_version(out)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "_watchdog":
        sys.exit(watchdog(int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "remove"))
    sys.exit(main())
