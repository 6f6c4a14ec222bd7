"""What a run injects into one trainer's steps, in one place: a worker's death at its local step
(--kill-worker W@S), a straggler's slower steps (--straggler, --straggler-random), and the holds
while the launcher kills a task at the step it was asked for (--kill-ps P@S; --kill-worker W@S
where the workers only serve, bench.run.faults.task_kill)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.config import RunConfig
from bench.run.contract import StepResult
from bench.run.faults.task_kill import KillHold

if TYPE_CHECKING:
    from bench.run.process.records import RunFolder


class FaultInjection:
    def __init__(self, config: RunConfig, rank: int, holds: list[KillHold], steps_elsewhere: bool) -> None:
        self.config, self.rank, self.holds = config, rank, holds
        plan = config.kill_plan
        self.kill_at = plan[1] if plan and plan[0] == rank and not steps_elsewhere else None
        self.slowed = config.straggler is not None or config.straggler_random is not None

    @classmethod
    def for_run(cls, config: RunConfig, folder: RunFolder, rank: int,
                steps_elsewhere: bool = False) -> FaultInjection | None:
        """None when nothing is injected into this trainer: its steps then pay one test of None.
        `steps_elsewhere`: its steps run on worker tasks that only serve, which the launcher kills."""
        holds = [KillHold.for_ps(config, folder), KillHold.for_serving_worker(config, folder) if steps_elsewhere
                 else None]
        faults = cls(config, rank, [h for h in holds if h], steps_elsewhere)
        return faults if faults.kill_at is not None or faults.slowed or faults.holds else None

    def die_if_due(self, local_step: int, flush: Callable[[], None]) -> None:
        """SIGKILL this worker at its step S, once the rows before it are written."""
        if local_step == self.kill_at:
            flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def slow_down(self, local_step: int, t_start: float, t_end: float,
                  clock: Callable[[], float]) -> tuple[float, float]:
        """(the step's end, seconds slept): a straggler's step takes `slowdown` times its measured time."""
        slowdown = self.config.slowdown(self.rank, local_step) if self.slowed else 1.0
        if slowdown <= 1:
            return t_end, 0.0
        time.sleep((slowdown - 1) * (t_end - t_start))
        now = clock()
        return now, now - t_end

    def holds_at(self, result: StepResult) -> bool:
        return any(hold.due(result) for hold in self.holds)

    def hold(self, result: StepResult) -> None:
        """Until the launcher has killed each task due at this step (bench.run.faults.task_kill)."""
        for hold in self.holds:
            if hold.due(result):
                hold.wait()
