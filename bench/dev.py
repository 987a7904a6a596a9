#!/usr/bin/env python3
"""The test-broker figures of issue 14: `highwater dev` as CI uses it, and the cost of the
HTTP metrics endpoint on produce throughput.

1. `highwater dev` (one node): exec to its first stdout line (the bootstrap address) and to
   the first Metadata answer listing it, then idle RSS and CPU after SETTLE_S;
2. `highwater dev --nodes 3`: exec to its first line, and to a replicated topic ready
   (CreateTopics with replication factor 3 answered, then Metadata showing a leader and an
   ISR of three, all from this script over raw sockets: no JVM start is counted);
3. the metrics endpoint: `highwater serve` with `http.listeners` off, and on with /metrics
   scraped every SCRAPE_S by this script, alternating, Kafka's ProducerPerformance
   (100 B, acks=1, 6 partitions) unthrottled; the ratio of the medians.

Medians of ROUNDS rounds each. Writes bench/results/<date>-dev.md and .json and prints the
table. Usage: make bench-dev, or bench/run.sh's venv python bench/dev.py [--rounds N]
[--out DIR] [--highwater-bin PATH].
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import statistics
import struct
import threading
import time
import urllib.request
from pathlib import Path

from hwbench.brokers import BROKER_STOP_GRACE_S, Highwater
from hwbench import standalone
from hwbench.context import Context
from hwbench.errors import BenchError
from hwbench.plans import Workload
from hwbench.probes import (BROKER_START_TIMEOUT_S, PROBE_RECV_TIMEOUT_S, free_ports, recv_exact,
                            wait_for_metadata)
from hwbench.processes import forget, idle_figures, memory_kib, spawn, stop
from hwbench.tools import create_topics, producer_performance

SETTLE_S = 1.0
SCRAPE_S = 1.0
TOPIC_READY_TIMEOUT_S = 60.0
PRODUCE_RECORDS = 1_000_000
PRODUCE_WARMUP = 200_000


def first_line(proc, path: Path, timeout_s: float = 30.0) -> tuple[str, float]:
    """Waits for the first full line `proc` writes to `path`; returns it and the time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if "\n" in text:
            return text.split("\n", 1)[0], time.monotonic()
        if proc.poll() is not None:
            raise BenchError(f"highwater dev exited ({proc.returncode}) before its first line")
        time.sleep(0.0002)
    raise BenchError("highwater dev printed nothing")


def spawn_dev(ctx: Context, work: Path, name: str, args: list[str]):
    out, err = work / f"{name}.out", work / f"{name}.err"
    env = {"TMPDIR": str(work), "PATH": "/usr/bin:/bin"}
    started = time.monotonic()
    proc = spawn([str(ctx.highwater_bin), "dev", *args], out, err, work, env,
                 tell_watchdog=False)
    return proc, out, started


def version_exec_ms(ctx: Context, work: Path, round_no: int) -> float:
    """Spawn to exit of `highwater --version` the same way: what exec itself costs here
    (fork, exec, loading the binary, the measuring script's own overhead)."""
    out = work / f"version-{round_no}.out"
    started = time.monotonic()
    proc = spawn([str(ctx.highwater_bin), "--version"], out, out, work, tell_watchdog=False)
    proc.wait()
    forget(proc)
    return (time.monotonic() - started) * 1e3


def single_node_round(ctx: Context, work: Path, round_no: int) -> dict:
    port = free_ports(1)[0]
    proc, out, started = spawn_dev(ctx, work, f"dev-{round_no}", ["--port", str(port)])
    try:
        answered = wait_for_metadata(port, proc, started)
        line, printed = first_line(proc, out)
        if line != f"127.0.0.1:{port}":
            raise BenchError(f"highwater dev printed {line!r}")
        idle = idle_figures(proc.pid, SETTLE_S)
    finally:
        status = stop(proc, BROKER_STOP_GRACE_S)
    if status != 0:
        raise BenchError(f"highwater dev exited with {status} on SIGTERM")
    return {"first_line_ms": (printed - started) * 1e3,
            "first_metadata_ms": (answered - started) * 1e3,
            "version_exec_ms": version_exec_ms(ctx, work, round_no),
            **dataclasses.asdict(idle)}


# --- raw CreateTopics v2 and Metadata v1 ---------------------------------------------------

def kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def call(port: int, api_key: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhi", api_key, version, 7) + kafka_string("bench-dev")
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=PROBE_RECV_TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        return recv_exact(sock, size)[4:]  # past the correlation id


def create_topic(port: int, topic: str, replication: int) -> int:
    """CreateTopics v2 (the oldest served), one partition; returns the topic's error code."""
    body = struct.pack(">i", 1) + kafka_string(topic) + struct.pack(">ihii", 1, replication, 0, 0)
    body += struct.pack(">ib", 30_000, 0)  # timeout, validate_only
    data = call(port, 19, 2, body)  # throttle time, then the topics
    name_len = struct.unpack_from(">h", data, 8)[0]
    return struct.unpack_from(">h", data, 10 + name_len)[0]


def isr_size(port: int, topic: str) -> int:
    """The ISR size of `topic`-0 in a Metadata v1 answer (0 while it has no leader)."""
    data = call(port, 3, 1, struct.pack(">i", 1) + kafka_string(topic))
    pos, (brokers,) = 4, struct.unpack_from(">i", data, 0)
    for _ in range(brokers):
        host_len = struct.unpack_from(">h", data, pos + 4)[0]
        pos += 6 + host_len + 4
        rack_len = struct.unpack_from(">h", data, pos)[0]
        pos += 2 + max(rack_len, 0)
    pos += 4  # controller id
    topics = struct.unpack_from(">i", data, pos)[0]
    pos += 4
    for _ in range(topics):
        error, name_len = struct.unpack_from(">hh", data, pos)
        pos += 4 + name_len + 1
        partitions = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        if error != 0 or partitions == 0:
            return 0
        _, _, leader, replicas = struct.unpack_from(">hiii", data, pos)
        pos += 14 + 4 * replicas
        isr = struct.unpack_from(">i", data, pos)[0]
        return isr if leader >= 0 else 0
    return 0


def three_node_round(ctx: Context, work: Path, round_no: int) -> dict:
    port = free_ports(1)[0]
    proc, out, started = spawn_dev(ctx, work, f"dev3-{round_no}",
                                   ["--nodes", "3", "--port", str(port)])
    try:
        line, printed = first_line(proc, out, BROKER_START_TIMEOUT_S)
        if len(line.split(",")) != 3:
            raise BenchError(f"highwater dev --nodes 3 printed {line!r}")
        topic = f"ready-{round_no}"
        code = create_topic(port, topic, 3)
        if code != 0:
            raise BenchError(f"CreateTopics answered error {code}")
        created = time.monotonic()
        while isr_size(port, topic) < 3:
            if time.monotonic() - created > TOPIC_READY_TIMEOUT_S:
                raise BenchError(f"{topic}: no ISR of three after {TOPIC_READY_TIMEOUT_S}s")
            time.sleep(0.001)
        ready = time.monotonic()
        rss = memory_kib(proc.pid)["VmRSS"]
    finally:
        status = stop(proc, BROKER_STOP_GRACE_S)
    if status != 0:
        raise BenchError(f"highwater dev --nodes 3 exited with {status} on SIGTERM")
    return {"first_line_ms": (printed - started) * 1e3,
            "topic_ready_ms": (ready - started) * 1e3, "rss_kib": rss}


# --- the metrics endpoint ------------------------------------------------------------------

class HighwaterHttp(Highwater):
    """`highwater serve` with http.listeners off, or on at a port of its own."""

    def __init__(self, ctx: Context, session_dir: Path, http_port: int | None) -> None:
        super().__init__(ctx, session_dir)
        self.http_port = http_port

    def command(self) -> list[str]:
        http = "" if self.http_port is None else f"127.0.0.1:{self.http_port}"
        return [*super().command(), "--set", f"http.listeners={http}"]


def scrape_until(port: int, done: threading.Event, scrapes: list[int]) -> None:
    while not done.wait(SCRAPE_S):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            scrapes.append(len(answer.read()))


def metrics_round(ctx: Context, work: Path, on: bool, round_no: int) -> dict:
    session = work / f"metrics-{'on' if on else 'off'}-{round_no}"
    session.mkdir()
    broker = HighwaterHttp(ctx, session, free_ports(1)[0] if on else None)
    workload = Workload(100, "1", 6)
    broker.start()
    done, scrapes = threading.Event(), []
    scraper = None
    try:
        create_topics(ctx, broker, [(workload.topic("metrics"), workload.partitions)])
        if on:
            scraper = threading.Thread(target=scrape_until,
                                       args=(broker.http_port, done, scrapes), daemon=True)
            scraper.start()
        run = producer_performance(ctx, broker, workload.topic("metrics"), workload,
                                   PRODUCE_RECORDS, -1, PRODUCE_WARMUP)
    finally:
        done.set()
        if scraper is not None:
            scraper.join()
        broker.stop()
    if on and not scrapes:
        raise BenchError("no /metrics scrape succeeded during the run")
    return {"metrics": on, "records_per_s": run.records_per_s,
            "broker_cpu_s": run.broker_cpu_s, "scrapes": len(scrapes),
            "scrape_bytes": statistics.median(scrapes) if scrapes else 0}


# --- the report ----------------------------------------------------------------------------

def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def markdown(results: dict) -> str:
    single, three = results["dev"], results["dev3"]
    off = [r for r in results["metrics"] if not r["metrics"]]
    on = [r for r in results["metrics"] if r["metrics"]]
    rate_ratio = median(on, "records_per_s") / median(off, "records_per_s")
    cpu_per_record = [r["broker_cpu_s"] / PRODUCE_RECORDS for r in results["metrics"]]
    rows = [
        ("`highwater dev`: exec to first Metadata answer", "≤ 5 ms",
         f"{median(single, 'first_metadata_ms'):.2f} ms"),
        ("… of which exec alone (spawn to exit of `highwater --version`)", "",
         f"{median(single, 'version_exec_ms'):.2f} ms"),
        ("`highwater dev`: exec to its first stdout line", "",
         f"{median(single, 'first_line_ms'):.2f} ms"),
        (f"`highwater dev`: idle RSS {SETTLE_S:g} s after start", "≤ 10 MiB",
         f"{median(single, 'idle_rss_kib') / 1024:.2f} MiB"),
        ("… of which anonymous (the rest is the binary's and libc's mapped pages)", "",
         f"{median(single, 'idle_anon_kib') / 1024:.2f} MiB"),
        (f"`highwater dev`: CPU in that {SETTLE_S:g} s", "",
         f"{median(single, 'idle_cpu_pct'):.1f} % of a core"),
        ("`highwater dev --nodes 3`: exec to its first stdout line", "",
         f"{median(three, 'first_line_ms'):.0f} ms"),
        ("`highwater dev --nodes 3`: exec to an RF=3 topic with a leader and ISR of 3", "",
         f"{median(three, 'topic_ready_ms'):.0f} ms"),
        ("`highwater dev --nodes 3`: RSS of the process then", "",
         f"{median(three, 'rss_kib') / 1024:.1f} MiB"),
        (f"produce, /metrics scraped every {SCRAPE_S:g} s vs http.listeners off", "within noise",
         f"{rate_ratio:.3f}× ({median(on, 'records_per_s'):,.0f} vs "
         f"{median(off, 'records_per_s'):,.0f} records/s)"),
    ]
    meta = results["meta"]
    off_rates = [r["records_per_s"] for r in off]
    on_rates = [r["records_per_s"] for r in on]
    lines = [f"# highwater dev and the metrics endpoint — {meta['date']}", "",
             f"{meta['rounds']} round(s) each, medians; commit {meta['highwater_commit']}, "
             f"release build; ProducerPerformance 100 B, acks=1, 6 partitions, "
             f"{PRODUCE_RECORDS:,} records after {PRODUCE_WARMUP:,} of warm-up. "
             f"Spread of broker CPU per record across all metrics runs: "
             f"{min(cpu_per_record) * 1e6:.2f}–{max(cpu_per_record) * 1e6:.2f} µs; records/s "
             f"ranged {min(off_rates):,.0f}–{max(off_rates):,.0f} with http.listeners off and "
             f"{min(on_rates):,.0f}–{max(on_rates):,.0f} with /metrics scraped.", "",
             "| figure | goal | highwater |", "|---|---|---|"]
    lines += [f"| {label} | {goal} | {value} |" for label, goal, value in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    args = standalone.parser(__doc__, rounds=5).parse_args()
    return standalone.run("dev", args, lambda ctx: run(ctx, args))


def run(ctx: Context, args: argparse.Namespace) -> int:
    results: dict = {"dev": [], "dev3": [], "metrics": []}
    for round_no in range(args.rounds):
        ctx.log(f"round {round_no + 1}/{args.rounds}: highwater dev, --nodes 3, metrics")
        results["dev"].append(single_node_round(ctx, ctx.work, round_no))
        results["dev3"].append(three_node_round(ctx, ctx.work, round_no))
        for on in ((False, True) if round_no % 2 == 0 else (True, False)):
            results["metrics"].append(metrics_round(ctx, ctx.work, on, round_no))
    results["meta"] = standalone.meta(ctx, args)
    md = markdown(results)
    standalone.write_results(args.out, results["meta"]["date"], "dev", md, results)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
