"""The typed records of a run: every tool run, every session, the run's metadata, and their
JSON form in bench/results/<stem>.json.

The JSON keeps the flat shape that results written before these records had: a part
(BrokerMemory, StartFigures, IdleFigures, ClusterStart) is written as its fields inline, and
a part or optional field that is None is left out. from_json reads such a file back, older
ones included (bench/run.sh render); to_json(from_json(d)) == d for every result in
bench/results (bench/test_records.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Union


def part(cls: type) -> Any:
    """A field holding a record of `cls` whose fields the JSON holds inline; None: absent."""
    return dataclasses.field(default=None, metadata={"part": cls})


def optional() -> Any:
    """A field that only some runs have: None is left out of the JSON."""
    return dataclasses.field(default=None, metadata={"optional": True})


def to_json(record: Any) -> Any:
    """A record as the JSON of bench/results (records in lists and parts included)."""
    if isinstance(record, list):
        return [to_json(item) for item in record]
    if not dataclasses.is_dataclass(record):
        return record
    out: dict[str, Any] = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if value is None and field.metadata:
            continue
        if "part" in field.metadata:
            out.update(to_json(value))
        else:
            out[field.name] = to_json(value)
    return out


def from_json(cls: type, data: dict) -> Any:
    """A record of `cls` from its JSON; a part is read when any of its fields is there."""
    values = {}
    for field in dataclasses.fields(cls):
        inline = field.metadata.get("part")
        if inline is not None:
            if any(f.name in data for f in dataclasses.fields(inline)):
                values[field.name] = from_json(inline, data)
        elif field.name in data:
            values[field.name] = data[field.name]
    return cls(**values)


@dataclasses.dataclass(kw_only=True)
class BrokerMemory:
    """/proc/<pid>/status of a single broker right after a tool run, in KiB."""

    broker_rss_kib: int | None
    broker_anon_kib: int | None
    broker_hwm_kib: int | None


@dataclasses.dataclass(kw_only=True)
class ProducerRun:
    """One ProducerPerformance run (BenchTool producer-perf: a warm-up, then the measured
    run); the broker figures are of the measured run."""

    tool: str  # "ProducerPerformance", "... (transactional)", "... (broker warm-up)"
    topic: str
    workload: str  # Workload.key, or "broker warm-up"
    records: int
    warmup_records: int
    throughput_arg: int  # --throughput: -1 unthrottled, else records/s
    records_per_s: float
    mb_per_s: float
    avg_ms: float
    max_ms: float
    p50_ms: int
    p95_ms: int
    p99_ms: int
    p999_ms: int
    payload_bytes: int
    broker_cpu_s: float  # utime+stime of the broker process(es) over the measured run
    broker_minflt: int
    broker_majflt: int
    wall_s: float
    memory: BrokerMemory | None = part(BrokerMemory)  # single broker only
    rf: int | None = optional()  # the topic's replication factor, three-node runs only
    kind: str | None = optional()  # three-node runs: "unthrottled" or "fixed"
    target_rate: int | None = optional()  # records/s of a fixed-rate run

    @property
    def cpu_s_per_gb(self) -> float:
        return self.broker_cpu_s / (self.payload_bytes / 1e9)


@dataclasses.dataclass(kw_only=True)
class ConsumeRun:
    """BenchTool consume: assign() and seekToBeginning, until `records` were read (the
    figures of its RESULT line)."""

    tool: str
    topic: str
    records: float
    bytes: float
    seconds: float
    mb_per_s: float
    records_per_s: float
    memory: BrokerMemory | None = part(BrokerMemory)


@dataclasses.dataclass(kw_only=True)
class ConsumerPerformanceRun:
    """Kafka's own ConsumerPerformance (subscribe(), a consumer group)."""

    tool: str
    topic: str
    records: int
    mb_per_s: float
    rebalance_ms: int
    fetch_ms: int
    fetch_mb_per_s: float


@dataclasses.dataclass(kw_only=True)
class EndToEndRun:
    """One record produced and polled back, repeated: BenchTool end-to-end (assign(), in
    microseconds, with max_ms) or Kafka's own EndToEndLatency (whole milliseconds)."""

    tool: str
    topic: str
    size: int
    acks: str
    records: float
    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float | None = optional()


Run = Union[ProducerRun, ConsumeRun, ConsumerPerformanceRun, EndToEndRun]


def run_from_json(data: dict) -> Run:
    tool = data["tool"]
    if tool.startswith("ProducerPerformance"):
        return from_json(ProducerRun, data)
    if tool.startswith("BenchTool consume"):
        return from_json(ConsumeRun, data)
    if tool == "ConsumerPerformance":
        return from_json(ConsumerPerformanceRun, data)
    return from_json(EndToEndRun, data)


@dataclasses.dataclass(kw_only=True)
class StartFigures:
    """A single broker's start: spawn to the first Metadata response listing it."""

    format_s: float | None = optional()  # Kafka: kafka-storage format, before the start
    pid: int
    spawn_ms: float  # until the spawn returned (exec done)
    start_to_metadata_ms: float


@dataclasses.dataclass(kw_only=True)
class IdleFigures:
    """A single broker over the settle time after its first Metadata response."""

    idle_rss_kib: int
    idle_anon_kib: int | None
    idle_cpu_pct: float


@dataclasses.dataclass(kw_only=True)
class ClusterStart:
    """A three-node cluster's start: until every node lists all three brokers."""

    pids: list[int]
    start_to_ready_ms: float


@dataclasses.dataclass(kw_only=True)
class Session:
    """One broker (or cluster) of one kind, started fresh, and every run made against it."""

    broker: str  # "highwater" or "kafka"
    phase: str  # "throughput", "latency" or "rf3"
    round: int
    started: StartFigures | None = part(StartFigures)
    idle: IdleFigures | None = part(IdleFigures)
    runs: list[Run] = dataclasses.field(default_factory=list)
    end_memory_kib: dict[str, int] | None = optional()
    cluster_started: ClusterStart | None = part(ClusterStart)
    wall_s: float = 0.0

    @classmethod
    def from_json(cls, data: dict) -> Session:
        session = from_json(cls, data)
        session.runs = [run_from_json(run) for run in data["runs"]]
        return session


@dataclasses.dataclass(kw_only=True)
class Meta:
    """When, where and with what a run was made."""

    date: str
    started_at: str
    mode: str
    rounds: int
    duration_s: float
    highwater_commit: str
    dirty: bool
    highwater_sha256: str
    java: str
    machine: dict[str, Any]
    loadavg_start: str
    loadavg_end: str
    work_dir_fs: str
    plan: dict[str, Any]  # dataclasses.asdict(Plan); plans.plan_from_json reads it
    jvm: dict[str, list[str]]
    stem: str | None = optional()  # the file name of its results, set when written


@dataclasses.dataclass(kw_only=True)
class Results:
    """What a run measured: report.write_outputs computes the tables from it."""

    meta: Meta
    fixed_rates: dict[str, int]  # by Workload.key: the latency phase's records/s
    notes: list[str]
    sessions: list[Session]
    rf3_sessions: list[Session]

    @classmethod
    def from_json(cls, data: dict) -> Results:
        return cls(meta=from_json(Meta, data["meta"]), fixed_rates=data["fixed_rates"],
                   notes=data["notes"],
                   sessions=[Session.from_json(s) for s in data["sessions"]],
                   rf3_sessions=[Session.from_json(s) for s in data.get("rf3_sessions", [])])
