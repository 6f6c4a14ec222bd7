"""What a run injects into one worker's steps, in one place: its death at a local step
(--kill-worker W@S), a straggler's slower steps (--straggler, --straggler-random), and the hold
at the global step where a ps task is killed (--kill-ps P@S, bench.run.ps_kill)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from bench.config import RunConfig
from bench.run.ps_kill import PsKillHold
from bench.run.records import RunFolder


class FaultInjection:
    def __init__(self, config: RunConfig, rank: int, ps_kill: PsKillHold | None) -> None:
        self.config, self.rank, self.ps_kill = config, rank, ps_kill
        plan = config.kill_plan
        self.kill_at = plan[1] if plan and plan[0] == rank else None
        self.slowed = config.straggler is not None or config.straggler_random is not None

    @classmethod
    def for_run(cls, config: RunConfig, folder: RunFolder, rank: int) -> FaultInjection | None:
        """None when nothing is injected into this worker: its steps then pay one test of None."""
        faults = cls(config, rank, PsKillHold.for_run(config, folder))
        return faults if faults.kill_at is not None or faults.slowed or faults.ps_kill else None

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

    def holds_at(self, global_step: int) -> bool:
        return bool(self.ps_kill and self.ps_kill.due(global_step))

    def hold(self) -> None:
        """Until the launcher has killed the ps task (bench.run.ps_kill)."""
        self.ps_kill.wait()
