"""Unit tests of bench/hwbench/records.py: the typed records read every committed result and
write it back byte for byte (so older results stay comparable), and their JSON keeps the
flat shape (parts inline, absent fields left out)."""

from __future__ import annotations

import json
import unittest
from pathlib import Path

from hwbench.records import (BrokerMemory, ClusterStart, EndToEndRun, ProducerRun, Results,
                             Session, StartFigures, to_json)

RESULTS = Path(__file__).resolve().parent / "results"
# Results of the scripts beside bench/run.sh, each of its own shape (dev.py, efficient.py,
# partitions.py, partitions_cluster.py, security.py).
OTHER_SCRIPTS = ("-dev.json", "-efficient.json", "-partitions.json", "-partitions-cluster.json",
                 "-security.json")


def committed_results() -> list[Path]:
    return sorted(p for p in RESULTS.glob("*.json") if not p.name.endswith(OTHER_SCRIPTS))


def producer_run(**fields) -> ProducerRun:
    base = dict(tool="ProducerPerformance", topic="t", workload="100B-acks1-p1", records=10,
                warmup_records=2, throughput_arg=-1, records_per_s=5.0, mb_per_s=1.0,
                avg_ms=1.0, max_ms=2.0, p50_ms=1, p95_ms=1, p99_ms=2, p999_ms=2,
                payload_bytes=1000, broker_cpu_s=0.5, broker_minflt=3, broker_majflt=0,
                wall_s=1.0)
    return ProducerRun(**{**base, **fields})


class Json(unittest.TestCase):
    def test_every_committed_result_reads_back_to_the_same_json(self):
        self.assertGreater(len(committed_results()), 0)
        for path in committed_results():
            with self.subTest(result=path.name):
                data = json.loads(path.read_text())
                results = Results.from_json(data)
                for key in ("sessions", "rf3_sessions"):
                    self.assertEqual(json.dumps(to_json(getattr(results, key))),
                                     json.dumps(data.get(key, [])))
                self.assertEqual(json.dumps(to_json(results.meta)), json.dumps(data["meta"]))

    def test_a_part_is_inline_and_an_absent_field_left_out(self):
        run = producer_run(memory=BrokerMemory(broker_rss_kib=1, broker_anon_kib=None,
                                               broker_hwm_kib=3))
        data = to_json(run)
        self.assertEqual(data["broker_rss_kib"], 1)
        self.assertIsNone(data["broker_anon_kib"])  # a part's own None stays, as before
        self.assertNotIn("memory", data)
        self.assertNotIn("rf", data)
        self.assertNotIn("target_rate", data)
        self.assertNotIn("broker_rss_kib", to_json(producer_run()))

    def test_the_runs_of_a_session_come_back_as_their_types(self):
        session = Session(broker="kafka", phase="rf3", round=1,
                          runs=[producer_run(rf=3, kind="fixed", target_rate=50),
                                EndToEndRun(tool="EndToEndLatency", topic="e", size=100,
                                            acks="all", records=10, avg_ms=0.5, p50_ms=0,
                                            p99_ms=1, p999_ms=2)],
                          cluster_started=ClusterStart(pids=[1, 2, 3], start_to_ready_ms=70.0),
                          wall_s=5.0)
        back = Session.from_json(json.loads(json.dumps(to_json(session))))
        self.assertEqual(back, session)
        self.assertIsNone(back.started)
        single = Session(broker="highwater", phase="throughput", round=2,
                         started=StartFigures(pid=7, spawn_ms=0.5, start_to_metadata_ms=6.0))
        self.assertEqual(list(to_json(single))[:5],
                         ["broker", "phase", "round", "pid", "spawn_ms"])
        self.assertEqual(Session.from_json(to_json(single)), single)


if __name__ == "__main__":
    unittest.main()
