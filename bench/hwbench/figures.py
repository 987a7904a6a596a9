"""The figures of a run, computed from its sessions: the rows of the single-node tables
(Metric: per-session values of each broker, medians, highwater/Kafka ratio), issue 7's
goals, the rows of the RF=3 vs RF=1 table (Rf3Row: values by broker and replication
factor), and smoke mode's checks that every figure is there and plausible.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Callable

from .errors import BenchError
from .plans import Plan
from .records import ProducerRun, Results, Run, Session

BROKER_KINDS = ("highwater", "kafka")


def median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def ratio_of(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


@dataclasses.dataclass
class Metric:
    """One row of a single-node table: per-session values of each broker, and their medians."""

    key: str
    section: str
    label: str
    unit: str
    better: str  # "higher" or "lower"
    values: dict[str, list[float]]

    def median(self, broker: str) -> float | None:
        return median(self.values.get(broker))

    def ratio(self) -> float | None:
        return ratio_of(self.median("highwater"), self.median("kafka"))

    def as_json(self) -> dict:
        return {"key": self.key, "section": self.section, "label": self.label,
                "unit": self.unit, "better": self.better, "values": self.values,
                "median_highwater": self.median("highwater"),
                "median_kafka": self.median("kafka"), "ratio": self.ratio()}


def runs_of(s: Session, phase: str, **match) -> list[Run]:
    """The runs of `s`, if of `phase`, whose fields have the values of `match`."""
    if s.phase != phase:
        return []
    return [r for r in s.runs if all(getattr(r, k, None) == v for k, v in match.items())]


def one(s: Session, phase: str, field: str, **match) -> float | None:
    found = runs_of(s, phase, **match)
    return getattr(found[0], field) if found else None


def cpu_per_gb(s: Session, phase: str, tool: str = "ProducerPerformance",
               **match) -> float | None:
    found = runs_of(s, phase, tool=tool, **match)
    payload = sum(r.payload_bytes for r in found)
    return sum(r.broker_cpu_s for r in found) / (payload / 1e9) if found else None


def faults_per_mb(s: Session, phase: str) -> float | None:
    found = runs_of(s, phase, tool="ProducerPerformance")
    payload = sum(r.payload_bytes for r in found)
    return sum(r.broker_minflt for r in found) / (payload / 1e6) if found else None


def peak_anon_mib(s: Session) -> float | None:
    if s.phase != "throughput":
        return None
    return max(r.memory.broker_anon_kib for r in s.runs if getattr(r, "memory", None)
               and r.memory.broker_anon_kib is not None) / 1024


PERCENTILES = (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"))


class MetricRows:
    """The rows of the single-node tables, added one figure at a time in table order."""

    def __init__(self, sessions: list[Session]) -> None:
        self.sessions = sessions
        self.metrics: list[Metric] = []

    def add(self, key: str, section: str, label: str, unit: str, better: str,
            pick: Callable[[Session], float | None]) -> None:
        """A row of each session's `pick` (None: the session has no such figure), when any
        session has one."""
        values: dict[str, list[float]] = {broker: [] for broker in BROKER_KINDS}
        for s in self.sessions:
            value = pick(s)
            if value is not None:
                values[s.broker].append(value)
        if values["highwater"] or values["kafka"]:
            self.metrics.append(Metric(key, section, label, unit, better, values))


def add_broker_rows(rows: MetricRows, plan: Plan) -> None:
    settle = plan.settle_s
    rows.add("start_to_metadata_ms", "broker", "process start → first Metadata response", "ms",
             "lower", lambda s: s.started.start_to_metadata_ms)
    rows.add("exec_to_metadata_ms", "broker",
             "the same, from the return of the spawn (exec done)", "ms", "lower",
             lambda s: s.started.start_to_metadata_ms - s.started.spawn_ms)
    rows.add("idle_rss_mib", "broker", f"idle RSS ({settle:g} s after the first Metadata)",
             "MiB", "lower", lambda s: s.idle.idle_rss_kib / 1024)
    rows.add("idle_cpu_pct", "broker", f"CPU in those {settle:g} s", "% of a core", "lower",
             lambda s: s.idle.idle_cpu_pct)
    rows.add("peak_rss_mib", "broker", "peak RSS (VmHWM) of a throughput session", "MiB",
             "lower", lambda s: s.end_memory_kib["VmHWM"] / 1024
             if s.phase == "throughput" else None)
    rows.add("anon_rss_mib", "broker", "peak anonymous RSS (RssAnon after each run)",
             "MiB", "lower", peak_anon_mib)
    rows.add("cpu_s_per_gb", "broker", "CPU per GB produced, unthrottled (all workloads)",
             "s/GB", "lower", lambda s: cpu_per_gb(s, "throughput"))
    rows.add("minflt_per_mb", "broker",
             "minor page faults per MB produced, unthrottled", "faults/MB", "lower",
             lambda s: faults_per_mb(s, "throughput"))
    rows.add("cpu_s_per_gb_fixed", "broker",
             "CPU per GB produced at the fixed rates (same load)", "s/GB", "lower",
             lambda s: cpu_per_gb(s, "latency"))


def add_produce_rows(rows: MetricRows, plan: Plan, rates: dict[str, int]) -> None:
    """Unthrottled throughput and broker CPU, then the percentiles at the fixed rates."""
    for w in plan.workloads:
        rows.add(f"produce.{w.key}.mb_per_s", "produce", f"{w.label}: throughput", "MB/s",
                 "higher", lambda s, w=w: one(s, "throughput", "mb_per_s",
                                              tool="ProducerPerformance", workload=w.key))
    for w in plan.workloads:
        rows.add(f"produce.{w.key}.cpu_s_per_gb", "produce", f"{w.label}: broker CPU", "s/GB",
                 "lower", lambda s, w=w: cpu_per_gb(s, "throughput", workload=w.key))
    for w in plan.workloads:
        for field, name in PERCENTILES:
            rows.add(f"fixed.{w.key}.{field}", "fixed",
                     f"{w.label} at {rates[w.key]:,} rec/s: {name}", "ms", "lower",
                     lambda s, w=w, f=field: one(s, "latency", f, tool="ProducerPerformance",
                                                 workload=w.key))


def add_consume_rows(rows: MetricRows, plan: Plan) -> None:
    for w in plan.consumed_workloads():
        topic = w.topic("t")
        label = (f"{plan.stored_records(w):,} × {w.size_label}, "
                 f"{w.partitions} partition(s)")
        rows.add(f"consume.{w.size}B-p{w.partitions}.mb_per_s", "consume",
                 f"{label}: assign() consumer", "MB/s", "higher",
                 lambda s, t=topic: one(s, "throughput", "mb_per_s",
                                        tool="BenchTool consume (assign)", topic=t))
        rows.add(f"consume.{w.size}B-p{w.partitions}.reference_mb_per_s", "consume",
                 f"{label}: Kafka's ConsumerPerformance (group; fetch.MB.sec)", "MB/s",
                 "higher", lambda s, t=topic: one(s, "throughput", "fetch_mb_per_s",
                                                  tool="ConsumerPerformance", topic=t))


def add_transaction_rows(rows: MetricRows, plan: Plan) -> None:
    txn_tool = "ProducerPerformance (transactional)"
    for w in plan.transactional:
        rows.add(f"txn.{w.key}.mb_per_s", "txn", f"{w.label}: throughput", "MB/s", "higher",
                 lambda s, w=w: one(s, "throughput", "mb_per_s", tool=txn_tool,
                                    workload=w.key))
        rows.add(f"txn.{w.key}.cpu_s_per_gb", "txn", f"{w.label}: broker CPU", "s/GB",
                 "lower", lambda s, w=w: cpu_per_gb(s, "throughput", txn_tool, workload=w.key))
        rows.add(f"txn.{w.key}.read_committed_mb_per_s", "txn",
                 f"{w.label}: read_committed consumer", "MB/s", "higher",
                 lambda s, t=w.topic("x"): one(s, "throughput", "mb_per_s",
                                               tool="BenchTool consume (assign, read_committed)",
                                               topic=t))


def add_end_to_end_rows(rows: MetricRows, plan: Plan) -> None:
    for size, acks in plan.end_to_end:
        for field, name in PERCENTILES:
            rows.add(f"e2e.{size}B-acks{acks}.{field}", "e2e",
                     f"{size} B, acks={acks}, {plan.end_to_end_records:,} records: {name}",
                     "ms", "lower", lambda s, sz=size, a=acks, f=field: one(
                         s, "latency", f, tool="BenchTool end-to-end (assign)", size=sz,
                         acks=a))
            rows.add(f"e2e.{size}B-acks{acks}.reference.{field}", "e2e",
                     f"{size} B, acks={acks}: Kafka's EndToEndLatency {name} (whole ms)", "ms",
                     "lower", lambda s, sz=size, a=acks, f=field: one(
                         s, "latency", f, tool="EndToEndLatency", size=sz, acks=a))


def collect(sessions: list[Session], plan: Plan, rates: dict[str, int]) -> list[Metric]:
    """The rows of the single-node tables, in table order."""
    rows = MetricRows(sessions)
    add_broker_rows(rows, plan)
    add_produce_rows(rows, plan, rates)
    add_consume_rows(rows, plan)
    add_transaction_rows(rows, plan)
    add_end_to_end_rows(rows, plan)
    return rows.metrics


def geomean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


@dataclasses.dataclass
class Goal:
    """One of issue 7's goals against a run's medians."""

    goal: str
    target: str
    measured: float | None
    unit: str  # "ratio" (highwater/Kafka), else the unit of a highwater median
    met: bool | None


def goals(metrics: list[Metric]) -> list[Goal]:
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
    return [Goal(name, target, value, unit, None if value is None else bool(test(value)))
            for name, target, value, test, unit in rows]


# --- RF=3 vs RF=1 --------------------------------------------------------------------------

@dataclasses.dataclass
class Rf3Row:
    """One row of the RF=3 vs RF=1 table: per-session values by (broker, rf)."""

    key: str
    label: str
    unit: str
    better: str
    values: dict[str, dict[str, list[float]]]  # broker -> "rf1"/"rf3" -> values

    def median(self, broker: str, rf: int) -> float | None:
        return median(self.values.get(broker, {}).get(f"rf{rf}"))

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


def rf3_rates(sessions: list[Session]) -> list[int]:
    """The fixed rate of each round, in order."""
    rates: dict[int, int] = {}
    for s in sessions:
        for run in s.runs:
            if run.kind == "fixed":
                rates.setdefault(s.round, run.target_rate)
    return [rates[r] for r in sorted(rates)]


def rf3_rate_label(sessions: list[Session]) -> str:
    """"50,000" when every round ran at one rate, else "29,104–30,511"."""
    rates = rf3_rates(sessions) or [0]
    if min(rates) == max(rates):
        return f"{rates[0]:,}"
    return f"{min(rates):,}–{max(rates):,}"


def collect_rf3(sessions: list[Session], plan: Plan) -> list[Rf3Row]:
    rows: list[Rf3Row] = []

    def add(key: str, label: str, unit: str, better: str, kind: str,
            pick: Callable[[ProducerRun], float]) -> None:
        values: dict[str, dict[str, list[float]]] = {}
        for s in sessions:
            for run in s.runs:
                if run.kind == kind:
                    values.setdefault(s.broker, {"rf1": [], "rf3": []})[
                        f"rf{run.rf}"].append(pick(run))
        if values:
            rows.append(Rf3Row(key, label, unit, better, values))

    add("rf3.unthrottled.mb_per_s", f"unthrottled, {plan.rf3_records:,} records: throughput",
        "MB/s", "higher", "unthrottled", lambda r: r.mb_per_s)
    add("rf3.unthrottled.p99_ms", "unthrottled: p99 (queueing in the producer)", "ms",
        "lower", "unthrottled", lambda r: r.p99_ms)
    add("rf3.unthrottled.cpu_s_per_gb", "unthrottled: CPU of the 3 brokers per GB", "s/GB",
        "lower", "unthrottled", lambda r: r.cpu_s_per_gb)
    at = f"at {rf3_rate_label(sessions)} rec/s"
    for field, name in PERCENTILES:
        add(f"rf3.fixed.{field}", f"{at}: {name}", "ms", "lower",
            "fixed", lambda r, f=field: getattr(r, f))
    add("rf3.fixed.records_per_s", f"{at}: rate achieved", "rec/s",
        "higher", "fixed", lambda r: r.records_per_s)
    add("rf3.fixed.cpu_s_per_gb", f"{at}: CPU of the 3 brokers per GB",
        "s/GB", "lower", "fixed", lambda r: r.cpu_s_per_gb)
    starts: dict[str, dict[str, list[float]]] = {}
    for s in sessions:
        starts.setdefault(s.broker, {"rf1": [], "rf3": []})["rf3"].append(
            s.cluster_started.start_to_ready_ms / 1e3)
    if starts:
        rows.append(Rf3Row("rf3.cluster_ready_s",
                           "cluster start → all 3 brokers in Metadata (per cluster)", "s",
                           "lower", starts))
    return rows


@dataclasses.dataclass
class Tables:
    """Every row the report shows, computed from a run's sessions."""

    metrics: list[Metric]  # the single-node tables
    goals: list[Goal]
    rf3_rows: list[Rf3Row]


def tables(results: Results, plan: Plan) -> Tables:
    single = "single" in plan.sections
    metrics = collect(results.sessions, plan, results.fixed_rates) if single else []
    return Tables(metrics, goals(metrics) if single else [],
                  collect_rf3(results.rf3_sessions, plan))


# --- smoke mode's checks -------------------------------------------------------------------

def implausible(values: list[float], unit: str, better: str) -> str | None:
    """Why a figure's values are not plausible, or None: each must be finite and ≥ 0,
    and above 0 where higher is better (but a latency may be 0 ms)."""
    if any(not math.isfinite(v) or v < 0 for v in values):
        return "not a finite figure ≥ 0"
    if unit != "ms" and better == "higher" and min(values) <= 0:
        return "is zero"
    return None


def check_smoke(metrics: list[Metric]) -> None:
    """Smoke mode: every figure is there for both brokers and is plausible."""
    problems = []
    for m in metrics:
        for broker in BROKER_KINDS:
            values = m.values.get(broker) or []
            why = "no value" if not values else implausible(values, m.unit, m.better)
            if why:
                problems.append(f"{m.key}: {broker} {values} {why}")
    if problems:
        raise BenchError("smoke: implausible figures:\n  " + "\n  ".join(problems))


def check_smoke_rf3(rows: list[Rf3Row], plan: Plan) -> None:
    """Smoke mode: every RF=3 figure is there for both RFs of every broker that ran."""
    problems = []
    for row in rows:
        for broker in plan.rf3_brokers:
            for rf in ((3,) if row.key == "rf3.cluster_ready_s" else (1, 3)):
                values = row.values.get(broker, {}).get(f"rf{rf}") or []
                why = (f"{len(values)} values, expected {plan.rf3_rounds}"
                       if len(values) != plan.rf3_rounds
                       else implausible(values, row.unit, row.better))
                if why:
                    problems.append(f"{row.key}: {broker} RF={rf} {values} {why}")
    if not rows:
        problems.append("no RF=3 figures at all")
    if problems:
        raise BenchError("smoke: implausible RF=3 figures:\n  " + "\n  ".join(problems))
