#!/usr/bin/env python3
"""What TLS and SASL cost (issue 15): produce and consume over PLAINTEXT, SSL and SASL_SSL,
highwater side by side with Apache Kafka 4.1.1.

One node of each, with three listeners configured with the same Kafka keys: PLAINTEXT, SSL
(a PEM keystore made here with openssl, through compat/lib/certs.sh) and SASL_SSL (PLAIN,
a user of the listener's JAAS config). bench/loadgen (franz-go, 1 MiB batches, no
compression) produces 1 KiB records with acks=1 into 6 partitions over each listener as
fast as it can, consumes them back over the same listener, then deletes the topic (the
listeners take turns going first). For each: throughput, broker CPU seconds per GB, that
figure against the same broker's over PLAINTEXT (what the security costs), and the
client's cores, so a reader can tell who was the bottleneck.

Brokers alternate which goes first each round; medians of ROUNDS rounds. Writes
bench/results/<date>-security.md and .json and prints the table.
Usage: make bench-security, or python3 bench/security.py [--rounds N] [--quick]
[--out DIR] [--highwater-bin PATH].
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

from efficient import build_loadgen, loadgen, mb_s, measured, median, per_gb, ratio, spread
from hwbench import standalone
from hwbench.brokers import Highwater, Kafka
from hwbench.context import ROOT, Context
from hwbench.errors import BenchError
from hwbench.probes import free_ports

BROKERS = ("kafka", "highwater")
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
SIZE = 1024
PARTITIONS = 6
BYTES = 1_000_000_000
USER, PASSWORD = "alice", "alice-secret"


def make_certificates(certs: Path) -> None:
    """A CA and the broker's certificate (localhost, 127.0.0.1) as the compat suites make
    them: certs/ca.crt and certs/broker.pem (key, then certificate)."""
    certs.mkdir()
    script = ('source "$1/compat/lib/certs.sh"; make_ca ca; '
              'make_cert broker ca /CN=broker DNS:localhost,IP:127.0.0.1')
    done = subprocess.run(["bash", "-c", f"certs={certs}; {script}", "certs", str(ROOT)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not (certs / "broker.pem").exists():
        raise BenchError(f"cannot make the certificates: {done.stderr.strip()}")


def security_keys(certs: Path) -> list[str]:
    """The Kafka keys both brokers start with, besides their listeners."""
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{USER}="{PASSWORD}";')
    return ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
            "CONTROLLER:PLAINTEXT",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={certs / 'broker.pem'}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={certs / 'ca.crt'}",
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}"]


def start(ctx: Context, kind: str, session: Path, certs: Path) -> tuple[object, dict[str, str]]:
    """Starts a broker of `kind` with the three listeners; returns it and each listener's
    address."""
    ssl_port, sasl_port = free_ports(2)
    secured = f"SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}"
    keys = security_keys(certs)
    if kind == "kafka":
        broker = Kafka(ctx, session)
        plain = f"127.0.0.1:{broker.port}"
        broker.extra_properties = "\n".join([
            f"listeners=PLAINTEXT://{plain},CONTROLLER://127.0.0.1:{broker.controller_port},"
            f"{secured}", f"advertised.listeners=PLAINTEXT://{plain},{secured}", *keys, ""])
    else:
        broker = Highwater(ctx, session)
        broker.secured_listeners = secured
        broker.settings = ("http.listeners=", *keys)
    broker.start()
    addresses = {"PLAINTEXT": broker.bootstrap, "SSL": f"127.0.0.1:{ssl_port}",
                 "SASL_SSL": f"127.0.0.1:{sasl_port}"}
    return broker, addresses


def client_flags(listener: str, certs: Path) -> dict[str, str]:
    """bench/loadgen's flags for `listener`."""
    flags = {}
    if listener != "PLAINTEXT":
        flags["tls_ca"] = str(certs / "ca.crt")
    if listener == "SASL_SSL":
        flags["sasl_plain"] = f"{USER}:{PASSWORD}"
    return flags


def one_broker(ctx: Context, kind: str, round_no: int, certs: Path, quick: bool) -> list[dict]:
    session = ctx.work / f"security-{kind}-{round_no}"
    session.mkdir()
    broker, addresses = start(ctx, kind, session, certs)
    pids = [broker.nodes[0].proc.pid]
    records = (BYTES // 100 if quick else BYTES) // SIZE
    runs = []
    try:
        shift = round_no % len(LISTENERS)  # each listener first in one round
        for listener in LISTENERS[shift:] + LISTENERS[:shift]:
            flags = {"brokers": addresses[listener], **client_flags(listener, certs)}
            topic = f"sec-{listener.lower()}"
            loadgen(ctx, "create", topic=topic, partitions=PARTITIONS, rf=1, **flags)
            produced = measured(ctx, pids, "produce", topic=topic, size=SIZE,
                                records=records, acks="1", **flags)
            consumed = measured(ctx, pids, "consume", topic=topic,
                                records=produced["records"], **flags)
            # Its 1 GB leaves the page cache before the next listener's run, which would
            # otherwise pay for writing it back (each later run was ~3× dearer).
            loadgen(ctx, "delete", topic=topic, **flags)
            broker.check_alive(f"the {listener} workload")
            runs.append({"broker": kind, "round": round_no, "listener": listener,
                         "produce": produced, "consume": consumed})
            ctx.log(f"  {kind} {listener}: {mb_s(produced):.1f} MB/s produced, "
                    f"{mb_s(consumed):.1f} MB/s consumed")
    finally:
        broker.stop()
        shutil.rmtree(session, ignore_errors=True)  # 3 GB a broker and round
    return runs


def table(runs: list[dict]) -> list[str]:
    lines = ["| listener | phase | highwater MB/s | Kafka MB/s | hw/Kafka | highwater broker "
             "s/GB | Kafka broker s/GB | hw/Kafka | against PLAINTEXT s/GB (hw / Kafka) | "
             "client cores (hw / Kafka) |", "|" + "---|" * 10]
    for phase in ("produce", "consume"):
        cpu_of = {b: {listener: median([per_gb(r[phase], "broker_cpu_s") for r in runs
                                        if r["broker"] == b and r["listener"] == listener])
                      for listener in LISTENERS} for b in BROKERS}
        for listener in LISTENERS:
            pick = {b: [r[phase] for r in runs if r["broker"] == b and
                        r["listener"] == listener] for b in BROKERS}
            tput = {b: [mb_s(r) for r in pick[b]] for b in BROKERS}
            cpu = {b: [per_gb(r, "broker_cpu_s") for r in pick[b]] for b in BROKERS}
            cores = {b: median([r["client_cpu_s"] / r["seconds"] for r in pick[b]])
                     for b in BROKERS}
            cost = {b: ratio(cpu_of[b][listener], cpu_of[b]["PLAINTEXT"]) for b in BROKERS}
            lines.append(
                f"| {listener} | {phase} | {spread(tput['highwater'], '{:.0f}')} | "
                f"{spread(tput['kafka'], '{:.0f}')} | "
                f"{ratio(median(tput['highwater']), median(tput['kafka']))} | "
                f"{spread(cpu['highwater'])} | {spread(cpu['kafka'])} | "
                f"{ratio(median(cpu['highwater']), median(cpu['kafka']))} | "
                f"{cost['highwater']} / {cost['kafka']} | "
                f"{cores['highwater']:.2f} / {cores['kafka']:.2f} |")
    return lines


def markdown(results: dict) -> str:
    meta = results["meta"]
    return "\n".join([
        f"# Secured listeners, {meta['date']} (highwater {meta['highwater_commit']})",
        "", f"{meta['rounds']} rounds, medians (min–max); one node of each; bench/loadgen "
        f"(franz-go) producing {SIZE} B records, acks=1, {PARTITIONS} partitions, then "
        f"consuming them, over each listener; {meta['machine']['cpus']} cores shared by the "
        f"broker and the client; {meta['duration_s']:.0f} s.", "", *table(results["runs"]),
        ""])


def main() -> int:
    args = standalone.quick_parser(__doc__, 3, "tiny workloads (a smoke run)").parse_args()
    return standalone.run("security", args, lambda ctx: run(ctx, args))


def run(ctx: Context, args: argparse.Namespace) -> int:
    build_loadgen(ctx.work)
    certs = ctx.work / "certs"
    make_certificates(certs)
    results: dict = {"runs": []}
    for round_no in range(args.rounds):
        order = BROKERS if round_no % 2 == 0 else BROKERS[::-1]
        ctx.log(f"round {round_no + 1}/{args.rounds}: {' then '.join(order)}")
        for kind in order:
            results["runs"] += one_broker(ctx, kind, round_no, certs, args.quick)
    return standalone.publish(ctx, args, "security", results, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
