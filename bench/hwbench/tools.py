"""Running the client tools against a Target (one broker or a cluster) and reading what
they print into records: Kafka's ProducerPerformance (through bench/java's BenchTool
producer-perf, which warms it up in the same JVM and reads the brokers' CPU time around the
measured run), BenchTool's create-topics, consume and end-to-end, and Kafka's own
ConsumerPerformance and EndToEndLatency. Each tool that reads fewer records than it should,
or prints what its parser does not expect, raises BenchError.
"""

from __future__ import annotations

from . import parsers
from .brokers import Target
from .context import Context, java_cmd
from .errors import BenchError
from .plans import TXN_DURATION_MS, Workload
from .processes import CLK_TCK, run_tool, tail
from .records import ConsumeRun, ConsumerPerformanceRun, EndToEndRun, ProducerRun


def result_line(out: str, tool: str) -> dict[str, float]:
    """The key=value pairs of BenchTool's "RESULT ..." line."""
    result = parsers.result_line(out)
    if result is None:
        raise BenchError(f"{tool} printed no RESULT line:\n{out[-2000:]}")
    return result


def bench_tool(ctx: Context, target: Target, command: str, args: list[str], name: str) -> str:
    """Runs BenchTool `command` against `target`; returns what it printed."""
    return run_tool(java_cmd("BenchTool", [command, *args], ctx.tool_classpath), name,
                    target.dir, ctx.plan.tool_timeout_s, target)


def create_topics(ctx: Context, target: Target,
                  topics: list[tuple[str, int]] | list[tuple[str, int, int]]) -> None:
    """(name, partitions[, replication factor]); waits for leaders and full ISRs."""
    specs = [":".join(str(part) for part in topic) for topic in topics]
    out = bench_tool(ctx, target, "create-topics", [target.bootstrap, *specs], "create-topics")
    if int(result_line(out, "create-topics")["topics"]) != len(topics):
        raise BenchError(f"create-topics created fewer than {len(topics)} topics")


def producer_performance(ctx: Context, target: Target, topic: str, w: Workload,
                         records: int, throughput: int, warmup_records: int,
                         transactional: bool = False) -> ProducerRun:
    """Kafka's ProducerPerformance after a warm-up in the same JVM (BenchTool producer-perf);
    the brokers' CPU time is read around the measured run only. Transactional: a
    transactional id of its own, a commit every TXN_DURATION_MS."""
    args = ["--topic", topic, "--num-records", str(records), "--record-size", str(w.size),
            "--throughput", str(throughput)]
    if transactional:
        args += ["--transactional-id", f"{topic}-txn",
                 "--transaction-duration-ms", str(TXN_DURATION_MS)]
    args += ["--producer-props", f"bootstrap.servers={target.bootstrap}", f"acks={w.acks}"]
    name = f"producer-{topic}"
    out = bench_tool(ctx, target, "producer-perf",
                     [target.cpu_pids(), str(CLK_TCK), str(warmup_records), *args], name)
    target.check_alive(f"ProducerPerformance on {topic}")
    summary = parsers.producer_summary(out)
    if summary is None:
        raise BenchError(f"ProducerPerformance on {topic} printed no summary:\n{out[-2000:]}")
    sent = summary.pop("sent")
    if sent != records:
        raise BenchError(f"ProducerPerformance on {topic}: {sent} of {records} records "
                         f"acknowledged ({target.name})\n{tail(target.dir / f'{name}.err')}")
    cpu = result_line(out, "BenchTool producer-perf")
    tool = "ProducerPerformance (transactional)" if transactional else "ProducerPerformance"
    return ProducerRun(tool=tool, topic=topic, workload=w.key, records=records,
                       warmup_records=warmup_records, throughput_arg=throughput, **summary,
                       payload_bytes=records * w.size, broker_cpu_s=cpu["broker_cpu_s"],
                       broker_minflt=int(cpu["broker_minflt"]),
                       broker_majflt=int(cpu["broker_majflt"]), wall_s=cpu["wall_s"],
                       memory=target.memory_sample())


def consume(ctx: Context, target: Target, topic: str, records: int,
            isolation: str = "read_uncommitted") -> ConsumeRun:
    """BenchTool consume: assign() and seekToBeginning until `records` were read."""
    out = bench_tool(ctx, target, "consume",
                     [target.bootstrap, topic, str(records), "10000", isolation],
                     f"consume-{topic}")
    target.check_alive(f"consuming {topic}")
    tool = ("BenchTool consume (assign)" if isolation == "read_uncommitted"
            else f"BenchTool consume (assign, {isolation})")
    return ConsumeRun(tool=tool, topic=topic, **result_line(out, "BenchTool consume"),
                      memory=target.memory_sample())


def consumer_performance_reference(ctx: Context, target: Target, topic: str,
                                   records: int) -> ConsumerPerformanceRun:
    """Kafka's own ConsumerPerformance (subscribe, a consumer group)."""
    args = ["--bootstrap-server", target.bootstrap, "--topic", topic, "--messages",
            str(records), "--group", f"bench-{topic}", "--timeout", "30000", "--hide-header"]
    out = run_tool(java_cmd("org.apache.kafka.tools.ConsumerPerformance", args,
                            ctx.kafka_classpath), f"consumer-perf-{topic}", target.dir,
                   ctx.plan.tool_timeout_s, target)
    result = parsers.consumer_performance(out)
    if result is None:
        raise BenchError(f"ConsumerPerformance on {topic}: unexpected output\n{out[-2000:]}")
    if result["records"] < records:
        raise BenchError(f"ConsumerPerformance on {topic} read {result['records']} of {records}")
    return ConsumerPerformanceRun(tool="ConsumerPerformance", topic=topic, **result)


def end_to_end(ctx: Context, target: Target, topic: str, size: int, acks: str) -> EndToEndRun:
    """BenchTool end-to-end: EndToEndLatency without group.id and commit, in microseconds."""
    records = ctx.plan.end_to_end_records
    out = bench_tool(ctx, target, "end-to-end",
                     [target.bootstrap, topic, str(records), acks, str(size)],
                     f"end-to-end-{topic}")
    target.check_alive(f"end-to-end on {topic}")
    return EndToEndRun(tool="BenchTool end-to-end (assign)", topic=topic, size=size,
                       acks=acks, **result_line(out, "BenchTool end-to-end"))


def end_to_end_reference(ctx: Context, target: Target, topic: str, size: int,
                         acks: str) -> EndToEndRun:
    """Kafka's own EndToEndLatency (group.id set, commitSync() at the end)."""
    records = ctx.plan.end_to_end_records
    out = run_tool(java_cmd("org.apache.kafka.tools.EndToEndLatency",
                            [target.bootstrap, topic, str(records), acks, str(size)],
                            ctx.kafka_classpath), f"e2e-latency-{topic}", target.dir,
                   ctx.plan.tool_timeout_s, target)
    latency = parsers.end_to_end_latency(out)
    if latency is None:
        raise BenchError(f"EndToEndLatency on {topic}: unexpected output\n{out[-2000:]}")
    return EndToEndRun(tool="EndToEndLatency", topic=topic, size=size, acks=acks,
                       records=records, **latency)
