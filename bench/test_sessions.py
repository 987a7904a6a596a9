"""Unit tests of the pipeline in bench/hwbench/sessions.py with the tools replaced by
stand-ins: which topics and produce runs a three-node session makes (RF=1 and RF=3, their
order swapped every round, the fixed rate from Kafka's RF=3 run), and that the single-node
latency phase makes the same fixed-rate runs without a replication factor."""

from __future__ import annotations

import dataclasses
import types
import unittest
from unittest import mock

from hwbench import sessions
from hwbench.plans import PLANS, RF3_WORKLOAD, Plan
from hwbench.records import Session
from test_records import producer_run

FULL = PLANS["full"]


class StandIns:
    """create_topics and producer_performance, recording what they were asked."""

    def __init__(self, records_per_s: float) -> None:
        self.records_per_s = records_per_s
        self.topics: list = []
        self.produced: list = []

    def create_topics(self, _ctx, _target, topics) -> None:
        self.topics += topics

    def producer_performance(self, _ctx, _target, topic, w, records, throughput, warmup,
                             transactional=False):
        self.produced.append((topic, w, records, throughput, warmup, transactional))
        return producer_run(topic=topic, workload=w.key, records=records,
                            throughput_arg=throughput, warmup_records=warmup,
                            records_per_s=self.records_per_s)


def run_with(stand_ins: StandIns, measure, session: Session, earlier=(),
             plan: Plan = FULL) -> None:
    ctx = types.SimpleNamespace(plan=plan, log=lambda _message: None)
    target = types.SimpleNamespace(name=session.broker)
    with mock.patch.object(sessions, "create_topics", stand_ins.create_topics), \
            mock.patch.object(sessions, "producer_performance", stand_ins.producer_performance):
        measure(ctx, target, session, list(earlier))


class ThreeNodes(unittest.TestCase):
    def test_rf1_and_rf3_topics_in_the_rounds_order_at_kafkas_rate(self):
        stand_ins = StandIns(records_per_s=40_000.0)
        first = Session(broker="kafka", phase="rf3", round=1)
        run_with(stand_ins, sessions.replication, first)
        self.assertEqual(stand_ins.topics, [("bench-rf1-t", 6, 1), ("bench-rf1-l", 6, 1),
                                            ("bench-rf3-t", 6, 3), ("bench-rf3-l", 6, 3)])
        self.assertEqual([(r.rf, r.kind, r.topic) for r in first.runs],
                         [(1, "unthrottled", "bench-rf1-t"), (3, "unthrottled", "bench-rf3-t"),
                          (1, "fixed", "bench-rf1-l"), (3, "fixed", "bench-rf3-l")])
        records = FULL.rf3_records
        self.assertEqual(stand_ins.produced[0],
                         ("bench-rf1-t", RF3_WORKLOAD, records, -1, records // 4, False))
        rate = 20_000  # half of Kafka's RF=3 unthrottled rate in this very session
        self.assertEqual(stand_ins.produced[2],
                         ("bench-rf1-l", RF3_WORKLOAD, int(rate * FULL.rf3_fixed_seconds),
                          rate, int(rate * FULL.warmup_seconds), False))
        self.assertEqual([r.target_rate for r in first.runs], [None, None, rate, rate])

        second = Session(broker="highwater", phase="rf3", round=2)
        run_with(StandIns(records_per_s=1.0), sessions.replication, second, [first])
        self.assertEqual([(r.rf, r.kind) for r in second.runs],
                         [(3, "unthrottled"), (1, "unthrottled"), (3, "fixed"), (1, "fixed")])
        self.assertEqual(second.runs[-1].target_rate, rate)  # Kafka's, not highwater's


class OneNode(unittest.TestCase):
    def test_the_latency_phase_makes_fixed_rate_runs_without_a_replication_factor(self):
        plan = dataclasses.replace(FULL, end_to_end=(), broker_warmup_records=0)
        rates = {w.key: 1000 + i for i, w in enumerate(plan.workloads)}
        session = Session(broker="highwater", phase="latency", round=1)
        run_with(StandIns(records_per_s=1.0), sessions.latency(rates), session, plan=plan)
        self.assertEqual([r.topic for r in session.runs], [w.topic("l") for w in plan.workloads])
        for run, w in zip(session.runs, plan.workloads):
            self.assertEqual((run.rf, run.kind, run.target_rate), (None, None, rates[w.key]))
            self.assertEqual(run.records, int(rates[w.key] * FULL.fixed_rate_seconds))


if __name__ == "__main__":
    unittest.main()
