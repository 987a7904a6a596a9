"""Unit tests of bench/hwbench/figures.py and of the fixed rates of bench/hwbench/sessions.py:
medians and ratios, the rates derived from Kafka's runs, issue 7's goals and smoke mode's
checks."""

from __future__ import annotations

import dataclasses
import json
import unittest

from hwbench.errors import BenchError
from hwbench.figures import (Metric, Rf3Row, check_smoke, check_smoke_rf3, goals, rf3_rate_label,
                             tables)
from hwbench.plans import PLANS, plan_from_json
from hwbench.records import Results, Session
from hwbench.sessions import fixed_rates, rf3_fixed_rate
from test_records import RESULTS, producer_run

SMOKE = PLANS["smoke"]
FULL = PLANS["full"]


def session(broker: str, *runs, phase: str = "throughput", round_no: int = 1) -> Session:
    return Session(broker=broker, phase=phase, round=round_no, runs=list(runs))


def metric(values: dict[str, list[float]], unit: str = "MB/s", better: str = "higher") -> Metric:
    return Metric("k", "produce", "label", unit, better, values)


class Rates(unittest.TestCase):
    def test_the_fixed_rate_is_half_of_kafkas_median_unthrottled_rate(self):
        key = SMOKE.workloads[0].key
        other = SMOKE.workloads[1].key
        sessions = [
            session("kafka", producer_run(workload=key, records_per_s=3000.0),
                    producer_run(workload=other, records_per_s=800.0)),
            session("kafka", producer_run(workload=key, records_per_s=1000.0),
                    producer_run(workload=other, records_per_s=900.0),
                    producer_run(workload=key, records_per_s=9e9,
                                 tool="ProducerPerformance (broker warm-up)")),
            session("kafka", producer_run(workload=key, records_per_s=2001.0),
                    producer_run(workload=other, records_per_s=700.0)),
            session("highwater", producer_run(workload=key, records_per_s=1e9),
                    producer_run(workload=other, records_per_s=1e9)),
        ]
        self.assertEqual(fixed_rates(sessions, SMOKE), {key: 1000, other: 400})

    def test_without_kafka_figures_there_is_no_fixed_rate(self):
        with self.assertRaises(BenchError):
            fixed_rates([session("highwater", producer_run(workload=SMOKE.workloads[0].key))],
                        SMOKE)

    def test_the_rf3_rate_is_the_plans_or_half_of_kafkas_rf3_unthrottled_median(self):
        runs = [producer_run(rf=3, kind="unthrottled", records_per_s=40000.0),
                producer_run(rf=1, kind="unthrottled", records_per_s=90000.0),
                producer_run(rf=3, kind="fixed", records_per_s=10.0)]
        earlier = [session("kafka", *runs, phase="rf3"),
                   session("kafka", producer_run(rf=3, kind="unthrottled",
                                                 records_per_s=50001.0), phase="rf3"),
                   session("highwater", producer_run(rf=3, kind="unthrottled",
                                                     records_per_s=1.0), phase="rf3")]
        self.assertEqual(rf3_fixed_rate(SMOKE, earlier), SMOKE.rf3_rate)
        self.assertEqual(rf3_fixed_rate(FULL, earlier), 22500)
        with self.assertRaises(BenchError):
            rf3_fixed_rate(FULL, earlier[2:])

    def test_the_rate_label_names_one_rate_or_the_range(self):
        def fixed(round_no: int, rate: int) -> Session:
            return session("kafka", producer_run(rf=3, kind="fixed", target_rate=rate),
                           phase="rf3", round_no=round_no)
        self.assertEqual(rf3_rate_label([fixed(1, 50000), fixed(2, 50000)]), "50,000")
        self.assertEqual(rf3_rate_label([fixed(2, 39454), fixed(1, 40080)]), "39,454–40,080")


class Rows(unittest.TestCase):
    def test_medians_and_the_ratio_of_the_medians(self):
        m = metric({"highwater": [3.0, 1.0, 2.0], "kafka": [4.0, 8.0]})
        self.assertEqual(m.median("highwater"), 2.0)
        self.assertEqual(m.ratio(), 2.0 / 6.0)
        self.assertIsNone(metric({"highwater": [1.0], "kafka": [0.0]}).ratio())
        self.assertIsNone(metric({"highwater": [1.0], "kafka": []}).ratio())
        row = Rf3Row("k", "l", "ms", "lower", {"highwater": {"rf1": [2.0], "rf3": [3.0]},
                                               "kafka": {"rf1": [4.0], "rf3": [12.0]}})
        self.assertEqual(row.rf_ratio("highwater"), 1.5)
        self.assertEqual(row.broker_ratio(), 0.25)

    def test_the_goals_of_a_committed_run_are_computed_again(self):
        data = json.loads((RESULTS / "2026-11-29-155505.json").read_text())
        results = Results.from_json(data)
        plan = plan_from_json(results.meta.plan)
        t = tables(results, plan)
        self.assertEqual([dataclasses.asdict(g) for g in goals(t.metrics)], data["goals"])
        self.assertEqual([m.as_json() for m in t.metrics], data["metrics"])
        self.assertEqual([r.as_json() for r in t.rf3_rows], data["rf3_metrics"])


class Smoke(unittest.TestCase):
    def test_a_missing_negative_or_zero_figure_fails(self):
        check_smoke([metric({"highwater": [1.0], "kafka": [2.0]}),
                     metric({"highwater": [0.0], "kafka": [0.0]}, unit="ms")])
        for values in ({"highwater": [1.0], "kafka": []},
                       {"highwater": [-1.0], "kafka": [1.0]},
                       {"highwater": [float("nan")], "kafka": [1.0]},
                       {"highwater": [0.0], "kafka": [1.0]}):
            with self.subTest(values=values), self.assertRaises(BenchError):
                check_smoke([metric(values)])

    def test_every_rf3_figure_has_a_value_per_round(self):
        plan = dataclasses.replace(SMOKE, rf3_rounds=2)
        good = Rf3Row("rf3.x", "l", "MB/s", "higher",
                      {"highwater": {"rf1": [1.0, 2.0], "rf3": [1.0, 3.0]}})
        check_smoke_rf3([good], plan)
        ready = Rf3Row("rf3.cluster_ready_s", "l", "s", "lower",
                       {"highwater": {"rf1": [], "rf3": [0.1, 0.2]}})
        check_smoke_rf3([ready], plan)
        short = Rf3Row("rf3.x", "l", "MB/s", "higher",
                       {"highwater": {"rf1": [1.0], "rf3": [1.0, 3.0]}})
        for rows in ([short], [], [dataclasses.replace(good, values={
                "highwater": {"rf1": [0.0, 1.0], "rf3": [1.0, 1.0]}})]):
            with self.subTest(rows=rows), self.assertRaises(BenchError):
                check_smoke_rf3(rows, plan)


if __name__ == "__main__":
    unittest.main()
