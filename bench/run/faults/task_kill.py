"""The trainer's side of a kill the launcher does: --kill-ps P@S (ps task P at global step S), and
--kill-worker W@S where a worker task only serves (ps-coordinator: its steps are functions the
coordinator schedules there). The process that sees step S reached writes its rows, asks the
launcher to kill the task and holds until it has, so the failure lands at S and a fast run cannot
end before it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bench.config import RunConfig
from bench.run.contract import StepResult

if TYPE_CHECKING:
    from bench.run.process.records import RunFolder

HOLD_LIMIT_S = 60.0
POLL_S = 0.02


class KillMarkers:
    """The two files of the exchange: the request, the launcher's answer once it has sent SIGKILL."""

    def __init__(self, folder: RunFolder, role: str, task: int) -> None:
        where = folder.path / "workers"
        self.requested, self.killed = where / f"{role}{task}.kill", where / f"{role}{task}.killed"


class KillHold:
    """Holds the trainer at step S until the launcher has killed the task."""

    def __init__(self, folder: RunFolder, role: str, task: int, at_step: int) -> None:
        self.markers, self.role, self.task, self.at_step = KillMarkers(folder, role, task), role, task, at_step
        self.done = False

    @classmethod
    def for_ps(cls, config: RunConfig, folder: RunFolder) -> KillHold | None:
        plan = config.kill_ps_plan
        return cls(folder, "ps", *plan) if plan else None

    @classmethod
    def for_serving_worker(cls, config: RunConfig, folder: RunFolder) -> KillHold | None:
        plan = config.kill_plan
        return cls(folder, "worker", *plan) if plan else None

    def due(self, result: StepResult) -> bool:
        """A ps at the run's global step S; a serving worker at its own step S (where the step ran)."""
        if self.done:
            return False
        if self.role == "ps":
            return result.global_step >= self.at_step
        ran_on = result.ran_on
        return ran_on is not None and ran_on.worker == self.task and ran_on.local_step + ran_on.steps >= self.at_step

    def wait(self) -> None:
        """Ask for the kill, return once it is done; a launcher that never kills fails the run, loudly."""
        self.markers.requested.parent.mkdir(exist_ok=True)
        self.markers.requested.touch()
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not self.markers.killed.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"killing {self.role} {self.task} at step {self.at_step}: the launcher had not "
                                   f"done it {HOLD_LIMIT_S:.0f} s after")
            time.sleep(POLL_S)
        self.done = True
