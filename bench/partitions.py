#!/usr/bin/env python3
"""Many partitions on one node (issue 16), side by side with Apache Kafka.

For 1,000 and 10,000 partitions (topics of 1,000 partitions each, RF=1), on a fresh single
node of each broker per count:

1. creation: seconds from the first CreateTopics to every partition led (bench/loadgen);
2. idle: CPU (% of one core) over IDLE_S after SETTLE_S, and the anonymous memory
   (RssAnon) grown since before the topics were created, per partition;
3. Metadata for all topics: p50 / p99 of METADATA_REQUESTS requests, one at a time;
4. with 1,000 partitions: produce 100 B records with 100,000 keys spread over all of them
   (acks=1), and the seconds until a new consumer group of 10 members is assigned all;
5. with 10,000 partitions: a clean restart (SIGTERM, then the same command) until every
   partition is led again.

Brokers alternate which goes first each round; medians of ROUNDS rounds. Writes
bench/results/<date>-partitions.md and .json and prints the table.
Usage: make bench-partitions, or python3 bench/partitions.py [--rounds N] [--quick]
[--out DIR] [--highwater-bin PATH].
"""

from __future__ import annotations

import time
from collections.abc import Callable

from efficient import BROKERS, build_loadgen, loadgen, mb_s, measured, median, spread
from hwbench.brokers import Broker, Highwater, Kafka
from hwbench import standalone
from hwbench.context import Context
from hwbench.processes import idle_figures, spawn, write_live_file

COUNTS = (1_000, 10_000)
PER_TOPIC = 1_000
SETTLE_S = 10.0
IDLE_S = 20.0
METADATA_REQUESTS = 20
KEYED_BYTES = 200_000_000
KEYS = 100_000
MEMBERS = 10
# Kafka's clean shutdown of 10,000 partitions takes a while; a SIGKILL would make its
# restart recover logs, which is not what this measures.
STOP_GRACE_S = 300.0


def restart(broker: Broker, ctx: Context, topics: list[str]) -> float:
    """Stops the broker cleanly and starts the same command again; seconds from the spawn
    until every partition of `topics` is led."""
    broker.stop()
    node = broker.nodes[0]
    began = time.monotonic()
    node.proc = spawn(broker.command(), node.stdout, node.stdout, broker.dir, broker.env())
    write_live_file()
    for topic in topics:
        loadgen(ctx, "ready", brokers=broker.bootstrap, topic=topic, partitions=PER_TOPIC,
                rf=1)
    return time.monotonic() - began


def one_count(ctx: Context, kind: str, round_no: int, count: int, quick: bool) -> dict:
    session = ctx.work / f"{kind}-{count}-{round_no}"
    session.mkdir()
    broker = Kafka(ctx, session) if kind == "kafka" else Highwater(ctx, session)
    broker.stop_grace_s = STOP_GRACE_S
    broker.start()
    pid = broker.nodes[0].proc.pid
    out: dict = {"broker": kind, "round": round_no, "partitions": count}
    try:
        time.sleep(2.0)
        before = idle_figures(pid, 2.0)
        topics = [f"many-{i}" for i in range(count // PER_TOPIC)]
        began = time.monotonic()
        for topic in topics:
            loadgen(ctx, "create", brokers=broker.bootstrap, topic=topic,
                    partitions=PER_TOPIC, rf=1)
        out["create_s"] = time.monotonic() - began
        time.sleep(2.0 if quick else SETTLE_S)
        idle = idle_figures(pid, 2.0 if quick else IDLE_S)
        out["idle_cpu_pct"] = idle.idle_cpu_pct
        out["anon_kib_per_partition"] = (idle.idle_anon_kib - before.idle_anon_kib) / count
        out["rss_kib_per_partition"] = (idle.idle_rss_kib - before.idle_rss_kib) / count
        out["metadata"] = loadgen(ctx, "metadata", brokers=broker.bootstrap,
                                  records=METADATA_REQUESTS)
        if count == COUNTS[0]:
            keyed = [f"keyed-{count}"]
            loadgen(ctx, "create", brokers=broker.bootstrap, topic=keyed[0],
                    partitions=count, rf=1)
            out["keyed_produce"] = measured(
                ctx, [pid], "produce", brokers=broker.bootstrap, topic=keyed[0], size=100,
                records=(KEYED_BYTES // 20 if quick else KEYED_BYTES) // 100, acks="1",
                keys=KEYS)
            out["group_s"] = loadgen(ctx, "group", brokers=broker.bootstrap, topic=keyed[0],
                                     partitions=count, members=MEMBERS)["seconds"]
        else:
            out["restart_s"] = restart(broker, ctx, topics)
        broker.check_alive(f"{count} partitions")
        ctx.log(f"  {kind} {count} partitions: created in {out['create_s']:.1f} s, idle "
                f"{out['idle_cpu_pct']:.2f} % CPU, {out['anon_kib_per_partition']:.1f} KiB "
                f"anon per partition, metadata p50 {out['metadata']['latency_us']['p50']} µs")
    finally:
        broker.stop()
    return out


def row(name: str, unit: str, runs: list[dict], pick) -> str:
    values = {b: [v for r in runs if r["broker"] == b and (v := pick(r)) is not None]
              for b in BROKERS}
    hw, kafka = median(values["highwater"]), median(values["kafka"])
    ratio = f"{hw / kafka:.2f}×" if kafka else "–"
    return (f"| {name} | {unit} | {spread(values['highwater'])} | {spread(values['kafka'])} "
            f"| {ratio} |")


def table_of(runs: list[dict], suffix: str,
             rows_at: Callable[[int, str, list[dict]], list[str]]) -> list[str]:
    """The table header, then rows_at(count, label, runs of that count) for each count."""
    lines = ["| figure | unit | highwater | Kafka | hw/Kafka |", "|---|---|---|---|---|"]
    for count in COUNTS:
        lines += rows_at(count, f"{count:,} partitions{suffix}",
                         [r for r in runs if r["partitions"] == count])
    return lines


def table(runs: list[dict]) -> list[str]:
    return table_of(runs, "", rows_at)


def metadata_rows(n: str, at: list[dict]) -> list[str]:
    return [row(f"{n}: Metadata, all topics, {q}", "ms", at,
                lambda r, q=q: r["metadata"]["latency_us"][q] / 1e3) for q in ("p50", "p99")]


def rows_at(count: int, n: str, at: list[dict]) -> list[str]:
    lines = [
        row(f"{n}: create until all led", "s", at, lambda r: r["create_s"]),
        row(f"{n}: idle CPU", "% of a core", at, lambda r: r["idle_cpu_pct"]),
        row(f"{n}: anonymous memory per partition", "KiB", at,
            lambda r: r["anon_kib_per_partition"]),
        row(f"{n}: RSS per partition", "KiB", at, lambda r: r["rss_kib_per_partition"]),
        *metadata_rows(n, at),
    ]
    if count == COUNTS[0]:
        lines += [
            row(f"{n}: produce, 100 B, {KEYS:,} keys, acks=1", "MB/s", at,
                lambda r: mb_s(r["keyed_produce"])),
            row(f"{n}: broker CPU per GB of that", "s/GB", at,
                lambda r: r["keyed_produce"]["broker_cpu_s"]
                / (r["keyed_produce"]["bytes"] / 1e9)),
            row(f"{n}: group of {MEMBERS} assigned all", "s", at, lambda r: r["group_s"]),
        ]
    else:
        lines.append(row(f"{n}: clean restart until all led", "s", at,
                         lambda r: r["restart_s"]))
    return lines


def main() -> int:
    return main_of("partitions", __doc__, one_count, "Many partitions on one node", "RF=1",
                   table)


# One session: (ctx, broker kind, round, partition count, quick) -> its figures.
OneCount = Callable[[Context, str, int, int, bool], dict]


def main_of(name: str, doc: str | None, one_count: OneCount, title: str, setting: str,
            table: Callable[[list[dict]], list[str]]) -> int:
    """The command line and rounds of this script and of partitions_cluster.py: every
    count of COUNTS per broker per round, then the table, written as results/DATE-NAME."""
    args = standalone.quick_parser(doc, 3, "short waits (a smoke run)").parse_args()

    def run(ctx: Context) -> int:
        build_loadgen(ctx.work)
        runs = []
        for round_no in range(args.rounds):
            order = BROKERS if round_no % 2 == 0 else BROKERS[::-1]
            ctx.log(f"round {round_no + 1}/{args.rounds}: {' then '.join(order)}")
            for count in COUNTS:
                for kind in order:
                    runs.append(one_count(ctx, kind, round_no, count, args.quick))
        def markdown(results: dict) -> str:
            meta = results["meta"]
            return "\n".join([
                f"# {title}, {meta['date']} (highwater {meta['highwater_commit']})", "",
                f"{args.rounds} rounds, medians (min–max), {setting}, topics of "
                f"{PER_TOPIC:,} partitions; {meta['machine']['cpus']} cores; "
                f"{meta['duration_s']:.0f} s.", "", *table(results["runs"]), ""])

        return standalone.publish(ctx, args, name, {"runs": runs}, markdown)

    return standalone.run(name, args, run)


if __name__ == "__main__":
    raise SystemExit(main())
