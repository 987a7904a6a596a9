"""The processes the benchmark starts: spawning them, stopping them, running a tool to its
end, and measuring a process from /proc (CPU time, memory).

Every child is registered in LIVE until it is stopped or reaped, and listed in the work
dir's live file for the watchdog (hwbench/watchdog.py), which kills the ones left behind
if this process dies, however it dies; kill_all stops them when it ends normally.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from . import parsers
from .errors import BenchError
from .records import IdleFigures

TOOL_POLL_S = 0.25
CLK_TCK = os.sysconf("SC_CLK_TCK")

LIVE: list[subprocess.Popen] = []
LIVE_FILE: Path | None = None  # "pid starttime" per live child, read by the watchdog


def start_time(pid: int) -> str:
    """The start time of `pid` (with the pid, it names one process, not a reused id)."""
    return parsers.proc_stat_start_time(Path(f"/proc/{pid}/stat").read_text())


def write_live_file() -> None:
    if LIVE_FILE is None:
        return
    lines = []
    for proc in LIVE:
        try:
            lines.append(f"{proc.pid} {start_time(proc.pid)}\n")
        except OSError:
            pass  # already gone
    tmp = LIVE_FILE.with_suffix(".tmp")
    tmp.write_text("".join(lines))
    tmp.replace(LIVE_FILE)


def start_watchdog(work: Path, keep: bool) -> subprocess.Popen:
    """Starts hwbench/watchdog.py for this process, with a live file in `work`; it removes
    `work` when this process is gone, unless `keep`."""
    global LIVE_FILE  # noqa: PLW0603 (one registry per process)
    LIVE_FILE = work / "live-processes"
    write_live_file()
    return subprocess.Popen([sys.executable, "-m", "hwbench.watchdog", str(os.getpid()),
                             str(LIVE_FILE), "keep" if keep else "remove"],
                            cwd=Path(__file__).resolve().parent.parent,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def spawn(cmd: list[str], stdout: Path, stderr: Path, cwd: Path,
          env: dict[str, str] | None = None, tell_watchdog: bool = True) -> subprocess.Popen:
    """Starts a child in its own session (a ctrl-c reaches only this script, which stops
    it). No preexec_fn: that would make Python fork instead of vfork and add 2-3 ms to
    every start, which the start-up figure would count; the watchdog covers a SIGKILL.
    A broker being timed tells the watchdog later (write_live_file), off the clock."""
    with open(stdout, "ab") as out, open(stderr, "ab") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT if stderr == stdout else err,
                                cwd=cwd, env=env, start_new_session=True)
    LIVE.append(proc)
    if tell_watchdog:
        write_live_file()
    return proc


def stop_all(procs: list[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM to every one at once, then SIGKILL to those still running after grace_s."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"bench: pid {proc.pid} ignored SIGTERM for {grace_s:.0f}s; SIGKILL",
                  file=sys.stderr)
            proc.kill()
            proc.wait()
        forget(proc)


def stop(proc: subprocess.Popen, grace_s: float) -> int | None:
    """SIGTERM, then SIGKILL after grace_s; returns the exit status."""
    stop_all([proc], grace_s)
    return proc.returncode


def forget(proc: subprocess.Popen) -> None:
    if proc in LIVE:
        LIVE.remove(proc)
        write_live_file()


def kill_all() -> None:
    for proc in list(LIVE):
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        forget(proc)


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} unreadable)"
    return "\n".join(f"    {line}" for line in text[-lines:])


class Watched(Protocol):
    """What a tool talks to, watched while it runs: a broker or a cluster."""

    name: str

    def exited(self) -> bool: ...

    def log_tail(self) -> str: ...


def run_tool(cmd: list[str], name: str, workdir: Path, timeout_s: float,
             broker: Watched | None = None) -> str:
    """Runs a tool to completion; returns its stdout or raises BenchError with its output.
    Stops it at once if `broker` (the one it talks to) exits meanwhile."""
    out, err = workdir / f"{name}.out", workdir / f"{name}.err"
    proc = spawn(cmd, out, err, workdir)
    deadline = time.monotonic() + timeout_s
    rc, why = None, ""
    while rc is None and not why:
        try:
            rc = proc.wait(timeout=TOOL_POLL_S)
        except subprocess.TimeoutExpired:
            if broker is not None and broker.exited():
                why = f"stopped: {broker.name} exited while it ran\n{broker.log_tail()}"
            elif time.monotonic() > deadline:
                why = f"timed out after {timeout_s:.0f}s"
    if rc is None:
        proc.kill()
        proc.wait()
    forget(proc)
    if rc != 0:
        why = why or f"exited with {rc}"
        raise BenchError(f"{name} {why}\n  command: {' '.join(cmd[-12:])}\n"
                         f"  stdout:\n{tail(out)}\n  stderr:\n{tail(err)}")
    return out.read_text(errors="replace")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), in seconds."""
    return parsers.proc_stat_ticks(Path(f"/proc/{pid}/stat").read_text()) / CLK_TCK


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile, ... from /proc/<pid>/status, in KiB."""
    return parsers.proc_status_kib(Path(f"/proc/{pid}/status").read_text())


def idle_figures(pid: int, settle_s: float) -> IdleFigures:
    """CPU use of `pid` over the next settle_s, then its VmRSS."""
    cpu_before, began = cpu_seconds(pid), time.monotonic()
    time.sleep(settle_s)
    cpu_s, wall_s = cpu_seconds(pid) - cpu_before, time.monotonic() - began
    mem = memory_kib(pid)
    return IdleFigures(idle_rss_kib=mem["VmRSS"], idle_anon_kib=mem.get("RssAnon"),
                       idle_cpu_pct=100.0 * cpu_s / wall_s)
