"""What the benchmarks beside the main one (bench/dev.py, efficient.py, partitions.py)
share: their command line, a work directory removed however the run ends, the meta of
their results, and where the results are written.

The work directory matters: one `make bench-efficient` writes tens of GB under it, and a
run that left it behind once filled the disk that the next CI run needed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .context import BENCH, ROOT, Context, prepare
from .errors import BenchError
from .main import command_output, machine
from .plans import PLANS
from .processes import kill_all, start_watchdog


def parser(doc: str | None, rounds: int) -> argparse.ArgumentParser:
    """The options every standalone benchmark takes; a caller may add its own."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--out", type=Path, default=BENCH / "results")
    p.add_argument("--highwater-bin", type=Path,
                   default=ROOT / "target" / "release" / "highwater")
    return p


def quick_parser(doc: str | None, rounds: int, quick_help: str) -> argparse.ArgumentParser:
    """parser() with --quick (a smoke run: tiny workloads or short waits, nothing written)."""
    p = parser(doc, rounds)
    p.add_argument("--quick", action="store_true", help=quick_help)
    return p


def run(name: str, args: argparse.Namespace, body: Callable[[Context], int]) -> int:
    """Runs `body` in a fresh work directory (prefix highwater-bench-NAME.) with the
    watchdog started; kills every child and removes the directory when `body` returns or
    raises, and turns a BenchError into one line and exit status 1."""
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"highwater-bench-{name}."))
    guard = start_watchdog(work, False)
    try:
        return body(prepare(PLANS["smoke"], work, args.highwater_bin, False, began))
    except BenchError as err:
        print(f"bench {name}: FAILED: {err}")
        return 1
    finally:
        kill_all()
        guard.kill()
        guard.wait()
        shutil.rmtree(work, ignore_errors=True)


def meta(ctx: Context, args: argparse.Namespace, **extra: object) -> dict:
    """The date, rounds, commit, duration and machine of a run, plus `extra`."""
    return {"date": dt.date.today().isoformat(), "rounds": args.rounds,
            "highwater_commit": command_output(["git", "rev-parse", "--short", "HEAD"]),
            "duration_s": time.monotonic() - ctx.began, "machine": machine(), **extra}


def write_results(out: Path, date: str, name: str, md: str, data: dict) -> None:
    """Writes results/DATE-NAME.md and .json."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{date}-{name}.md").write_text(md)
    (out / f"{date}-{name}.json").write_text(json.dumps(data, indent=1) + "\n")


def publish(ctx: Context, args: argparse.Namespace, name: str, results: dict,
            markdown: Callable[[dict], str]) -> int:
    """Adds the run's meta to `results`, prints their markdown and, unless --quick, writes
    both as results/DATE-NAME.md and .json; returns 0."""
    results["meta"] = meta(ctx, args, quick=args.quick)
    md = markdown(results)
    if not args.quick:
        write_results(args.out, results["meta"]["date"], name, md, results)
    print(md)
    return 0
