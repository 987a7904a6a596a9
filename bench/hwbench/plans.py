"""What a run measures: the workloads and, per mode (full, smoke, rf3, txn), how many
rounds, records and seconds of each. A plan is written into the results' meta and read
back from it by plan_from_json (bench/run.sh render).
"""

from __future__ import annotations

import dataclasses


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
    def size_label(self) -> str:
        return "1 KiB" if self.size == 1024 else f"{self.size} B"

    @property
    def label(self) -> str:
        parts = "1 partition" if self.partitions == 1 else f"{self.partitions} partitions"
        return f"{self.size_label}, acks={self.acks}, {parts}"

    def topic(self, phase: str) -> str:
        return f"bench-{phase}-{self.key}"


# The three-node section's one workload, to an RF=1 and an RF=3 topic.
RF3_WORKLOAD = Workload(100, "all", 6)

# A transaction per 100 ms (ProducerPerformance --transaction-duration-ms); transactions
# need idempotence, so acks=all.
TXN_DURATION_MS = 100
TXN_WORKLOADS = (Workload(100, "all", 1), Workload(1024, "all", 6))


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

    def consumed_workloads(self) -> list[Workload]:
        """One workload per (record size, partitions): the data to read back."""
        seen, picked = set(), []
        for w in self.workloads:
            if (w.size, w.partitions) not in seen:
                seen.add((w.size, w.partitions))
                picked.append(w)
        return picked

    def stored_records(self, w: Workload) -> int:
        """Records in a throughput topic: the warm-up's and the measured run's."""
        records = self.unthrottled_records[w.size]
        return records + int(records * self.warmup_fraction)


def all_workloads() -> tuple[Workload, ...]:
    return tuple(Workload(size, acks, parts)
                 for size in (100, 1024) for acks in ("1", "all") for parts in (1, 6))


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


def plan_from_json(data: dict) -> Plan:
    """The Plan of dataclasses.asdict(plan), as results' meta holds it (older results have
    fewer fields: the defaults)."""
    fields = dict(data)
    for name in ("workloads", "transactional"):
        if name in data:
            fields[name] = tuple(Workload(**w) for w in data[name])
    fields["unthrottled_records"] = {int(k): v for k, v in data["unthrottled_records"].items()}
    fields["end_to_end"] = tuple(tuple(pair) for pair in data["end_to_end"])
    for name in ("sections", "rf3_brokers"):
        if name in data:
            fields[name] = tuple(data[name])
    return Plan(**fields)
