"""Watches the processes of one run and decides how it ends.

The run is ok when every worker has finished (a non-chief worker may be lost if the
strategy tolerates it, or restarted into the run with --recover); it fails at once when a
process dies that the run cannot do without, or when no step has been recorded for
`stall_timeout_s` (counted from the first step, and from a restart), or no first step within
`startup_timeout_s`. On any end, every process is ended before this returns.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.config import RunConfig
from bench.run.launch.hang import stuck_line
from bench.run.launch.interrupts import Interrupted, interruptible
from bench.run.launch.processes import Child, end_all
from bench.run.process.records import STEPS_FILE, RunFolder

POLL_S = 0.1
# One death brings others down (a ring or a sync barrier breaks): processes that end within this
# long of the first are weighed together to name the cause.
CAUSE_GRACE_S = 1.0


def steps_written(folder: RunFolder):
    """Progress probe for the supervisor: the size of steps.csv grows with every step."""
    path = folder.path / STEPS_FILE
    return lambda: path.stat().st_size


@dataclass
class Outcome:
    status: str
    lost_workers: list[str] = field(default_factory=list)
    ended_after_failure_s: float | None = None
    consequences: list[str] = field(default_factory=list)  # other failures the cause brought about
    failed_at_epoch_s: float | None = None  # when the failure was seen
    hang: dict | None = None  # a hung run's account (bench.run.launch.hang), taken before anything was ended


class ExitLog:
    """When each child was first seen to have exited (polled, so to within POLL_S).

    One poll's decisions (restart, fail, done) read what `observe` saw, never the processes
    again: a worker that died between the restart pass and the failure pass of one poll was
    once failed as a death no restart was tried for."""

    def __init__(self, children: list[Child]) -> None:
        self.children = children
        self.seen: dict[str, float] = {}

    def observe(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.name not in self.seen and child.exited:
                self.seen[child.name] = now

    def saw(self, child: Child) -> bool:
        """Whether `child` had exited at the last `observe` (a replacement's name is cleared from
        `seen` when it takes the dead child's place)."""
        return child.name in self.seen

    def cause_and_consequences(self, failed: list[Child]) -> tuple[Child, list[Child]]:
        """The cause among `failed`: a death by signal before an exit with an error status (a
        process that exits by itself usually does so because another died), then the earliest."""
        self.observe()
        ranked = sorted(failed, key=lambda c: (c.killed_by() is None, self.seen.get(c.name, math.inf)))
        return ranked[0], ranked[1:]


@dataclass
class Restarts:
    """Restarting a dead non-chief worker into the running job: `start(rank, why)` starts its
    replacement; at most `left` times in the run."""

    start: Callable[[int, str], Child]
    left: int


def supervise(workers: list[Child], helpers: list[Child], tolerate_loss: bool,
              progress: Callable[[], int], stall_timeout_s: float, restarts: Restarts | None = None,
              watch: Callable[[], None] | None = None,
              startup_timeout_s: float = RunConfig.startup_timeout_s,
              serving_workers: list[Child] | None = None,
              on_hang: Callable[[list[Child]], dict] | None = None) -> Outcome:
    """`workers` train, `workers[0]` is the chief; `helpers` (ps tasks) serve and are ended after the
    workers. `serving_workers`: worker tasks among the helpers that run the steps a trainer schedules
    (ps-coordinator's), by rank: the loss rule and the restarts apply to each of them, not to
    `workers[1:]`. `watch` is called on every poll (an injected fault watches the run's progress). `on_hang`
    gives a stalled run's account while its processes still live (bench.run.launch.hang.hang_account)."""
    losable = LosableWorkers(workers, helpers, serving_workers)
    everyone = workers + helpers
    exits = ExitLog(everyone)
    lost: list[str] = []
    last_progress, last_change = progress(), time.monotonic()
    stepping = False
    with interruptible():
        try:
            while True:
                exits.observe()
                if watch:
                    watch()
                if restarts and _restart_dead(losable, restarts, exits):
                    everyone = workers + helpers
                    # the replacement starts up before it steps: a synchronous run waits for it
                    last_change, stepping = time.monotonic(), False
                failure = _failure(workers, helpers, losable, tolerate_loss, lost, exits)
                if failure:
                    return _fail_with_cause(failure, exits, workers, lost)
                if all(exits.saw(w) for w in workers):
                    # a ps lingers after the last done token for workers still closing their
                    # sessions; once every worker has exited, nothing is left for it to serve
                    end_all(helpers)
                    return Outcome("ok", lost)
                current = progress()
                if current != last_progress:
                    last_progress, last_change, stepping = current, time.monotonic(), True
                elif stepping and time.monotonic() - last_change > stall_timeout_s:
                    return _fail(f"no step recorded for {stall_timeout_s:.0f} s (hung)", everyone, lost, on_hang)
                elif not stepping and time.monotonic() - last_change > startup_timeout_s:
                    return _fail(f"no step recorded within {startup_timeout_s:.0f} s of the start (hung at start-up, "
                                 "or a large graph still building on a busy machine: raise --startup-timeout-s)",
                                 everyone, lost, on_hang)
                time.sleep(POLL_S)
        except Interrupted as exc:
            end_all(everyone)
            return Outcome(f"interrupted ({exc})", lost)


class LosableWorkers:
    """The worker tasks a run may lose (or restart), by rank: the trainers but the chief, or the
    worker tasks that serve a trainer's steps; a replacement takes its place in every list."""

    def __init__(self, workers: list[Child], helpers: list[Child], serving: list[Child] | None) -> None:
        self.by_rank = serving if serving is not None else workers
        self.first = 0 if serving is not None else 1  # workers[0] is the chief, never lost
        self.lists = [workers, helpers] if serving is None else [workers, helpers, serving]

    def ranks(self) -> list[tuple[int, Child]]:
        return list(enumerate(self.by_rank))[self.first:]

    def __contains__(self, child: Child) -> bool:
        return child in self.by_rank[self.first:]

    def replace(self, rank: int, replacement: Child) -> None:
        old = self.by_rank[rank]
        for group in self.lists:
            if old in group:
                group[group.index(old)] = replacement


def _restart_dead(losable: LosableWorkers, restarts: Restarts, exits: ExitLog) -> bool:
    """Replace each dead losable worker (in every list and in `exits`) while restarts are left."""
    replaced = False
    for rank, worker in losable.ranks():
        if restarts.left <= 0 or not exits.saw(worker) or worker.process.returncode == 0:
            continue
        replacement = restarts.start(rank, worker.describe_exit())
        losable.replace(rank, replacement)
        restarts.left -= 1
        exits.children[exits.children.index(worker)] = replacement
        exits.seen.pop(worker.name, None)
        replaced = True
    return replaced


def _failure(workers: list[Child], helpers: list[Child], losable: LosableWorkers, tolerate_loss: bool,
             lost: list[str], exits: ExitLog) -> str | None:
    for task in [*workers, *helpers]:
        if not exits.saw(task) or task.process.returncode == 0 or task.name in lost:
            continue
        if task in losable and tolerate_loss:
            lost.append(task.name)
        elif task in workers:
            return task.describe_exit()
        elif not all(exits.saw(w) for w in workers):  # a ps exits 0 by itself once every worker said it is done
            return f"{task.describe_exit()} while workers were still training"
    return None


def _fail_with_cause(first_seen: str, exits: ExitLog, workers: list[Child], lost: list[str]) -> Outcome:
    """Wait CAUSE_GRACE_S for the failure's consequences to show, name the cause, end everyone."""
    started, seen_at = time.monotonic(), time.time()
    while time.monotonic() - started < CAUSE_GRACE_S:
        exits.observe()
        time.sleep(POLL_S)
    training = not all(w.exited and w.process.returncode == 0 for w in workers)
    failed = [c for c in exits.children if c.exited and c.process.returncode != 0 and c.name not in lost
              and (c in workers or training)]
    if not failed:
        end_all(exits.children)
        return Outcome(f"failed: {first_seen}", lost, ended_after_failure_s=time.monotonic() - started,
                       failed_at_epoch_s=seen_at)
    cause, consequences = exits.cause_and_consequences(failed)
    reason = cause.describe_exit() + ("" if cause in workers else " while workers were still training")
    end_all(exits.children)
    return Outcome(f"failed: {reason}", lost, ended_after_failure_s=time.monotonic() - started,
                   consequences=[c.describe_exit() for c in consequences], failed_at_epoch_s=seen_at)


def _fail(reason: str, everyone: list[Child], lost: list[str],
          on_hang: Callable[[list[Child]], dict] | None = None) -> Outcome:
    """A run that stopped making progress: its account first (stacks asked for, phases read), then every
    process ended."""
    started, seen_at = time.monotonic(), time.time()
    hang = on_hang(everyone) if on_hang else None
    if hang:
        reason = f"{reason}: {stuck_line(hang)}"
    end_all(everyone)
    return Outcome(f"failed: {reason}", lost, ended_after_failure_s=time.monotonic() - started,
                   failed_at_epoch_s=seen_at, hang=hang)
