"""Unit tests of bench/hwbench/parsers.py: each tool's output in the shape the tool prints it
(formats from the tools' printf strings in Kafka 4.1.1 and bench/java), and this process's
own /proc files. Run: python3 -m unittest discover -s bench (make bench-smoke does)."""

from __future__ import annotations

import os
import struct
import unittest
from pathlib import Path

from hwbench import parsers

# ProducerPerformance: a progress line every 5 s (no percentiles), then the summary.
PRODUCER_OUT = """\
BENCH warm-up
200000 records sent, 199800.199800 records/sec (19.05 MB/sec), 4.10 ms avg latency, 180.00 ms max latency, 3 ms 50th, 9 ms 95th, 15 ms 99th, 170 ms 99.9th.
BENCH measured run
2488305 records sent, 497661.0 records/sec (47.46 MB/sec), 3.2 ms avg latency, 41.0 ms max latency.
1000000 records sent, 612244.897959 records/sec (58.39 MB/sec), 3.21 ms avg latency, 250.00 ms max latency, 2 ms 50th, 6 ms 95th, 9 ms 99th, 40 ms 99.9th.
RESULT broker_cpu_s=1.25 broker_minflt=120 broker_majflt=0 wall_s=1.70
"""

# ConsumerPerformance --hide-header: one ten-field line.
CONSUMER_OUT = ("2026-12-02 10:00:00:000, 2026-12-02 10:00:02:000, 95.3674, 47.6837, 1000000, "
                "500000.0000, 312, 1688, 56.4973, 592417.0616\n")

END_TO_END_OUT = """\
0	5.123
1000	0.812
Avg latency: 0.8531 ms
Percentiles: 50th = 0, 99th = 2, 99.9th = 7
"""


def metadata_v1(correlation_id: int, brokers: list[tuple[int, str, int, str | None]]) -> bytes:
    """A Metadata v1 response body as Kafka encodes it (brokers, controller id, no topics)."""
    out = struct.pack(">ii", correlation_id, len(brokers))
    for node_id, host, port, rack in brokers:
        out += struct.pack(">ih", node_id, len(host)) + host.encode()
        out += struct.pack(">i", port)
        out += struct.pack(">h", -1) if rack is None else struct.pack(">h", len(rack)) + rack.encode()
    return out + struct.pack(">ii", brokers[0][0] if brokers else -1, 0)


class ToolOutput(unittest.TestCase):
    def test_the_producer_summary_is_the_measured_runs_not_the_warm_ups(self):
        summary = parsers.producer_summary(PRODUCER_OUT)
        self.assertEqual(summary, {"sent": 1000000, "records_per_s": 612244.897959,
                                   "mb_per_s": 58.39, "avg_ms": 3.21, "max_ms": 250.0,
                                   "p50_ms": 2, "p95_ms": 6, "p99_ms": 9, "p999_ms": 40})

    def test_a_producer_run_without_the_mark_or_summary_is_not_read(self):
        self.assertIsNone(parsers.producer_summary(PRODUCER_OUT.replace("BENCH measured run\n", "")))
        self.assertIsNone(parsers.producer_summary(PRODUCER_OUT.splitlines(True)[0]
                                                   + "BENCH measured run\n"))

    def test_the_last_result_line_wins(self):
        out = "RESULT records=5\nnoise\nRESULT records=10 wall_s=1.5\n"
        self.assertEqual(parsers.result_line(out), {"records": 10.0, "wall_s": 1.5})
        self.assertEqual(parsers.result_line(PRODUCER_OUT)["broker_cpu_s"], 1.25)
        self.assertIsNone(parsers.result_line("no result\n"))

    def test_consumer_performance_fields(self):
        self.assertEqual(parsers.consumer_performance(CONSUMER_OUT),
                         {"records": 1000000, "mb_per_s": 47.6837, "rebalance_ms": 312,
                          "fetch_ms": 1688, "fetch_mb_per_s": 56.4973})
        self.assertIsNone(parsers.consumer_performance("WARNING: Exiting before consuming "
                                                       "the expected number of messages\n"
                                                       + CONSUMER_OUT))
        self.assertIsNone(parsers.consumer_performance("nothing\n"))

    def test_end_to_end_latency(self):
        self.assertEqual(parsers.end_to_end_latency(END_TO_END_OUT),
                         {"avg_ms": 0.8531, "p50_ms": 0, "p99_ms": 2, "p999_ms": 7})
        self.assertIsNone(parsers.end_to_end_latency("Avg latency: 1.0 ms\n"))

    def test_java_version(self):
        stderr = ('openjdk version "17.0.13" 2024-10-15\n'
                  "OpenJDK Runtime Environment (build 17.0.13+11-Debian-2)\n")
        self.assertEqual(parsers.java_version(stderr), "17.0.13")
        self.assertEqual(parsers.java_version(""), "unknown")


class Proc(unittest.TestCase):
    def test_this_processs_stat_and_status(self):
        ticks = parsers.proc_stat_ticks(Path(f"/proc/{os.getpid()}/stat").read_text())
        times = os.times()
        clk = os.sysconf("SC_CLK_TCK")
        self.assertLessEqual(abs(ticks / clk - (times.user + times.system)), 0.05)
        status = parsers.proc_status_kib(Path(f"/proc/{os.getpid()}/status").read_text())
        self.assertGreater(status["VmRSS"], 1000)
        self.assertGreaterEqual(status["VmHWM"], status["VmRSS"])
        self.assertNotIn("Name", status)

    def test_a_command_name_with_spaces_and_parentheses(self):
        fields = " ".join(str(n) for n in range(4, 53))
        text = f"1234 (a (b) c) S {fields}\n"
        # Field n of stat(5) holds the number n here (pid 1, comm 2, state 3): utime and
        # stime are fields 14 and 15, starttime field 22.
        self.assertEqual(parsers.proc_stat_ticks(text), 14 + 15)
        self.assertEqual(parsers.proc_stat_start_time(text), "22")


class MetadataProbe(unittest.TestCase):
    def test_every_brokers_port_with_and_without_a_rack(self):
        data = metadata_v1(7, [(1, "127.0.0.1", 9092, None), (2, "localhost", 9093, "rack-b"),
                               (3, "::1", 9094, None)])
        self.assertEqual(parsers.metadata_v1_broker_ports(data), (7, [9092, 9093, 9094]))

    def test_a_cut_short_response_raises(self):
        data = metadata_v1(7, [(1, "127.0.0.1", 9092, None)])
        with self.assertRaises(struct.error):
            parsers.metadata_v1_broker_ports(data[:12])


if __name__ == "__main__":
    unittest.main()
