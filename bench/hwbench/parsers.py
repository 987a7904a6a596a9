"""What the benchmark reads from the tools it runs and from /proc, as pure functions over
their text (unit-tested in bench/test_parsers.py; `make bench-smoke` runs those tests).

Each parser returns None (or False) when the text does not have the shape it expects; the
caller raises BenchError with the end of the tool's output, so a changed tool fails loudly.
"""

from __future__ import annotations

import re
import struct

# kafka.tools.ProducerPerformance's final summary line (printTotal).
PRODUCER_SUMMARY = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$",
    re.MULTILINE)

# What bench/java's BenchTool prints between the warm-up and the measured run.
MEASURED_RUN_MARK = "BENCH measured run\n"


def result_line(out: str) -> dict[str, float] | None:
    """The key=value pairs of BenchTool's last "RESULT k=v ..." line."""
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return {k: float(v) for k, v in (kv.split("=", 1) for kv in line.split()[1:])}
    return None


def producer_summary(out: str) -> dict | None:
    """ProducerPerformance's summary of the measured run (after MEASURED_RUN_MARK): exactly
    one summary line there, or None."""
    measured = out.split(MEASURED_RUN_MARK, 1)
    summaries = PRODUCER_SUMMARY.findall(measured[-1]) if len(measured) == 2 else []
    if len(summaries) != 1:
        return None
    sent, rate, mb, avg, top, p50, p95, p99, p999 = summaries[0]
    return {"sent": int(sent), "records_per_s": float(rate), "mb_per_s": float(mb),
            "avg_ms": float(avg), "max_ms": float(top), "p50_ms": int(p50),
            "p95_ms": int(p95), "p99_ms": int(p99), "p999_ms": int(p999)}


def consumer_performance(out: str) -> dict | None:
    """ConsumerPerformance --hide-header: its last ten-field line (start, end, MB, MB/s,
    records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s); None when
    there is none or the tool warned."""
    lines = [line for line in out.splitlines() if line.count(",") == 9]
    if not lines or "WARNING" in out:
        return None
    fields = [f.strip() for f in lines[-1].split(",")]
    return {"records": int(fields[4]), "mb_per_s": float(fields[3]),
            "rebalance_ms": int(fields[6]), "fetch_ms": int(fields[7]),
            "fetch_mb_per_s": float(fields[8])}


def end_to_end_latency(out: str) -> dict | None:
    """EndToEndLatency's average and percentiles."""
    avg = re.search(r"Avg latency: ([\d.]+) ms", out)
    pct = re.search(r"Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = (\d+)", out)
    if not avg or not pct:
        return None
    return {"avg_ms": float(avg.group(1)), "p50_ms": int(pct.group(1)),
            "p99_ms": int(pct.group(2)), "p999_ms": int(pct.group(3))}


def java_version(stderr: str) -> str:
    """The version in `java -version`'s output."""
    match = re.search(r'version "([^"]+)"', stderr)
    return match.group(1) if match else "unknown"


def proc_stat_fields(text: str) -> list[str]:
    """The fields of /proc/<pid>/stat from the third (state) on: the command name before
    them may hold spaces and parentheses, so they are counted from its last ')'."""
    return text[text.rindex(")") + 2:].split()


def proc_stat_ticks(text: str) -> int:
    """utime + stime from /proc/<pid>/stat, in clock ticks."""
    fields = proc_stat_fields(text)
    return int(fields[11]) + int(fields[12])


def proc_stat_start_time(text: str) -> str:
    """starttime (field 22) of /proc/<pid>/stat: with the pid, it names one process, not a
    reused id."""
    return proc_stat_fields(text)[19]


def proc_status_kib(text: str) -> dict[str, int]:
    """The kB fields of /proc/<pid>/status (VmRSS, VmHWM, RssAnon, ...), in KiB."""
    result = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith(" kB"):
            result[name] = int(value.split()[0])
    return result


def metadata_v1_broker_ports(data: bytes) -> tuple[int, list[int]]:
    """A Metadata v1 response (after its size): its correlation id and the client port of
    every broker it lists. Raises struct.error when the response is cut short."""
    correlation_id, brokers = struct.unpack_from(">ii", data, 0)
    ports, pos = [], 8
    for _ in range(brokers):
        host_len = struct.unpack_from(">h", data, pos + 4)[0]
        pos += 6 + host_len
        broker_port, rack_len = struct.unpack_from(">ih", data, pos)
        pos += 6 + max(rack_len, 0)
        ports.append(broker_port)
    return correlation_id, ports
