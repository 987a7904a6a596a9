"""Starting and stopping one broker of each kind: a single highwater (`highwater serve` on
config/server.toml) or a single Apache Kafka node (a combined KRaft broker+controller with
compat/kafka-ref/start.sh's properties), each in its own session directory on free
loopback ports, timed from the spawn to its first Metadata answer.

Also what a three-node cluster (clusters.py) shares with one broker: Node (one broker
process and its log), Target (what the tools talk to: one node or several; alive, logs,
CPU pids, stop) and the Kafka properties, storage format and command, the highwater
environment.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from pathlib import Path

from .context import BROKER_HEAP, JVM_PERFORMANCE_OPTS, KAFKA_LOG4J, ROOT, Context, java_cmd
from .errors import BenchError
from .probes import free_ports, wait_for_metadata
from .processes import memory_kib, run_tool, spawn, stop_all, tail, write_live_file
from .records import BrokerMemory, StartFigures

HIGHWATER_CONFIG = ROOT / "config" / "server.toml"
BROKER_STOP_GRACE_S = 20.0


class Node:
    """One broker process of a Target: its directory, its stdout and the log it writes."""

    def __init__(self, label: str, node_dir: Path, stdout: Path, log: Path) -> None:
        self.label = label  # "kafka", "highwater node 2"
        self.dir = node_dir
        self.stdout = stdout
        self.log = log
        self.proc: subprocess.Popen | None = None

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log_tail(self, lines: int) -> str:
        text = f"  end of the {self.label} log ({self.log}):\n{tail(self.log, lines)}"
        if self.log != self.stdout:
            text += f"\n  end of its stdout ({self.stdout}):\n{tail(self.stdout, lines // 2)}"
        return text


class Target:
    """What a session's tools talk to: the nodes of one kind it started, with the bootstrap
    list of their client ports."""

    name = ""
    stop_grace_s = BROKER_STOP_GRACE_S
    tail_lines = 40

    def __init__(self, ctx: Context, session_dir: Path, nodes: list[Node],
                 ports: list[int]) -> None:
        self.ctx = ctx
        self.dir = session_dir
        self.nodes = nodes
        self.bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports)

    def env(self) -> dict[str, str] | None:
        return None

    def exited(self) -> bool:
        return any(node.exited() for node in self.nodes)

    def check_alive(self, during: str) -> None:
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                status = None if node.proc is None else node.proc.returncode
                raise BenchError(f"{node.label} exited (status {status}) during {during}\n"
                                 f"{self.log_tail()}")

    def log_tail(self) -> str:
        return "\n".join(node.log_tail(self.tail_lines) for node in self.nodes)

    def cpu_pids(self) -> str:
        """The pids whose CPU time BenchTool producer-perf sums, comma-separated."""
        return ",".join(str(node.proc.pid) for node in self.nodes if node.proc is not None)

    def memory_sample(self) -> BrokerMemory | None:
        """The broker's memory after a tool run; None for a cluster (not sampled)."""
        return None

    def stop(self) -> None:
        """SIGTERM to every node at once (one at a time, the last nodes of a cluster would
        wait for a quorum that is gone), SIGKILL after stop_grace_s."""
        stop_all([node.proc for node in self.nodes if node.proc is not None],
                 self.stop_grace_s)


class Broker(Target):
    """A single broker started by this script in its own session directory."""

    def __init__(self, ctx: Context, session_dir: Path, log: Path | None = None) -> None:
        self.port = free_ports(1)[0]
        stdout = session_dir / "broker.log"
        node = Node(self.name, session_dir, stdout, log or stdout)
        super().__init__(ctx, session_dir, [node], [self.port])

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> float | None:
        """What comes before the timed start; returns the seconds it took, if counted."""
        return None

    def start(self) -> StartFigures:
        """Starts the broker; returns the time to its first Metadata response."""
        format_s = self.prepare()
        cmd = self.command()
        node = self.nodes[0]
        started = time.monotonic()
        node.proc = spawn(cmd, node.stdout, node.stdout, self.dir, self.env(),
                          tell_watchdog=False)
        spawned = time.monotonic()
        try:
            answered = wait_for_metadata(self.port, node.proc, started)
        except BenchError as err:
            raise BenchError(f"{self.name}: {err}\n{self.log_tail()}") from None
        finally:
            write_live_file()
        return StartFigures(format_s=format_s, pid=node.proc.pid,
                            spawn_ms=(spawned - started) * 1e3,
                            start_to_metadata_ms=(answered - started) * 1e3)

    def pid(self) -> int:
        proc = self.nodes[0].proc
        assert proc is not None
        return proc.pid

    def memory_sample(self) -> BrokerMemory:
        mem = memory_kib(self.pid())
        return BrokerMemory(broker_rss_kib=mem.get("VmRSS"),
                            broker_anon_kib=mem.get("RssAnon"),
                            broker_hwm_kib=mem.get("VmHWM"))


def highwater_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RUST_LOG", None)  # the config's default level (info), as Kafka logs INFO
    return env


class Highwater(Broker):
    name = "highwater"
    # Listeners after the PLAINTEXT one (`NAME://HOST:PORT,...`) and `KEY=VALUE` settings,
    # for a benchmark of secured listeners (bench/security.py).
    secured_listeners = ""
    settings: tuple[str, ...] = ()

    def command(self) -> list[str]:
        listeners = self.bootstrap
        if self.secured_listeners:
            listeners = f"PLAINTEXT://{self.bootstrap},{self.secured_listeners}"
        cmd = [str(self.ctx.highwater_bin), "serve", "--config", str(HIGHWATER_CONFIG),
               "--listeners", listeners, "--log-dirs", str(self.dir / "data")]
        for setting in self.settings:
            cmd += ["--set", setting]
        return cmd

    def env(self) -> dict[str, str]:
        return highwater_env()


# What every Kafka node of the suite shares: start.sh's single-node settings for the
# internal topics, and groups that form at once.
KAFKA_COMMON_PROPERTIES = """num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
"""


def kafka_properties(node_id: int, port: int, controller_port: int, quorum: str,
                     data: Path, extra: str = "") -> str:
    """server.properties of a combined node, as compat/kafka-ref/start.sh writes it;
    `quorum` is its controller.quorum.* line; `extra` lines come last (a key given again
    there wins, as Java's Properties reads them)."""
    bootstrap = f"127.0.0.1:{port}"
    return f"""\
process.roles=broker,controller
node.id={node_id}
listeners=PLAINTEXT://{bootstrap},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://{bootstrap}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
{quorum}
log.dirs={data}
""" + KAFKA_COMMON_PROPERTIES + extra


def kafka_cluster_id() -> str:
    """A random Kafka Uuid in its base64url form (what kafka-storage random-uuid prints)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def format_kafka_storage(ctx: Context, args: list[str], node_dir: Path) -> None:
    """kafka-storage format with `args` (cluster id, properties, ...)."""
    run_tool(java_cmd("kafka.tools.StorageTool", ["format", *args], ctx.kafka_classpath,
                      ["-Xmx256M"]), "kafka-storage-format", node_dir, 120)


def kafka_command(ctx: Context, node_dir: Path, props: Path) -> list[str]:
    """kafka-server-start.sh's java command, logging to <node_dir>/logs."""
    return ["java", *BROKER_HEAP, *JVM_PERFORMANCE_OPTS,
            f"-Dkafka.logs.dir={node_dir / 'logs'}", "-Dkafka.request.log.level=WARN",
            f"-Dlog4j2.configurationFile={KAFKA_LOG4J}",
            "-cp", ctx.kafka_classpath, "kafka.Kafka", str(props)]


class Kafka(Broker):
    name = "kafka"
    # Properties after the others (bench/security.py's listeners and keys).
    extra_properties = ""

    def __init__(self, ctx: Context, session_dir: Path) -> None:
        super().__init__(ctx, session_dir, session_dir / "logs" / "server.log")
        self.controller_port = free_ports(1)[0]
        self.props = session_dir / "server.properties"

    def prepare(self) -> float:
        """Writes server.properties (as compat/kafka-ref/start.sh) and formats the storage;
        returns the seconds the format took."""
        (self.dir / "logs").mkdir(parents=True)
        self.props.write_text(kafka_properties(
            1, self.port, self.controller_port,
            f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
            self.dir / "data", self.extra_properties))
        began = time.monotonic()
        format_kafka_storage(ctx=self.ctx, node_dir=self.dir, args=[
            "--standalone", "-t", kafka_cluster_id(), "-c", str(self.props)])
        return time.monotonic() - began

    def command(self) -> list[str]:
        return kafka_command(self.ctx, self.dir, self.props)


BROKERS = {"highwater": Highwater, "kafka": Kafka}
