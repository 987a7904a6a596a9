"""The pipeline of a run: rounds of sessions, each a broker of one kind started fresh on an
empty data dir (one node, or a cluster of three), the runs of its phase made against it,
then stopped. The brokers alternate within a round so that both see the same drift in
machine load. One runner (run_rounds, run_session) serves the three phases:

- throughput (one node): broker warm-up, ProducerPerformance unthrottled per workload,
  everything read back, the transactional runs;
- latency (one node): ProducerPerformance at a fixed rate per workload (half of Kafka's
  median unthrottled rate of the throughput phase), then end-to-end latency;
- rf3 (three nodes): the same unthrottled and fixed-rate produce runs, to an RF=1 and an
  RF=3 topic of the cluster: the replication factor is a parameter of the produce runs.
"""

from __future__ import annotations

import shutil
import statistics
import time
from typing import Callable

from .brokers import BROKERS, Broker, Target
from .clusters import CLUSTER_NODES, CLUSTERS
from .context import Context
from .errors import BenchError
from .plans import RF3_WORKLOAD, Plan, Workload
from .processes import idle_figures, memory_kib
from .records import ProducerRun, Run, Session
from .tools import (consume, consumer_performance_reference, create_topics, end_to_end,
                    end_to_end_reference, producer_performance)

SINGLE_NODE_ORDER = ("highwater", "kafka")
WARMUP = Workload(100, "1", 6)

# Makes the runs of a session against its target (appending them to session.runs); gets
# the sessions of its phase made before this one.
Measure = Callable[[Context, Target, Session, list[Session]], None]


def run_rounds(ctx: Context, phase: str, nodes: int, kinds: tuple[str, ...], rounds: int,
               measure: Measure) -> list[Session]:
    """`rounds` rounds of a session per broker kind, in the order of `kinds`."""
    sessions: list[Session] = []
    for round_no in range(1, rounds + 1):
        for kind in kinds:
            sessions.append(run_session(ctx, kind, phase, nodes, round_no, measure, sessions))
    return sessions


def run_session(ctx: Context, kind: str, phase: str, nodes: int, round_no: int,
                measure: Measure, earlier: list[Session]) -> Session:
    """A fresh target of `kind` (one node or three) in a directory of its own, `measure`'s
    runs against it, then stopped; the directory is removed unless --keep."""
    session = Session(broker=kind, phase=phase, round=round_no)
    session_dir = ctx.work / f"{phase}-r{round_no}-{kind}"
    session_dir.mkdir()
    target = (BROKERS if nodes == 1 else CLUSTERS)[kind](ctx, session_dir)
    began = time.monotonic()
    ctx.log(f"{phase} round {round_no}: {kind}" + ("" if nodes == 1 else ", three nodes"))
    try:
        start(ctx, target, session)
        measure(ctx, target, session, earlier)
        target.check_alive("the session")
        if isinstance(target, Broker):
            mem = memory_kib(target.pid())
            session.end_memory_kib = {k: mem[k] for k in
                                      ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem")
                                      if k in mem}
    finally:
        target.stop()
    session.wall_s = time.monotonic() - began
    if not ctx.keep:
        shutil.rmtree(session_dir, ignore_errors=True)
    return session


def start(ctx: Context, target: Target, session: Session) -> None:
    """Starts the target; a single broker's start-up and idle figures, a cluster's time
    until every node lists all three brokers."""
    if isinstance(target, Broker):
        session.started = target.start()
        ctx.log(f"  {session.broker} answered Metadata "
                f"{session.started.start_to_metadata_ms:.1f} ms after its start")
        session.idle = idle_figures(target.pid(), ctx.plan.settle_s)
    else:
        session.cluster_started = target.start()
        ctx.log(f"  {session.broker}: all three brokers in Metadata "
                f"{session.cluster_started.start_to_ready_ms / 1e3:.1f} s after the start")


# --- produce runs, on one node or three ----------------------------------------------------

def unthrottled(ctx: Context, target: Target, topic: str, w: Workload, records: int,
                rf: int | None = None, transactional: bool = False) -> ProducerRun:
    """ProducerPerformance --throughput -1 after a warm-up of plan.warmup_fraction of the
    records. rf: the topic's replication factor, recorded on three-node runs."""
    run = producer_performance(ctx, target, topic, w, records, -1,
                               int(records * ctx.plan.warmup_fraction), transactional)
    if rf is not None:
        run.rf, run.kind = rf, "unthrottled"
    return run


def at_fixed_rate(ctx: Context, target: Target, topic: str, w: Workload, rate: int,
                  seconds: float, rf: int | None = None) -> ProducerRun:
    """ProducerPerformance --throughput rate for `seconds`, after plan.warmup_seconds at the
    same rate. rf: as for unthrottled."""
    run = producer_performance(ctx, target, topic, w, max(1, int(rate * seconds)), rate,
                               int(rate * ctx.plan.warmup_seconds))
    if rf is not None:
        run.rf, run.kind = rf, "fixed"
    run.target_rate = rate
    ctx.log(f"  {target.name} {w.label if rf is None else f'RF={rf}'} at {rate} rec/s: "
            f"p50/p99/p99.9 {run.p50_ms}/{run.p99_ms}/{run.p999_ms} ms")
    return run


def half_of_kafkas_median(sessions: list[Session], measured: Callable[[ProducerRun], bool],
                          what: str) -> int:
    """Half of the median records/s of Kafka's `measured` runs in `sessions`."""
    rates = [r.records_per_s for s in sessions if s.broker == "kafka" for r in s.runs
             if isinstance(r, ProducerRun) and measured(r)]
    if not rates:
        raise BenchError(f"no Kafka {what} to derive a fixed rate from")
    return max(1, int(statistics.median(rates) / 2))


# --- the single-node phases ----------------------------------------------------------------

def warmup_topics(plan: Plan) -> list[tuple[str, int]]:
    return [(WARMUP.topic("warmup"), WARMUP.partitions)] if plan.broker_warmup_records else []


def warm_up_broker(ctx: Context, target: Target) -> list[Run]:
    """Produces plan.broker_warmup_records unthrottled and reads them back, so that the
    figures come from a warm broker (for Kafka: its JIT); not counted in any figure."""
    records = ctx.plan.broker_warmup_records
    if records == 0:
        return []
    topic = WARMUP.topic("warmup")
    run = producer_performance(ctx, target, topic, WARMUP, records, -1, 0)
    run.tool, run.workload = "ProducerPerformance (broker warm-up)", "broker warm-up"
    read = consume(ctx, target, topic, records)
    read.tool = "BenchTool consume (broker warm-up)"
    ctx.log(f"  {target.name} warmed up: {run.mb_per_s:.1f} MB/s produced, "
            f"{read.mb_per_s:.1f} MB/s consumed")
    return [run, read]


def throughput(ctx: Context, target: Target, session: Session, _earlier: list[Session]) -> None:
    plan, runs = ctx.plan, session.runs
    create_topics(ctx, target, [(w.topic("t"), w.partitions) for w in plan.workloads]
                  + [(w.topic("x"), w.partitions) for w in plan.transactional]
                  + warmup_topics(plan))
    runs += warm_up_broker(ctx, target)
    for w in plan.workloads:
        runs.append(unthrottled(ctx, target, w.topic("t"), w, plan.unthrottled_records[w.size]))
        ctx.log(f"  {target.name} {w.label}: {runs[-1].mb_per_s:.1f} MB/s, "
                f"broker CPU {runs[-1].broker_cpu_s:.2f} s")
    for w in plan.consumed_workloads():
        records = plan.stored_records(w)
        runs.append(consume(ctx, target, w.topic("t"), records))
        ctx.log(f"  {target.name} consume {w.topic('t')}: {runs[-1].mb_per_s:.1f} MB/s")
        if plan.kafka_references:
            runs.append(consumer_performance_reference(ctx, target, w.topic("t"), records))
    for w in plan.transactional:
        runs.append(unthrottled(ctx, target, w.topic("x"), w, plan.unthrottled_records[w.size],
                                transactional=True))
        ctx.log(f"  {target.name} transactional {w.label}: {runs[-1].mb_per_s:.1f} MB/s, "
                f"broker CPU {runs[-1].broker_cpu_s:.2f} s")
        runs.append(consume(ctx, target, w.topic("x"), plan.stored_records(w),
                            "read_committed"))
        ctx.log(f"  {target.name} read_committed {w.topic('x')}: "
                f"{runs[-1].mb_per_s:.1f} MB/s")


def e2e_topic(size: int, acks: str, reference: bool = False) -> str:
    return f"bench-e2e{'-ref' if reference else ''}-{size}B-acks{acks}"


def latency(rates: dict[str, int]) -> Measure:
    """The latency phase at `rates` (records/s by Workload.key)."""

    def measure(ctx: Context, target: Target, session: Session, _earlier: list[Session]) -> None:
        plan, runs = ctx.plan, session.runs
        topics = [(w.topic("l"), w.partitions) for w in plan.workloads]
        topics += [(e2e_topic(size, acks), 1) for size, acks in plan.end_to_end]
        if plan.kafka_references:
            topics += [(e2e_topic(size, acks, True), 1) for size, acks in plan.end_to_end]
        create_topics(ctx, target, topics + warmup_topics(plan))
        runs += warm_up_broker(ctx, target)
        for w in plan.workloads:
            runs.append(at_fixed_rate(ctx, target, w.topic("l"), w, rates[w.key],
                                      plan.fixed_rate_seconds))
        for size, acks in plan.end_to_end:
            runs.append(end_to_end(ctx, target, e2e_topic(size, acks), size, acks))
            ctx.log(f"  {target.name} end-to-end {size} B acks={acks}: p50/p99 "
                    f"{runs[-1].p50_ms:.2f}/{runs[-1].p99_ms:.2f} ms")
            if plan.kafka_references:
                runs.append(end_to_end_reference(ctx, target, e2e_topic(size, acks, True),
                                                 size, acks))

    return measure


def fixed_rates(sessions: list[Session], plan: Plan) -> dict[str, int]:
    """Half of Kafka's median unthrottled records/s per workload, from this run."""
    return {w.key: half_of_kafkas_median(
        sessions, lambda r, w=w: r.tool == "ProducerPerformance" and r.workload == w.key,
        f"unthrottled {w.key} rate") for w in plan.workloads}


def run_single_node(ctx: Context) -> tuple[list[Session], dict[str, int]]:
    """The throughput phase, then (unless the plan has none) the latency phase."""
    plan = ctx.plan
    sessions = run_rounds(ctx, "throughput", 1, SINGLE_NODE_ORDER, plan.rounds, throughput)
    if not plan.latency_phase:
        return sessions, {}
    rates = fixed_rates(sessions, plan)
    ctx.log("fixed rates (half of Kafka's median records/s): "
            + ", ".join(f"{k} {v:,}" for k, v in rates.items()))
    sessions += run_rounds(ctx, "latency", 1, SINGLE_NODE_ORDER, plan.rounds, latency(rates))
    return sessions, rates


# --- RF=3 vs RF=1 on three nodes -----------------------------------------------------------

def rf3_topic(rf: int, kind: str) -> str:
    return f"bench-rf{rf}-{kind}"


def rf3_fixed_rate(plan: Plan, sessions: list[Session]) -> int:
    """The fixed rate of a round: plan.rf3_rate if set, else half of the median of Kafka's
    RF=3 unthrottled records/s in `sessions` (Kafka runs first in every round)."""
    if plan.rf3_rate:
        return plan.rf3_rate
    return half_of_kafkas_median(sessions, lambda r: r.kind == "unthrottled" and r.rf == 3,
                                 "RF=3 rate (use --rf3-rate)")


def replication(ctx: Context, target: Target, session: Session, earlier: list[Session]) -> None:
    """ProducerPerformance (RF3_WORKLOAD) unthrottled and at the round's fixed rate
    (rf3_fixed_rate over the earlier sessions and this one), to an RF=1 and an RF=3 topic
    of the same cluster, the order of the two swapped every round."""
    plan, w = ctx.plan, RF3_WORKLOAD
    rfs = (1, 3) if session.round % 2 else (3, 1)
    create_topics(ctx, target, [(rf3_topic(rf, part), w.partitions, rf)
                                for rf in rfs for part in ("t", "l")])
    for rf in rfs:
        run = unthrottled(ctx, target, rf3_topic(rf, "t"), w, plan.rf3_records, rf)
        session.runs.append(run)
        ctx.log(f"  {target.name} RF={rf} unthrottled: {run.mb_per_s:.1f} MB/s, "
                f"brokers' CPU {run.broker_cpu_s:.2f} s")
    rate = rf3_fixed_rate(plan, [*earlier, session])
    for rf in rfs:
        session.runs.append(at_fixed_rate(ctx, target, rf3_topic(rf, "l"), w, rate,
                                          plan.rf3_fixed_seconds, rf))


def run_rf3(ctx: Context) -> list[Session]:
    plan = ctx.plan
    return run_rounds(ctx, "rf3", CLUSTER_NODES, plan.rf3_brokers, plan.rf3_rounds, replication)
