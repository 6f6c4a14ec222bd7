"""Faults the launcher injects itself, when a trainer reaches the step and asks for it
(bench.run.faults.task_kill): --kill-ps P@S, and --kill-worker W@S where the worker tasks only serve
(ps-coordinator's). (Any other --kill-worker is the worker's own doing, in bench.run.faults.injection.)"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.config import RunConfig
from bench.run.faults.task_kill import KillMarkers

if TYPE_CHECKING:
    from bench.run.launch.processes import Child
    from bench.run.process.records import RunFolder

# A SIGKILLed TensorFlow task is reaped in ~50-70 ms on a quiet 2-core machine (measured); the bound
# only keeps a task stuck in the kernel from holding the supervisor's poll for ever.
REAP_LIMIT_S = 10.0


def kill_watch(config: RunConfig, folder: RunFolder, serving: dict[str, list[Child]]) -> Callable[[], None] | None:
    """For the supervisor's polls: SIGKILL the task a trainer asked to be killed, once. `serving`:
    the tasks of the roles that do not train, by role (read at each poll: a restarted task's
    replacement is not killed again)."""
    plans = {"ps": config.kill_ps_plan, "worker": config.kill_plan}
    asked = [(role, plan[0], KillMarkers(folder, role, plan[0])) for role, plan in plans.items()
             if plan and role in serving]
    if not asked:
        return None

    def watch() -> None:
        for role, task, markers in asked:
            victim = serving[role][task]
            if markers.requested.exists() and not markers.killed.exists() and not victim.exited:
                print(f"{folder.run_id}: killing {role} {task} (--kill-{role})", file=sys.stderr, flush=True)
                victim.process.send_signal(signal.SIGKILL)
                # the trainer goes on once `killed` exists: answering only once the task is reaped lets
                # the supervisor see the kill before the failures it brings about (CI once named the
                # chief's consequent error as the cause, the ps not yet reaped when the chief had exited)
                try:
                    victim.process.wait(timeout=REAP_LIMIT_S)
                except subprocess.TimeoutExpired:
                    pass
                markers.killed.touch()

    return watch
