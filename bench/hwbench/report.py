"""The output of a run: bench/results/<stem>.md (tables of medians, min–max and ratios, the
goals), <stem>.json (every figure of every session and run, the settings, machine and
versions, and the tables' rows), <stem>.png (the highwater/Kafka ratios), and the copy of
the latest table in bench/README.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import statistics
import sys
from pathlib import Path

from .context import BENCH, KAFKA_VERSION
from .errors import BenchError
from .figures import Goal, Metric, Rf3Row, Tables, check_smoke, check_smoke_rf3, rf3_rates, tables
from .plans import RF3_WORKLOAD, TXN_DURATION_MS, Plan
from .records import Results, to_json

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
SHORT_SECTIONS = {"broker": "broker", "produce": "produce", "fixed": "fixed rate",
                  "consume": "consume", "e2e": "end to end", "txn": "transactions"}
CHART_LIMIT_LOG2 = 6  # bars stop at 1/64x and 64x; the label keeps the real ratio

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


def cell(values: list[float] | None) -> str:
    """"median (min–max)" of a figure's values over the sessions; one value as it is."""
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


def plain_ratio(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}×"


def rf3_rate_description(results: Results, plan: Plan) -> str:
    rates = ", ".join(f"{r:,}" for r in rf3_rates(results.rf3_sessions))
    if plan.rf3_rate:
        return f"{plan.rf3_rate:,} records/s"
    return ("half of the median of Kafka's RF=3 unthrottled rates measured up to the round "
            f"(records/s by round: {rates})")


def rf3_notes(results: Results, plan: Plan, brokers: list[str]) -> list[str]:
    """What the RF=3 section ran, before its table."""
    partitions = RF3_WORKLOAD.partitions
    return [
        f"- Per broker kind, a cluster of three combined broker+controller nodes on this one "
        f"machine, started fresh for each of {plan.rf3_rounds} round(s)"
        + (" (Kafka, then highwater)" if len(brokers) == 2 else
           f" ({brokers[0]} only)") + "; an RF=3 and an RF=1 topic "
        f"({partitions} partitions, leaders spread over the three) on the same "
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
    ]


def rf3_table(rows: list[Rf3Row], brokers: list[str]) -> list[str]:
    """Per broker: RF=1, RF=3 and their ratio; with both brokers, hw/Kafka at RF=3."""
    head = "| metric | unit |"
    rule = "|---|---|"
    for b in brokers:
        name = "highwater" if b == "highwater" else "Kafka"
        head += f" {name} RF=1 | {name} RF=3 | {name} RF=3/RF=1 |"
        rule += "---|---|---|"
    if len(brokers) == 2:
        head += " hw/Kafka at RF=3 |"
        rule += "---|"
    lines = [head, rule]
    for row in rows:
        line = f"| {row.label} | {row.unit} |"
        for b in brokers:
            by_rf = row.values.get(b, {})
            line += (f" {cell(by_rf.get('rf1'))} | {cell(by_rf.get('rf3'))} | "
                     f"{plain_ratio(row.rf_ratio(b))} |")
        if len(brokers) == 2:
            line += f" {plain_ratio(row.broker_ratio())} |"
        lines.append(line)
    return lines


def rf3_markdown(results: Results, plan: Plan, rows: list[Rf3Row]) -> list[str]:
    """The "RF=3 vs RF=1" section (its own H2, so that the README copy demotes it too)."""
    if not rows:
        return []
    brokers = [b for b in ("highwater", "kafka") if b in plan.rf3_brokers]
    return ["", "## RF=3 vs RF=1 (three local brokers, ProducerPerformance, 100 B, acks=all, "
            f"{RF3_WORKLOAD.partitions} partitions)", "",
            *rf3_notes(results, plan, brokers), "", *rf3_table(rows, brokers)]


def goal_lines(goals: list[Goal]) -> list[str]:
    lines = ["", "## Goals (issue 7)", "", "| goal | target | measured | met |",
             "|---|---|---|---|"]
    for g in goals:
        measured = "—" if g.measured is None else (
            f"{g.measured:.2f}×" if g.unit == "ratio" else f"{fmt(g.measured)} {g.unit}")
        met = "—" if g.met is None else ("yes" if g.met else "no")
        lines.append(f"| {g.goal} | {g.target} | {measured} | {met} |")
    return lines


def markdown(results: Results, t: Tables, plan: Plan) -> str:
    meta = results.meta
    single = "single" in plan.sections
    if single:
        scope = (f"- {meta.rounds} round(s) per phase, brokers alternating (highwater "
                 f"first), each freshly started on an empty data dir under "
                 f"{meta.work_dir_fs}; suite took {meta.duration_s / 60:.1f} min")
    else:
        scope = (f"- Only the RF=3 section (bench/run.sh rf3): {plan.rf3_rounds} round(s), "
                 f"data dirs under {meta.work_dir_fs}; took "
                 f"{meta.duration_s / 60:.1f} min")
    lines = [
        f"# highwater vs Apache Kafka {KAFKA_VERSION}: {meta.date} ({meta.mode})",
        "",
        f"- highwater {meta.highwater_commit}{' (dirty tree)' if meta.dirty else ''},"
        f" binary sha256 {meta.highwater_sha256[:12]}; Apache Kafka {KAFKA_VERSION} "
        f"(Maven Central jars), Java {meta.java}",
        f"- {meta.machine['cpus']} CPUs ({meta.machine['cpu_model']}), "
        f"{meta.machine['mem_gib']:.0f} GiB, {meta.machine['kernel']}; load average "
        f"{meta.loadavg_start} at the start, {meta.loadavg_end} at the end",
        scope,
        "- Cells: median (min–max) over the sessions; the ratio is highwater's median over "
        "Kafka's; ✓ = better for highwater, ✗ = worse (within 5 %: no mark).",
    ]
    if not single:
        lines += rf3_markdown(results, plan, t.rf3_rows)
        return "\n".join(lines) + "\n"
    lines += [
        "- The single-node tables run one broker per session; on one node acks=all is the "
        "same as acks=1. Replication is measured in the RF=3 vs RF=1 table (three nodes)"
        + ("." if "rf3" in plan.sections else ", not part of this run."),
    ]
    lines += [f"- {note}" for note in results.notes]
    lines += goal_lines(t.goals)
    for section, title in SECTIONS.items():
        rows = [m for m in t.metrics if m.section == section]
        if not rows:
            continue
        lines += ["", f"## {title}", "", "| metric | unit | highwater | Kafka | hw/Kafka |",
                  "|---|---|---|---|---|"]
        lines += [f"| {m.label} | {m.unit} | {cell(m.values.get('highwater'))} | "
                  f"{cell(m.values.get('kafka'))} | {ratio_cell(m)} |" for m in rows]
    lines += rf3_markdown(results, plan, t.rf3_rows)
    return "\n".join(lines) + "\n"


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


README_BEGIN, README_END = "<!-- bench:latest:begin -->", "<!-- bench:latest:end -->"


def readme_with_latest(text: str, table: str, stem: str) -> str | None:
    """`text` (bench/README.md) with the block between its bench:latest markers replaced by
    `table` (its H2s demoted to H4s, without its H1); None without the markers."""
    if README_BEGIN not in text or README_END not in text:
        return None
    body = table.split("\n", 1)[1].strip()  # without the H1
    body = body.replace("\n## ", "\n#### ")
    block = (f"{README_BEGIN}\nFrom [`results/{stem}.md`](results/{stem}.md) (raw figures: "
             f"[`{stem}.json`](results/{stem}.json), chart: [`{stem}.png`](results/{stem}.png))."
             f"\n\n![highwater/Kafka ratios](results/{stem}.png)\n\n{body}\n{README_END}")
    head, rest = text.split(README_BEGIN, 1)
    return head + block + rest.split(README_END, 1)[1]


def update_readme(table: str, stem: str) -> None:
    """Replaces the block between the bench:latest markers in bench/README.md."""
    readme = BENCH / "README.md"
    text = readme_with_latest(readme.read_text() if readme.exists() else "", table, stem)
    if text is None:
        print("bench: bench/README.md has no bench:latest markers; not updated",
              file=sys.stderr)
        return
    readme.write_text(text)


def results_json(results: Results, t: Tables) -> dict:
    """The .json: what was measured, with the rows of the tables computed from it."""
    return {"meta": to_json(results.meta), "fixed_rates": results.fixed_rates,
            "notes": results.notes, "goals": [dataclasses.asdict(g) for g in t.goals],
            "metrics": [m.as_json() for m in t.metrics], "sessions": to_json(results.sessions),
            "rf3_metrics": [row.as_json() for row in t.rf3_rows],
            "rf3_sessions": to_json(results.rf3_sessions)}


def write_outputs(out_dir: Path, results: Results, plan: Plan, stem: str | None = None) -> Path:
    """Computes the tables from the sessions and writes <stem>.md, .json and .png (the
    chart only with the single-node tables); returns the .md's path. Smoke mode: raises
    BenchError when a figure is missing or implausible."""
    t = tables(results, plan)
    if plan.mode == "smoke":
        check_smoke(t.metrics)
        check_smoke_rf3(t.rf3_rows, plan)
    out_dir.mkdir(parents=True, exist_ok=True)
    if stem is None:
        mode = results.meta.mode
        stem = results.meta.date + ("" if mode in ("full", "smoke") else f"-{mode}")
        if (out_dir / f"{stem}.md").exists():
            stem = f"{stem}-{dt.datetime.now().strftime('%H%M%S')}"
    results.meta.stem = stem
    (out_dir / f"{stem}.md").write_text(markdown(results, t, plan))
    data = results_json(results, t)
    (out_dir / f"{stem}.json").write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    if "single" not in plan.sections:
        return out_dir / f"{stem}.md"
    png = out_dir / f"{stem}.png"
    chart(t.metrics, png, f"highwater / Apache Kafka {KAFKA_VERSION}, {stem} "
                        f"({results.meta.mode}, medians of {plan.rounds} round(s))")
    if png.stat().st_size < 1000:
        raise BenchError(f"{png} is suspiciously small")
    return out_dir / f"{stem}.md"
