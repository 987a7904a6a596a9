#!/usr/bin/env python3
"""The broker's own ceiling (issue 16): an efficient client, side by side with Apache Kafka.

Kafka's ProducerPerformance is CPU-bound on two cores, so `make bench` mostly measures the
Java producer. This drives both brokers with bench/loadgen (franz-go, 1 MiB batches, no
compression), which reports its own CPU seconds, so a reader can tell who was the
bottleneck:

1. one node, RF=1: produce 100 B and 1 KiB records with acks=1 and acks=all into 1 and 64
   partitions as fast as the client can, then consume them back, then delete the topic
   (what it left in the page cache made each later workload dearer); throughput, broker
   CPU seconds per GB, client CPU seconds per GB and the client's cores;
2. three nodes, RF=3 against RF=1 (100 B, acks=all, 6 partitions), unthrottled: the three
   brokers' summed CPU per GB;
3. latency without linger on the three nodes, RF=3, acks=all, 100 B, 6 partitions:
   linger.ms=0 and 1 at 10 %, 50 % and 80 % of Kafka's unthrottled rate of step 2 in the
   same round; p50, p99, p99.9 and max from Produce to acknowledgement, in microseconds.

Each broker and cluster first warms up on 50 MB it then deletes. Brokers alternate which
goes first each round; medians of ROUNDS rounds. Writes
bench/results/<date>-efficient.md and .json and prints the tables.
Usage: make bench-efficient, or python3 bench/efficient.py [--rounds N] [--quick]
[--out DIR] [--highwater-bin PATH].
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path

from hwbench.brokers import Highwater, Kafka
from hwbench.clusters import HighwaterCluster, KafkaCluster
from hwbench import standalone
from hwbench.context import BENCH, Context
from hwbench.errors import BenchError
from hwbench.processes import cpu_seconds

BROKERS = ("kafka", "highwater")
SIZES = (100, 1024)
ACKS = ("1", "all")
PARTITIONS = (1, 64)
# Bytes produced per single-node workload (the record count follows from the size).
SINGLE_BYTES = 400_000_000
RF3_BYTES = 200_000_000
RF3_PARTITIONS = 6
# Produced and consumed before the first measured run of each broker or cluster.
WARM_UP_BYTES = 50_000_000
LATENCY_SECONDS = 10.0
LATENCY_FRACTIONS = (0.1, 0.5, 0.8)
LINGERS = (0, 1)
TOOL_TIMEOUT_S = 600.0


def loadgen(ctx: Context, mode: str, **flags) -> dict:
    """Runs bench/loadgen; returns its JSON result."""
    cmd = [str(ctx.work / "loadgen"), mode]
    for key, value in flags.items():
        cmd += [f"-{key.replace('_', '-')}", str(value)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if done.returncode != 0:
        raise BenchError(f"loadgen {mode} failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_loadgen(work: Path) -> None:
    done = subprocess.run(["go", "build", "-o", str(work / "loadgen"), "."],
                          cwd=BENCH / "loadgen", capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"cannot build bench/loadgen: {done.stderr.strip()}")


def broker_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def measured(ctx: Context, pids: list[int], mode: str, **flags) -> dict:
    """One loadgen run with the brokers' CPU seconds spent during it."""
    before = broker_cpu(pids)
    result = loadgen(ctx, mode, **flags)
    result["broker_cpu_s"] = broker_cpu(pids) - before
    return result


def warm_up(ctx: Context, bootstrap: str, rf: int, quick: bool) -> None:
    """Produces and consumes WARM_UP_BYTES on a topic then deleted, before anything is
    measured on a fresh broker or cluster: Kafka's JIT otherwise charges its first
    workload (its RF=3/RF=1 CPU ratio was 5.2× with RF=3 run first, 1.5× with RF=1)."""
    records = (WARM_UP_BYTES // 20 if quick else WARM_UP_BYTES) // 100
    loadgen(ctx, "create", brokers=bootstrap, topic="warm-up", partitions=RF3_PARTITIONS, rf=rf)
    produced = loadgen(ctx, "produce", brokers=bootstrap, topic="warm-up", size=100,
                       records=records, acks="all")
    loadgen(ctx, "consume", brokers=bootstrap, topic="warm-up", records=produced["records"])
    loadgen(ctx, "delete", brokers=bootstrap, topic="warm-up")


def single_node(ctx: Context, kind: str, round_no: int, quick: bool) -> list[dict]:
    session = ctx.work / f"single-{kind}-{round_no}"
    session.mkdir()
    broker = Kafka(ctx, session) if kind == "kafka" else Highwater(ctx, session)
    broker.start()
    pids = [broker.nodes[0].proc.pid]
    runs = []
    try:
        warm_up(ctx, broker.bootstrap, 1, quick)
        for size in SIZES:
            for acks in ACKS:
                for partitions in PARTITIONS:
                    records = (SINGLE_BYTES // 20 if quick else SINGLE_BYTES) // size
                    topic = f"eff-{size}-{acks}-{partitions}"
                    loadgen(ctx, "create", brokers=broker.bootstrap, topic=topic,
                            partitions=partitions, rf=1)
                    produced = measured(ctx, pids, "produce", brokers=broker.bootstrap,
                                        topic=topic, size=size, records=records, acks=acks)
                    consumed = measured(ctx, pids, "consume", brokers=broker.bootstrap,
                                        topic=topic, records=produced["records"])
                    # Its data leaves the page cache before the next workload, which would
                    # otherwise pay for writing it back.
                    loadgen(ctx, "delete", brokers=broker.bootstrap, topic=topic)
                    broker.check_alive(f"the {topic} workload")
                    runs.append({"broker": kind, "round": round_no, "size": size,
                                 "acks": acks, "partitions": partitions,
                                 "produce": produced, "consume": consumed})
                    ctx.log(f"  {kind} {topic}: {mb_s(produced):.1f} MB/s produced, "
                            f"{mb_s(consumed):.1f} MB/s consumed")
    finally:
        broker.stop()
    return runs


def three_nodes(ctx: Context, kind: str, round_no: int, kafka_rate: float | None,
                quick: bool) -> tuple[list[dict], float]:
    """RF=3 and RF=1 unthrottled, then the fixed-rate latency runs at fractions of
    `kafka_rate` (records/s; this cluster's own RF=3 rate when it is Kafka's)."""
    session = ctx.work / f"cluster-{kind}-{round_no}"
    session.mkdir()
    cluster = KafkaCluster(ctx, session) if kind == "kafka" else HighwaterCluster(ctx, session)
    started = cluster.start()
    pids = started.pids
    runs = []
    try:
        warm_up(ctx, cluster.bootstrap, 3, quick)
        records = (RF3_BYTES // 10 if quick else RF3_BYTES) // 100
        rf3_rate = 0.0
        for rf in (1, 3):  # RF=1 first, its topic deleted: RF=3 does not pay for it
            topic = f"rf{rf}"
            loadgen(ctx, "create", brokers=cluster.bootstrap, topic=topic,
                    partitions=RF3_PARTITIONS, rf=rf)
            produced = measured(ctx, pids, "produce", brokers=cluster.bootstrap, topic=topic,
                                size=100, records=records, acks="all")
            if rf == 1:  # RF=3's topic stays for the latency runs
                loadgen(ctx, "delete", brokers=cluster.bootstrap, topic=topic)
            runs.append({"broker": kind, "round": round_no, "rf": rf, "produce": produced})
            ctx.log(f"  {kind} cluster RF={rf}: {mb_s(produced):.1f} MB/s")
            if rf == 3:
                rf3_rate = produced["records"] / produced["seconds"]
        base = kafka_rate if kafka_rate is not None else rf3_rate
        seconds = 2.0 if quick else LATENCY_SECONDS
        for linger in LINGERS:
            for fraction in LATENCY_FRACTIONS:
                rate = int(base * fraction)
                produced = measured(ctx, pids, "produce", brokers=cluster.bootstrap,
                                    topic="rf3", size=100, seconds=seconds, acks="all",
                                    linger_ms=linger, rate=rate)
                cluster.check_alive("the latency runs")
                runs.append({"broker": kind, "round": round_no, "rf": 3, "linger": linger,
                             "fraction": fraction, "rate": rate, "produce": produced})
                lat = produced.get("latency_us") or {}
                ctx.log(f"  {kind} linger {linger} at {rate} rec/s: p99 {lat.get('p99')} µs")
    finally:
        cluster.stop()
    return runs, rf3_rate


def mb_s(result: dict) -> float:
    return result["bytes"] / result["seconds"] / 1e6


def per_gb(result: dict, key: str) -> float:
    return result[key] / (result["bytes"] / 1e9)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: list[float], fmt: str = "{:.3g}") -> str:
    if not values:
        return "–"
    med = fmt.format(median(values))
    return med if len(values) < 2 else f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "–"


def single_table(runs: list[dict]) -> list[str]:
    lines = ["| workload | phase | highwater MB/s | Kafka MB/s | hw/Kafka | highwater broker "
             "s/GB | Kafka broker s/GB | hw/Kafka | client s/GB (hw / Kafka) | client cores "
             "(hw / Kafka) |", "|" + "---|" * 10]
    for size in SIZES:
        for acks in ACKS:
            for partitions in PARTITIONS:
                for phase in ("produce", "consume"):
                    pick = {b: [r[phase] for r in runs if r["broker"] == b and
                                r["size"] == size and r["acks"] == acks and
                                r["partitions"] == partitions] for b in BROKERS}
                    tput = {b: [mb_s(r) for r in pick[b]] for b in BROKERS}
                    cpu = {b: [per_gb(r, "broker_cpu_s") for r in pick[b]] for b in BROKERS}
                    client = {b: median([per_gb(r, "client_cpu_s") for r in pick[b]])
                              for b in BROKERS}
                    cores = {b: median([r["client_cpu_s"] / r["seconds"] for r in pick[b]])
                             for b in BROKERS}
                    name = f"{size} B, acks={acks}, {partitions} partition(s)"
                    lines.append(
                        f"| {name} | {phase} | {spread(tput['highwater'])} | "
                        f"{spread(tput['kafka'])} | "
                        f"{ratio(median(tput['highwater']), median(tput['kafka']))} | "
                        f"{spread(cpu['highwater'])} | {spread(cpu['kafka'])} | "
                        f"{ratio(median(cpu['highwater']), median(cpu['kafka']))} | "
                        f"{client['highwater']:.3g} / {client['kafka']:.3g} | "
                        f"{cores['highwater']:.2f} / {cores['kafka']:.2f} |")
    return lines


def cluster_tables(runs: list[dict]) -> list[str]:
    unthrottled = [r for r in runs if "linger" not in r]
    lines = ["| broker | RF | MB/s | brokers' CPU s/GB (summed) | RF=3/RF=1 CPU per GB |",
             "|---|---|---|---|---|"]
    for b in BROKERS:
        cpu = {rf: [per_gb(r["produce"], "broker_cpu_s") for r in unthrottled
                    if r["broker"] == b and r["rf"] == rf] for rf in (1, 3)}
        for rf in (1, 3):
            tput = [mb_s(r["produce"]) for r in unthrottled if r["broker"] == b and r["rf"] == rf]
            extra = ratio(median(cpu[3]), median(cpu[1])) if rf == 3 else ""
            lines.append(f"| {b} | {rf} | {spread(tput)} | {spread(cpu[rf])} | {extra} |")
    lines += ["", "| linger.ms | load | rate (rec/s) | highwater p50 / p99 / p99.9 / max µs | "
              "Kafka p50 / p99 / p99.9 / max µs | p99 hw/Kafka | p99.9 hw/Kafka |",
              "|---|---|---|---|---|---|---|"]
    latency = [r for r in runs if "linger" in r]
    for linger in LINGERS:
        for fraction in LATENCY_FRACTIONS:
            pick = {b: [r for r in latency if r["broker"] == b and r["linger"] == linger and
                        r["fraction"] == fraction] for b in BROKERS}
            q = {b: {k: median([r["produce"]["latency_us"][k] for r in pick[b]
                                if r["produce"].get("latency_us")])
                     for k in ("p50", "p99", "p99.9", "max")} for b in BROKERS}
            rates = [r["rate"] for r in pick["kafka"]]
            cell = {b: " / ".join(f"{q[b][k]:.0f}" for k in ("p50", "p99", "p99.9", "max"))
                    for b in BROKERS}
            lines.append(f"| {linger} | {fraction:.0%} | {spread(rates, '{:.0f}')} | "
                         f"{cell['highwater']} | {cell['kafka']} | "
                         f"{ratio(q['highwater']['p99'], q['kafka']['p99'])} | "
                         f"{ratio(q['highwater']['p99.9'], q['kafka']['p99.9'])} |")
    return lines


def markdown(results: dict) -> str:
    meta = results["meta"]
    return "\n".join([
        f"# Efficient-client benchmark, {meta['date']} (highwater {meta['highwater_commit']})",
        "", f"{meta['rounds']} rounds, medians (min–max); {meta['machine']['cpus']} cores "
        f"shared by the brokers and bench/loadgen (franz-go); {meta['duration_s']:.0f} s.",
        "", "## One node, RF=1", "", *single_table(results["single"]),
        "", "## Three nodes: RF=3 against RF=1, and latency without linger (RF=3, acks=all,"
        " 100 B, 6 partitions)", "", *cluster_tables(results["cluster"]), ""])


def main() -> int:
    args = standalone.quick_parser(__doc__, 3, "tiny workloads (a smoke run)").parse_args()
    return standalone.run("efficient", args, lambda ctx: run(ctx, args))


def run(ctx: Context, args: argparse.Namespace) -> int:
    build_loadgen(ctx.work)
    results: dict = {"single": [], "cluster": []}
    for round_no in range(args.rounds):
        order = BROKERS if round_no % 2 == 0 else BROKERS[::-1]
        ctx.log(f"round {round_no + 1}/{args.rounds}: one node, {' then '.join(order)}")
        for kind in order:
            results["single"] += single_node(ctx, kind, round_no, args.quick)
        # Kafka's cluster first: its RF=3 rate sets the fixed rates of both.
        ctx.log(f"round {round_no + 1}/{args.rounds}: three nodes")
        runs, kafka_rate = three_nodes(ctx, "kafka", round_no, None, args.quick)
        results["cluster"] += runs
        results["cluster"] += three_nodes(ctx, "highwater", round_no, kafka_rate,
                                          args.quick)[0]
    return standalone.publish(ctx, args, "efficient", results, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
