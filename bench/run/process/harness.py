"""Drives one worker: the clock, the step records, evaluation, and the strategy's life cycle.

The strategy does the training; everything timed and written is done here, the
same way for every strategy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.config import RunConfig
from bench.run import data as data_sources
from bench.run import models
from bench.run.contract import StepResult, Strategy, Worker, WorkerContext, local_steps_at, worker_class
from bench.run.faults.injection import FaultInjection
from bench.run.models import tensors
from bench.run.phase import OWN_LIMIT_EXTRA_S, end_after
from bench.run.process.checkpoints import Checkpoints
from bench.run.process.device_wait import device_wait
from bench.run.process.events import RunEvents
from bench.run.process.inputs import load_data, rows_touched
from bench.run.process.lifecycle import exchange_facts, model_facts
from bench.run.process.progress import Progress
from bench.run.process.records import RunFolder
from bench.run.process.stamping import stamped
from bench.run.process.step_log import StepLog
from bench.run.process.tracing import traced_steps


@dataclass
class WorkerOutcome:
    startup_s: float
    local_steps: int
    strategy_info: dict[str, Any]


class Evaluator:
    """Evaluates on the validation split every `eval_every` global steps (chief only)."""

    def __init__(self, config: RunConfig, folder: RunFolder, clock, events: RunEvents) -> None:
        self.every = config.eval_every
        self.folder = folder
        self.clock = clock
        self.events = events
        self.writer = folder.evals_writer()
        self.last_step: int | None = config.resume_step or None

    def due(self, global_step: int) -> bool:
        if not self.every:
            return False
        last = self.last_step or 0
        return global_step // self.every > last // self.every

    def run(self, worker: Worker, split, global_step: int) -> float:
        started = time.perf_counter()
        worker.context.phase("evaluating", f"evaluation at global step {global_step}")
        loss, accuracy = worker.evaluate(split)
        self.writer.write(run_id=self.folder.run_id, global_step=global_step, wall_s=self.clock(),
                          split="val", loss=loss, accuracy=accuracy,
                          eval_s=time.perf_counter() - started)
        self.events.evaluation(global_step, loss, accuracy)
        self.last_step = global_step
        return accuracy

    def close(self) -> None:
        self.writer.close()


def record_model(config: RunConfig, strategy: type[Strategy], folder: RunFolder, model: Any,
                 data: data_sources.Dataset) -> None:
    """The chief's run.json facts of the built model and of the bytes its exchange moves."""
    touched = rows_touched(config, data, 0, config.workers) if model.tables else 0.0
    facts = {**model_facts(model, touched), "forward_flops_per_example": tensors.forward_flops(config)}
    folder.update_run(model={"name": models.label(config.model), **facts},
                      exchange=exchange_facts(config, strategy, facts))


def timed_step(worker: Worker, stamp: bool, clock: Callable[[], float],
               wait: Callable[[], None] | None) -> tuple[float, StepResult, float]:
    """One step between two clock reads: (t_start, its result, t_end), t_end read once `wait` (the device's
    completion, bench.run.process.device_wait) has returned."""
    t_start = clock()
    result = worker.step(stamp)
    if wait is not None:
        wait()
    return t_start, result, clock()


def run_clock(run_start: float) -> Callable[[], float]:
    """Seconds since the run's start (epoch seconds, shared by every process): the epoch is read
    once to align this process with the others, durations come from the monotonic clock."""
    offset = time.time() - time.monotonic()
    return lambda: time.monotonic() + offset - run_start


class StepLoop:
    """The step loop of one worker and what watches it: the step log and its progress line, and
    the observers a run may have (fault injection, the chief's events, evaluator and checkpoints),
    each None when the run has none."""

    def __init__(self, config: RunConfig, strategy_cls: type[Strategy], context: WorkerContext,
                 folder: RunFolder, data: data_sources.Dataset, show_progress: bool) -> None:
        self.clock = run_clock(context.run_start)
        self.steps_out = folder.steps_writer()
        self.log = StepLog(self.steps_out, folder.run_id, context.rank, context.run_start)
        self.progress = Progress(config.steps, f"{config.strategy}/{models.label(config.model)}",
                                 enabled=show_progress and context.is_chief, processes=context.num_workers)
        self.events = RunEvents(folder.path) if context.is_chief else None
        self.evaluator = (Evaluator(config, folder, self.clock, self.events)
                          if self.events and data.val is not None else None)
        self.checkpoints = Checkpoints.for_run(config, folder, self.clock, context.is_chief)
        self.faults = FaultInjection.for_run(config, folder, context.rank,
                                             strategy_cls.runs_as.steps_elsewhere(config))
        self.val = data.val
        self.traces = strategy_cls.traces_exchange
        self.warmup_steps = config.warmup_steps
        self.wait = device_wait()
        # a task started by hand has no launcher to notice that it stopped: it ends itself past its limit
        self.own_limit_s = None if context.supervised else config.stall_timeout_s + OWN_LIMIT_EXTRA_S
        self.phase = context.phase

    def flush(self, now: float) -> None:
        written = self.log.flush(now)
        if written:
            self.progress.update(written.global_step, written.loss, written.examples_per_s)
            if self.events:
                self.events.train(written)

    def run(self, worker: Worker, local_step: int) -> tuple[StepResult, int]:
        """Step until the worker says the run is done: its last result and local step count."""
        clock, faults = self.clock, self.faults
        traced = traced_steps(self.warmup_steps, local_step) if self.traces else range(0)
        self.phase("stepping", "step")
        while True:
            if faults:
                faults.die_if_due(local_step, lambda: self.flush(clock()))
            if traced and local_step == traced.start:
                worker.trace_exchange(traced)
            t_start, result, t_end = timed_step(worker, stamped(local_step) or local_step in traced, clock,
                                                self.wait)
            if traced and local_step == traced[-1]:
                worker.trace_exchange(None)
            slept = 0.0
            if faults:
                t_end, slept = faults.slow_down(local_step, t_start, t_end, clock)
            self.log.add(local_step, t_start, t_end, result, slept)
            if self.own_limit_s is not None:  # a task started by hand: its own clock starts again
                end_after(self.own_limit_s)
            local_step += 1
            if faults and faults.holds_at(result):
                self.flush(t_end)
                faults.hold(result)
            elif self.log.due(t_end):
                self.flush(t_end)
            if self.evaluator and self.evaluator.due(result.global_step):
                accuracy = self.evaluator.run(worker, self.val, result.global_step)
                self.progress.message(f"step {result.global_step}: validation accuracy {accuracy:.4f}")
                self.phase("stepping", "step")
            if worker.finished(result):
                return result, local_step
            if self.checkpoints and self.checkpoints.due(result.global_step, t_end):
                self.phase("saving", f"checkpoint at global step {result.global_step}")
                self.checkpoints.save(worker, result.global_step)
                self.phase("stepping", "step")

    def finish(self, worker: Worker, last: StepResult) -> None:
        """The records of the last steps, the final evaluation and checkpoint."""
        self.flush(self.clock())
        if self.evaluator and self.evaluator.last_step != last.global_step:
            self.evaluator.run(worker, self.val, last.global_step)
        if self.checkpoints:
            self.phase("saving", f"checkpoint at global step {last.global_step}")
            self.checkpoints.save(worker, last.global_step)

    def close(self) -> None:
        try:
            self.log.flush(self.clock())  # what a failed run did is kept
        except OSError:
            pass  # the run's own failure is the one to report
        self.progress.close()
        self.steps_out.close()
        for observer in (self.evaluator, self.events, self.checkpoints):
            if observer:
                observer.close()


def save_weights(worker: Worker, folder: RunFolder, context: WorkerContext) -> None:
    context.phase("saving", "final weights")
    weights = worker.weights()
    np.savez(folder.path / f"weights-worker{context.rank}.npz", *weights)
    if context.is_chief:
        np.savez(folder.path / "weights.npz", *weights)


def run_worker(config: RunConfig, strategy_cls: type[Strategy], context: WorkerContext, folder: RunFolder,
               show_progress: bool = True) -> WorkerOutcome:
    """Train this worker until its strategy says the run is done; write its records."""
    worker = worker_class(strategy_cls)(config, context, strategy_cls)
    local_step = local_steps_at(strategy_cls, config, config.resume_step)  # a resumed run's count goes on
    data = load_data(config, strategy_cls.worker_batch(config), context.rank, first_batch=local_step)
    loop = StepLoop(config, strategy_cls, context, folder, data, show_progress)
    began = loop.clock()
    context.phase("starting")
    end_after(None if context.supervised else config.startup_timeout_s + OWN_LIMIT_EXTRA_S)
    try:
        worker.setup(data)
        if context.is_chief:
            record_model(config, strategy_cls, folder, worker.model, data)
        worker.ready()
        startup_s = loop.clock() - began
        last, local_step = loop.run(worker, local_step)
        worker.last_step_taken()
        loop.finish(worker, last)
        if config.save_weights:
            save_weights(worker, folder, context)
        info = worker.info()
    finally:
        loop.close()
        context.phase("teardown")
        worker.teardown()
    return WorkerOutcome(startup_s, local_step, info)
