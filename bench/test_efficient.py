"""Unit tests of bench/efficient.py's tables: figures per GB, medians and ratios from the
records bench/loadgen prints, so a change to how the efficient-client tables read shows."""

from __future__ import annotations

import unittest

from efficient import cluster_tables, per_gb, single_table


def run(records: int, size: int, seconds: float, broker_cpu: float, client_cpu: float,
        latency: dict | None = None) -> dict:
    out = {"records": records, "bytes": records * size, "seconds": seconds,
           "broker_cpu_s": broker_cpu, "client_cpu_s": client_cpu, "errors": 0}
    if latency:
        out["latency_us"] = latency
    return out


def single(broker: str, mb: float, cpu: float) -> dict:
    # 100 B records: `mb` MB in one second, `cpu` broker seconds for it.
    produced = run(int(mb * 1e4), 100, 1.0, cpu, 0.5)
    return {"broker": broker, "round": 0, "size": 100, "acks": "1", "partitions": 1,
            "produce": produced, "consume": produced}


class Tables(unittest.TestCase):
    def test_cpu_per_gb_is_seconds_over_gigabytes(self):
        self.assertAlmostEqual(per_gb(run(5_000_000, 100, 2.0, 0.25, 1.0), "broker_cpu_s"), 0.5)

    def test_the_single_node_row_has_medians_and_ratios(self):
        runs = [single("highwater", 200, 0.04), single("highwater", 100, 0.02),
                single("highwater", 300, 0.06), single("kafka", 100, 0.1)]
        row = next(line for line in single_table(runs)
                   if line.startswith("| 100 B, acks=1, 1 partition(s) | produce"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[2], "200 (100–300)")
        self.assertEqual(cells[3], "100")
        self.assertEqual(cells[4], "2.00×")
        self.assertEqual(cells[5], "0.2 (0.2–0.2)")  # 0.04 s over 0.2 GB, and so on
        self.assertEqual(cells[6], "1")
        self.assertEqual(cells[7], "0.20×")

    def test_rf3_cpu_is_compared_with_rf1_and_latency_with_kafka(self):
        runs = []
        for broker, cpu1, cpu3, p99 in (("highwater", 0.1, 0.25, 500), ("kafka", 1.0, 4.0, 4000)):
            runs.append({"broker": broker, "round": 0, "rf": 1,
                         "produce": run(1_000_000, 100, 1.0, cpu1, 1.0)})
            runs.append({"broker": broker, "round": 0, "rf": 3,
                         "produce": run(1_000_000, 100, 1.0, cpu3, 1.0)})
            for linger in (0, 1):
                for fraction in (0.1, 0.5, 0.8):
                    lat = {"p50": 100, "p99": p99, "p99.9": 2 * p99, "max": 3 * p99}
                    runs.append({"broker": broker, "round": 0, "rf": 3, "linger": linger,
                                 "fraction": fraction, "rate": 1000,
                                 "produce": run(10_000, 100, 10.0, 0.1, 0.1, lat)})
        lines = cluster_tables(runs)
        self.assertIn("| highwater | 3 | 100 | 2.5 | 2.50× |", lines)
        self.assertIn("| kafka | 3 | 100 | 40 | 4.00× |", lines)
        self.assertIn("| 0 | 50% | 1000 | 100 / 500 / 1000 / 1500 | "
                      "100 / 4000 / 8000 / 12000 | 0.12× | 0.12× |", lines)


if __name__ == "__main__":
    unittest.main()
