#!/usr/bin/env python3
"""Many partitions on three nodes, RF=3 (issue 16), side by side with Apache Kafka.

For 1,000 and 10,000 partitions (topics of 1,000 partitions each, RF=3), on a fresh
three-node cluster of each broker per count (bench/hwbench/clusters.py: three combined
broker+controller nodes):

1. creation: seconds from the first CreateTopics until every partition is led with an ISR
   of three (bench/loadgen);
2. idle: the three nodes' CPU summed (% of one core) over IDLE_S after SETTLE_S, and their
   anonymous memory (RssAnon) grown since before the topics, per partition replica;
3. Metadata for all topics from node 1: p50 / p99 of METADATA_REQUESTS requests;
4. with 10,000 partitions: a clean restart of node 3 (SIGTERM, then the same command)
   until every partition is back with an ISR of three.

Brokers alternate which goes first each round; medians of ROUNDS rounds. Writes
bench/results/<date>-partitions-cluster.md and .json and prints the table.
Usage: make bench-partitions-cluster, or python3 bench/partitions_cluster.py [--rounds N]
[--quick] [--out DIR] [--highwater-bin PATH].
"""

from __future__ import annotations

import time

from efficient import loadgen
from hwbench.clusters import CLUSTERS, Cluster
from hwbench.context import Context
from hwbench.processes import cpu_seconds, memory_kib, spawn, stop_all, write_live_file
from partitions import (COUNTS, IDLE_S, METADATA_REQUESTS, PER_TOPIC, SETTLE_S, STOP_GRACE_S,
                        main_of, metadata_rows, row, table_of)

RF = 3
RESTARTED = 2  # node 3, 0-based


def idle(pids: list[int], seconds: float) -> tuple[float, int]:
    """The nodes' CPU summed over `seconds` (% of one core) and their RssAnon summed."""
    before, began = [cpu_seconds(p) for p in pids], time.monotonic()
    time.sleep(seconds)
    cpu = sum(cpu_seconds(p) for p in pids) - sum(before)
    return 100.0 * cpu / (time.monotonic() - began), sum(
        memory_kib(p).get("RssAnon", 0) for p in pids)


def all_back(ctx: Context, cluster: Cluster, topics: list[str]) -> None:
    for topic in topics:
        loadgen(ctx, "ready", brokers=cluster.bootstrap, topic=topic, partitions=PER_TOPIC,
                rf=RF)


def restart_node(ctx: Context, cluster: Cluster, topics: list[str]) -> float:
    """Stops node 3 cleanly and starts its command again; seconds from the spawn until
    every partition of `topics` has an ISR of three."""
    node = cluster.nodes[RESTARTED]
    if node.proc is not None:
        stop_all([node.proc], STOP_GRACE_S)
    began = time.monotonic()
    node.proc = spawn(cluster.command(RESTARTED), node.stdout, node.stdout, node.dir,
                      cluster.env())
    write_live_file()
    all_back(ctx, cluster, topics)
    return time.monotonic() - began


def one_count(ctx: Context, kind: str, round_no: int, count: int, quick: bool) -> dict:
    session = ctx.work / f"{kind}-{count}-{round_no}"
    session.mkdir()
    cluster = CLUSTERS[kind](ctx, session)
    cluster.stop_grace_s = STOP_GRACE_S
    pids = cluster.start().pids
    out: dict = {"broker": kind, "round": round_no, "partitions": count}
    try:
        time.sleep(2.0)
        _, anon_before = idle(pids, 2.0)
        topics = [f"many-{i}" for i in range(count // PER_TOPIC)]
        began = time.monotonic()
        for topic in topics:
            loadgen(ctx, "create", brokers=cluster.bootstrap, topic=topic,
                    partitions=PER_TOPIC, rf=RF)
        out["create_s"] = time.monotonic() - began
        time.sleep(2.0 if quick else SETTLE_S)
        out["idle_cpu_pct"], anon = idle(pids, 2.0 if quick else IDLE_S)
        out["anon_kib_per_replica"] = (anon - anon_before) / (count * RF)
        out["metadata"] = loadgen(ctx, "metadata", brokers=cluster.bootstrap.split(",")[0],
                                  records=METADATA_REQUESTS)
        if count == COUNTS[-1]:
            out["restart_s"] = restart_node(ctx, cluster, topics)
        cluster.check_alive(f"{count} partitions")
        ctx.log(f"  {kind} {count} partitions RF=3: created in {out['create_s']:.1f} s, idle "
                f"{out['idle_cpu_pct']:.2f} % CPU (3 nodes), "
                f"{out['anon_kib_per_replica']:.1f} KiB anon per replica"
                + (f", node 3 back in every ISR in {out['restart_s']:.1f} s"
                   if "restart_s" in out else ""))
    finally:
        cluster.stop()
    return out


def table(runs: list[dict]) -> list[str]:
    return table_of(runs, ", RF=3", rows_at)


def rows_at(count: int, n: str, at: list[dict]) -> list[str]:
    lines = [
        row(f"{n}: create until all led, ISR of 3", "s", at, lambda r: r["create_s"]),
        row(f"{n}: idle CPU, three nodes summed", "% of a core", at,
            lambda r: r["idle_cpu_pct"]),
        row(f"{n}: anonymous memory per replica", "KiB", at,
            lambda r: r["anon_kib_per_replica"]),
        *metadata_rows(n, at),
    ]
    if count == COUNTS[-1]:
        lines.append(row(f"{n}: clean restart of a node until back in every ISR", "s", at,
                         lambda r: r["restart_s"]))
    return lines


def main() -> int:
    return main_of("partitions-cluster", __doc__, one_count, "Many partitions on three nodes",
                   "RF=3, three nodes of each broker", table)


if __name__ == "__main__":
    raise SystemExit(main())
