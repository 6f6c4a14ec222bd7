"""The workers' side of --kill-ps P@S. The launcher kills ps task P once steps.csv shows global
step S; a worker that reaches S flushes its rows at once and holds until the kill is done, so a
run cannot end before its injected failure (a fast model would otherwise outrun the launcher)."""

from __future__ import annotations

import time
from pathlib import Path

from bench.config import RunConfig
from bench.run.records import RunFolder

HOLD_LIMIT_S = 60.0
POLL_S = 0.02


def killed_marker(folder: RunFolder, task: int) -> Path:
    """The file the launcher creates once it has sent ps task `task` its SIGKILL."""
    return folder.path / "workers" / f"ps{task}.killed"


class PsKillHold:
    """Holds a worker at global step S until the launcher has killed ps task P."""

    def __init__(self, folder: RunFolder, task: int, at_step: int) -> None:
        self.marker, self.task, self.at_step = killed_marker(folder, task), task, at_step
        self.done = False

    @classmethod
    def for_run(cls, config: RunConfig, folder: RunFolder) -> PsKillHold | None:
        plan = config.kill_ps_plan
        return cls(folder, *plan) if plan else None

    def due(self, global_step: int) -> bool:
        return not self.done and global_step >= self.at_step

    def wait(self) -> None:
        """Return once the kill is done; a launcher that never kills fails the run, loudly."""
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not self.marker.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"--kill-ps {self.task}@{self.at_step}: the launcher had not killed ps "
                                   f"{self.task} {HOLD_LIMIT_S:.0f} s after global step {self.at_step}")
            time.sleep(POLL_S)
        self.done = True
