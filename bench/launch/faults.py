"""Faults the launcher injects itself (--kill-ps): a process it started, killed once a worker
reaches a global step and asks for it (bench.run.ps_kill). (--kill-worker is the worker's own
doing, in bench.run.harness.)"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

from bench.config import RunConfig
from bench.launch.processes import Child
from bench.run.ps_kill import PsKillMarkers
from bench.run.records import RunFolder


def kill_ps_watch(config: RunConfig, folder: RunFolder, ps_tasks: list[Child]) -> Callable[[], None] | None:
    """For the supervisor's polls: SIGKILL ps task P once a worker is at global step S (--kill-ps P@S)."""
    plan = config.kill_ps_plan
    if plan is None:
        return None
    task, at_step = plan
    markers = PsKillMarkers(folder, task)
    victim = ps_tasks[task]

    def watch() -> None:
        if not victim.exited and markers.requested.exists():
            print(f"{folder.run_id}: killing ps {task} at global step {at_step} (--kill-ps)",
                  file=sys.stderr, flush=True)
            victim.process.send_signal(signal.SIGKILL)
            markers.killed.touch()

    return watch
