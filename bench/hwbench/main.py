"""The command line: `bench/run.sh full|smoke|rf3|txn [options]` runs a plan and writes its
results (bench/README.md); `bench/run.sh render RESULTS_JSON` recomputes a run's tables and
chart from its raw figures. Also the facts of the machine and the checkout that a run's
meta records. Every process a run starts is killed when it ends, however it ends.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import parsers
from .context import (BENCH, BROKER_HEAP, JVM_PERFORMANCE_OPTS, ROOT, TOOL_HEAP, Context,
                      prepare)
from .errors import BenchError
from .plans import PLANS, Plan, plan_from_json
from .processes import kill_all, start_watchdog
from .records import Meta, Results
from .report import NOTES, update_readme, write_outputs
from .sessions import run_rf3, run_single_node


def command_output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> dict:
    cpu_model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {"cpus": os.cpu_count(), "cpu_model": cpu_model, "mem_gib": mem_kib / 2**20,
            "kernel": f"Linux {platform.release()}"}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return parsers.java_version(out)


def meta(ctx: Context, started_at: dt.datetime, load_start: str) -> Meta:
    plan = ctx.plan
    return Meta(
        date=started_at.strftime("%Y-%m-%d"), started_at=started_at.isoformat(),
        mode=plan.mode, rounds=plan.rounds, duration_s=time.monotonic() - ctx.began,
        highwater_commit=command_output(["git", "rev-parse", "--short", "HEAD"]),
        dirty=command_output(["git", "status", "--porcelain", "--untracked-files=no"]) != "",
        highwater_sha256=hashlib.sha256(ctx.highwater_bin.read_bytes()).hexdigest(),
        java=java_version(), machine=machine(), loadavg_start=load_start,
        loadavg_end=loadavg(),
        work_dir_fs=command_output(["df", "--output=source,target", str(ctx.work)])
        .splitlines()[-1].split()[0],
        plan=dataclasses.asdict(plan),
        jvm={"broker": BROKER_HEAP + JVM_PERFORMANCE_OPTS,
             "tools": TOOL_HEAP + JVM_PERFORMANCE_OPTS})


def render(path: Path, update: bool) -> int:
    """Re-computes a run's .md and .png (and its .json's tables) from its raw sessions."""
    results = Results.from_json(json.loads(path.read_text()))
    plan = plan_from_json(results.meta.plan)
    results.notes = NOTES
    md = write_outputs(path.parent, results, plan, path.stem)
    if update and "single" in plan.sections:
        update_readme(md.read_text(), path.stem)
    print(md.read_text())
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/run.sh",
        description="highwater against Apache Kafka 4.1.1 on one machine, with Kafka's own "
                    "perf tools (bench/README.md).")
    parser.add_argument("mode", choices=[*sorted(PLANS), "render"],
                        help="render: re-compute the tables and chart of RESULTS_JSON")
    parser.add_argument("results_json", nargs="?", type=Path, help="for render")
    parser.add_argument("--rounds", type=int, help="rounds per phase (default: the mode's)")
    parser.add_argument("--rf3-rounds", type=int,
                        help="rounds of the RF=3 section (default: the mode's)")
    parser.add_argument("--rf3-rate", type=int,
                        help="records/s of the RF=3 section's fixed-rate runs (default: half of "
                        "Kafka's RF=3 unthrottled rate)")
    parser.add_argument("--out", type=Path,
                        help="where to write <date>.md/.json/.png (full: bench/results; "
                             "smoke: a temporary dir, deleted)")
    parser.add_argument("--highwater-bin", type=Path,
                        default=ROOT / "target" / "release" / "highwater")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="parent of the scratch dir holding both brokers' data "
                             "(default: $TMPDIR or /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument("--no-readme", action="store_true",
                        help="full mode: do not update bench/README.md")
    return parser.parse_args(argv)


def plan_of(args: argparse.Namespace) -> Plan:
    plan = PLANS[args.mode]
    if args.rounds:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    if args.rf3_rounds:
        plan = dataclasses.replace(plan, rf3_rounds=args.rf3_rounds)
    if args.rf3_rate:
        plan = dataclasses.replace(plan, rf3_rate=args.rf3_rate)
    return plan


def on_signal(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)


def run(ctx: Context, args: argparse.Namespace, started_at: dt.datetime,
        load_start: str) -> int:
    """Runs the plan's sections and writes the results; prints the table."""
    plan, work = ctx.plan, ctx.work
    parts = ([f"{plan.rounds} round(s) per single-node phase"]
             if "single" in plan.sections else [])
    if "rf3" in plan.sections:
        parts.append(f"{plan.rf3_rounds} RF=3 round(s) ({', '.join(plan.rf3_brokers)})")
    ctx.log(f"bench {plan.mode}: {', '.join(parts)}, work dir {work}")
    sessions, rates = run_single_node(ctx) if "single" in plan.sections else ([], {})
    rf3_sessions = run_rf3(ctx) if "rf3" in plan.sections else []
    results = Results(meta=meta(ctx, started_at, load_start), fixed_rates=rates, notes=NOTES,
                      sessions=sessions, rf3_sessions=rf3_sessions)
    out_dir = args.out or (work / "results" if plan.mode == "smoke" else BENCH / "results")
    md = write_outputs(out_dir, results, plan)
    if plan.mode == "full" and not args.no_readme and args.out is None:  # not rf3
        update_readme(md.read_text(), results.meta.stem)
    print()
    print(md.read_text())
    kept = "" if out_dir != work / "results" else " (smoke: deleted on exit; --out keeps)"
    kept = (" (+ .json)" if "single" not in plan.sections else " (+ .json, .png)") + kept
    ctx.log(f"bench {plan.mode}: done in {(time.monotonic() - ctx.began) / 60:.1f} min; "
            f"{md}{kept}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mode == "render":
        if args.results_json is None:
            print("bench: render needs a results .json", file=sys.stderr)
            return 2
        return render(args.results_json, not args.no_readme)
    plan = plan_of(args)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    began = time.monotonic()
    started_at = dt.datetime.now().astimezone()
    load_start = loadavg()
    work = Path(tempfile.mkdtemp(prefix="highwater-bench.", dir=args.work_dir))
    guard = start_watchdog(work, args.keep)
    try:
        ctx = prepare(plan, work, args.highwater_bin, args.keep, began)
        return run(ctx, args, started_at, load_start)
    except BenchError as err:
        print(f"\nbench {plan.mode}: FAILED: {err}", file=sys.stderr)
        return 1
    finally:
        kill_all()
        guard.kill()
        guard.wait()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
