"""What every session of a run works with: the repository's paths, the Kafka version and
JVM settings, and the Context (plan, work dir, the snapshot of the highwater binary, the
class paths) that prepare builds once per run.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

from .errors import BenchError
from .plans import Plan
from .processes import run_tool

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "bench"
LIBS = ROOT / ".kafka-ref" / "libs"
KAFKA_VERSION = "4.1.1"
KAFKA_LOG4J = ROOT / "compat" / "kafka-ref" / "log4j2.properties"
TOOLS_LOG4J = ROOT / "compat" / "java" / "tools-log4j2.properties"

# The JVM settings of Kafka's own scripts: kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS,
# kafka-server-start.sh's heap for the broker, the perf-test scripts' heap for the tools.
JVM_PERFORMANCE_OPTS = [
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
    "-Duser.language=en", "-Duser.country=US",
]
BROKER_HEAP = ["-Xmx1G", "-Xms1G"]
TOOL_HEAP = ["-Xmx512M"]


def java_cmd(main_class: str, args: list[str], classpath: str,
             heap: list[str] = TOOL_HEAP) -> list[str]:
    """A Kafka tool (or BenchTool) as the perf-test scripts run it."""
    return ["java", *heap, *JVM_PERFORMANCE_OPTS,
            f"-Dlog4j2.configurationFile={TOOLS_LOG4J}", "-cp", classpath, main_class, *args]


@dataclasses.dataclass
class Context:
    """What every session needs: the plan, the work dir and the class paths."""

    plan: Plan
    work: Path
    highwater_bin: Path
    kafka_classpath: str
    tool_classpath: str
    keep: bool
    began: float

    def log(self, message: str) -> None:
        elapsed = time.monotonic() - self.began
        print(f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}] {message}", flush=True)


def prepare(plan: Plan, work: Path, binary: Path, keep: bool, began: float) -> Context:
    """Checks the Kafka jars, snapshots the highwater binary, compiles BenchTool."""
    for jar in (f"kafka_2.13-{KAFKA_VERSION}.jar", f"kafka-tools-{KAFKA_VERSION}.jar"):
        if not (LIBS / jar).exists():
            raise BenchError(f"no {jar} in {LIBS}: run compat/install-deps.sh "
                             "(make compat-deps)")
    if not os.access(binary, os.X_OK):
        raise BenchError(f"no highwater binary at {binary}: run make build")
    # A copy, so that a rebuild during the run cannot change the broker under test.
    snapshot = work / "highwater"
    shutil.copy2(binary, snapshot)
    classes = work / "classes"
    classes.mkdir()
    kafka_classpath = f"{LIBS}/*"
    run_tool(["javac", "-d", str(classes), "-cp", kafka_classpath,
              str(BENCH / "java" / "BenchTool.java")], "javac", work, 180)
    return Context(plan, work, snapshot, kafka_classpath, f"{classes}:{kafka_classpath}",
                   keep, began)
