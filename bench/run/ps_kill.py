"""The workers' side of --kill-ps P@S. A worker that reaches global step S writes its rows,
asks the launcher to kill ps task P and holds until it has, so the failure lands at S and a
fast run cannot end before it."""

from __future__ import annotations

import time

from bench.config import RunConfig
from bench.run.records import RunFolder

HOLD_LIMIT_S = 60.0
POLL_S = 0.02


class PsKillMarkers:
    """The two files of the exchange: a worker's request, the launcher's answer once it has sent SIGKILL."""

    def __init__(self, folder: RunFolder, task: int) -> None:
        where = folder.path / "workers"
        self.requested, self.killed = where / f"ps{task}.kill", where / f"ps{task}.killed"


class PsKillHold:
    """Holds a worker at global step S until the launcher has killed ps task P."""

    def __init__(self, folder: RunFolder, task: int, at_step: int) -> None:
        self.markers, self.task, self.at_step = PsKillMarkers(folder, task), task, at_step
        self.done = False

    @classmethod
    def for_run(cls, config: RunConfig, folder: RunFolder) -> PsKillHold | None:
        plan = config.kill_ps_plan
        return cls(folder, *plan) if plan else None

    def due(self, global_step: int) -> bool:
        return not self.done and global_step >= self.at_step

    def wait(self) -> None:
        """Ask for the kill, return once it is done; a launcher that never kills fails the run, loudly."""
        self.markers.requested.parent.mkdir(exist_ok=True)
        self.markers.requested.touch()
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not self.markers.killed.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"--kill-ps {self.task}@{self.at_step}: the launcher had not killed ps "
                                   f"{self.task} {HOLD_LIMIT_S:.0f} s after global step {self.at_step}")
            time.sleep(POLL_S)
        self.done = True
