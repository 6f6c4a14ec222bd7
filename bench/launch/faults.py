"""Faults the launcher injects itself (--kill-ps): a process it started, killed once the run
reaches a global step; the workers hold there until it is done (bench.run.ps_kill).
(--kill-worker is the worker's own doing, in bench.run.harness.)"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path

from bench.config import RunConfig
from bench.launch.processes import Child
from bench.run.ps_kill import killed_marker
from bench.run.records import STEP_COLUMNS, STEPS_FILE, RunFolder

GLOBAL_STEP = STEP_COLUMNS.index("global_step")


class HighestStep:
    """The highest global step in a growing steps.csv, reading only what was added since last time."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.highest = path, 0, 0

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                added = f.read()
        except OSError:
            return self.highest
        complete = added[: added.rfind(b"\n") + 1]  # a row being written is read next time
        self.offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            field = line.split(",")[GLOBAL_STEP] if line.count(",") >= GLOBAL_STEP else ""
            if field.isdigit():  # the header's is not
                self.highest = max(self.highest, int(field))
        return self.highest


def kill_ps_watch(config: RunConfig, folder: RunFolder, ps_tasks: list[Child]) -> Callable[[], None] | None:
    """For the supervisor's polls: SIGKILL ps task P once the run is at global step S (--kill-ps P@S)."""
    plan = config.kill_ps_plan
    if plan is None:
        return None
    task, at_step = plan
    highest = HighestStep(folder.path / STEPS_FILE)
    victim = ps_tasks[task]

    def watch() -> None:
        if not victim.exited and highest() >= at_step:
            print(f"{folder.run_id}: killing ps {task} at global step {highest.highest} (--kill-ps)",
                  file=sys.stderr, flush=True)
            victim.process.send_signal(signal.SIGKILL)
            marker = killed_marker(folder, task)
            marker.parent.mkdir(exist_ok=True)
            marker.touch()

    return watch
