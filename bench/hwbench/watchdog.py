"""The watchdog: a process of its own, started by processes.start_watchdog as
`python -m hwbench.watchdog PARENT LIVE_FILE keep|remove`. Once PARENT (the benchmark) is
gone, however it went, it SIGKILLs the children PARENT had listed in LIVE_FILE that are
still the same processes, and removes the work dir (LIVE_FILE's) unless told to keep it.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

from .processes import start_time

POLL_S = 0.2


def watch(parent: int, live_file: Path, remove_work_dir: bool) -> int:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    try:
        entries = [line.split() for line in live_file.read_text().splitlines()]
    except OSError:
        return 0
    for pid, started in entries:
        try:
            if start_time(int(pid)) == started:
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    live_file.unlink(missing_ok=True)
    if remove_work_dir:
        shutil.rmtree(live_file.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "remove"))
