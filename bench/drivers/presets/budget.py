"""A comparison sized by a time budget (`--budget`): each throughput run is given its measuring time so
that the whole comparison, start-ups included, ends within the budget; a run measures no longer than
its model's interval needs to reach `--ci-width`; the convergence runs get what the budget leaves.

The sizing is re-planned before every run from what the runs so far cost on this machine (each run's
wall time as the preset saw it, and its training time and steps from its run.json), so an estimate
that was off early is paid for by the runs left, not by the budget. Before the first run a probe
(bench.drivers.presets.probe) gives each model's step time and a run's start-up on this machine.
Steps are fixed when a run starts: every worker of a synchronous run must stop at the same global
step, so the time rule is turned into steps from the step time the runs so far measured."""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.config import DEFAULT_WARMUP_STEPS, default_warmup
from bench.errors import UsageError
from bench.usage import parse_duration

DEFAULT_S = 600.0  # the default comparison's budget: a first look in 10 minutes
DEFAULT_CI_WIDTH = 0.05  # a run measures until its 95% interval's half-width is this share of its throughput
LEAST_MEASURED_STEPS = 30  # ten batch means of three steps each (bench.metrics.MAX_BATCHES, MIN_STEPS_PER_BATCH)
# kept back for the end: the runs' projection to a cluster (bench.drivers.presets.cluster_answer, 2.7 s with its
# Python start on a 2-core AVX2 machine) and the final report (about 3 s at 79 runs there), with room to spare
REPORT_S = 15.0
# Before a pair (strategy, workers) has run on any model, a global step of W workers is taken to cost W
# baseline steps (the cores shared, no gain counted), and, for a strategy of several processes, W
# exchanges of PRIOR_EXCHANGE_S more: a ps or allreduce exchange of mlp's 0.4 MB between processes on one
# host took 1-2 ms a worker batch beyond the baseline's 0.3 ms in the fixed-step comparison at 929938e
# (AMD EPYC, 2 cores, AVX2). Its start-up is the probe's, and PRIOR_STARTUP_PER_WORKER times that more
# per further process. Guesses on the side of caution (a step guessed too long gives a run fewer steps,
# not the budget more time), each replaced by what the runs measure.
PRIOR_EXCHANGE_S = 0.002
# What a strategy adds to W baseline steps, carried from one model to the next: a ratio carried over
# predicted cnn's steps from mlp's 0.56-5.9 times what they took, the time added 0.68-2.5 times, and
# embedding's, from mlp's and cnn's, 0.2-3.3 times with the largest added (0.2-4.7 with 1.5 times it;
# the fixed-step comparison at 929938e on a 2-core AVX2 machine); an embedding step's exchange is the
# largest and least like the others'.
TRANSFER_MARGIN = 1.5
PRIOR_STARTUP_PER_WORKER = 0.8
PRIOR_CONVERGENCE_FACTOR = 1.3  # a convergence run's evaluations on top of its steps
MOST_ROUNDS = 5  # a family cell's rounds at most: from five a setting's spread is its own (verdict.OWN_ROUNDS)


LEAST_BUDGET_S = 30.0  # the probe and a few runs' start-ups take that on 2 cores


STARTED_AT = "DISTBENCH_STARTED_AT"  # the wall clock at which ./run_bench.sh began (its setup's checks come first)


def started_at(clock: Callable[[], float] = time.monotonic) -> float:
    """When a budget's clock started, on `clock`: when ./run_bench.sh began, where it says so (a few seconds of
    its setup's checks and Python's start count too: a user waits for them), else now."""
    now = clock()
    try:
        age = time.time() - float(os.environ[STARTED_AT])
    except (KeyError, ValueError):
        return now
    return now - age if 0 <= age < LEAST_BUDGET_S else now


def parse_budget(text: str) -> float:
    """Seconds from "10m", "90s", "1.5h" or a bare number of seconds; at least LEAST_BUDGET_S."""
    return parse_duration(text, "--budget", LEAST_BUDGET_S)


def parse_ci_width(text: str) -> float:
    """A share from "5%" or "0.05"."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"--ci-width: give a share such as 5% or 0.05, got {text!r}") from None
    if not 0 < value < 1:
        raise UsageError(f"--ci-width: must be in (0, 100%), got {text}")
    return value


@dataclass(frozen=True)
class Sizing:
    """How one run was sized: its steps and the rule that set them; recorded in its run.json."""

    rule: str  # "budget", "ci-width" or "least steps" (the budget left less than the least a run measures)
    steps: int
    warmup_steps: int
    measure_s: float  # the measuring time the budget gave the run
    predicted_step_s: float
    predicted_s: float  # start-up, warm-up and measuring
    budget_s: float
    ci_width: float

    def record(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Cell:
    """What the budget needs to know of a planned run."""

    strategy: str
    model: str
    workers: int
    purpose: str  # "throughput" or "convergence"
    steps: int  # a convergence run's fixed steps; a throughput run's steps without a budget
    baseline: bool  # the strategy that every scaling figure divides by
    processes: bool = True  # a worker per process (else the strategy's workers are towers of one process)
    family: str = ""  # the strategy's family (bench.run.contract)
    first: bool = False  # in its model's family cell: parameter servers against allreduce at its most workers
    answer: str = ""  # a convergence run's part in the answer (bench.run.contract.Strategy.in_convergence_answer)


@dataclass(frozen=True)
class Probed:
    """The probe's figures of this machine (bench.drivers.presets.probe)."""

    step_s: dict[str, float]  # a global step of the baseline at 1 worker, per model
    startup_s: float  # a 1-process run's wall time outside its steps


def global_step_s(summary: dict[str, Any]) -> float | None:
    """A run's measured global step from its summary: examples per global step over its throughput (the
    warm-up's tracing left out); None for a run without them."""
    rate, steps, examples = (summary.get(k) for k in ("throughput_examples_per_s", "global_steps", "examples"))
    return examples / steps / rate if rate and steps and examples else None


@dataclass
class Learned:
    """What the runs so far cost on this machine."""

    # per (strategy, model, workers)
    step_s: dict[tuple[str, str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    startup_s: dict[tuple[str, str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    baselines: set[str] = field(default_factory=set)
    # per model: a run's 95% half-width (a share of its throughput) times the root of its measured steps
    spread: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    convergence_factor: list[float] = field(default_factory=list)


class Budget:
    """Sizes each run of a comparison, in order, so that all of them end within `total_s`."""

    def __init__(self, total_s: float, ci_width: float, probed: Probed, started: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total_s, self.ci_width, self.probed, self.clock = total_s, ci_width, probed, clock
        self.started = clock() if started is None else started
        self.learned = Learned()
        self.spent = {"probe": 0.0, "throughput": 0.0, "convergence": 0.0}

    def left_s(self) -> float:
        return self.total_s - (self.clock() - self.started)

    def base_step_s(self, model: str) -> float:
        """The baseline's global step at 1 worker on `model`: measured, or the probe's."""
        seen = [statistics.median(v) for (s, m, w), v in self.learned.step_s.items()
                if m == model and w == 1 and s in self.learned.baselines]
        return seen[0] if seen else self.probed.step_s[model]

    def step_s(self, cell: Cell) -> float:
        """A global step's predicted time: measured for this cell; else W baseline steps of this model plus
        what this strategy and worker count added to that on the models run so far (the largest, times
        TRANSFER_MARGIN); else the prior."""
        seen = self.learned.step_s.get((cell.strategy, cell.model, cell.workers))
        if seen:
            return statistics.median(seen)
        added = [max(0.0, statistics.median(v) - w * self.base_step_s(m))
                 for (s, m, w), v in self.learned.step_s.items()
                 if (s, w) == (cell.strategy, cell.workers) and m in self.probed.step_s]
        if added:
            return cell.workers * self.base_step_s(cell.model) + TRANSFER_MARGIN * max(added)
        exchange = PRIOR_EXCHANGE_S * cell.workers if cell.processes else 0.0
        return self.base_step_s(cell.model) * cell.workers + exchange

    def startup_s(self, cell: Cell) -> float:
        """A run's wall time outside its measured steps (process start, warm-up, teardown): measured for
        this cell, or for this strategy and worker count on other models, or the prior."""
        seen = (self.learned.startup_s.get((cell.strategy, cell.model, cell.workers))
                or [x for (s, _, w), v in self.learned.startup_s.items() if (s, w) == (cell.strategy, cell.workers)
                    for x in v])
        if seen:
            return statistics.median(seen)
        more = cell.workers if cell.processes and cell.workers > 1 else 0  # its workers and a ps or launcher
        return self.probed.startup_s * (1 + PRIOR_STARTUP_PER_WORKER * more)

    def convergence_s(self, cell: Cell) -> float:
        factor = (statistics.median(self.learned.convergence_factor) if self.learned.convergence_factor
                  else PRIOR_CONVERGENCE_FACTOR)
        return self.startup_s(cell) + factor * cell.steps * self.step_s(cell)

    def steps_for_width(self, model: str) -> float:
        """Measured steps for the model's runs to reach the interval width (inf before any has run)."""
        spread = self.learned.spread.get(model)
        return (statistics.median(spread) / self.ci_width) ** 2 if spread else math.inf

    def size(self, cell: Cell, later: Sequence[Cell]) -> Sizing | None:
        """The run's steps, or None for a convergence run the budget has no room for."""
        left = self.left_s() - REPORT_S
        if cell.purpose == "convergence":
            return self._convergence(cell, left)
        throughput = [cell, *(c for c in later if c.purpose == "throughput")]
        fixed = sum(self.startup_s(c) for c in throughput)
        reserved = sum(self.convergence_s(c) for c in later if c.purpose == "convergence")
        free = left - fixed - reserved  # below the least: the runs measure their least, convergence runs what is left
        measure_s = max(0.0, free / len(throughput))
        step_s = self.step_s(cell)
        by_time, by_width = measure_s / step_s, self.steps_for_width(cell.model)
        measured, rule = (by_width, "ci-width") if by_width < by_time else (by_time, "budget")
        if measured < LEAST_MEASURED_STEPS:
            measured, rule = LEAST_MEASURED_STEPS, ("least steps" if rule == "budget" else rule)
        measured = math.ceil(measured)
        return Sizing(rule, measured + DEFAULT_WARMUP_STEPS, DEFAULT_WARMUP_STEPS, measure_s, step_s,
                      self.startup_s(cell) + measured * step_s, self.total_s, self.ci_width)

    def _convergence(self, cell: Cell, left: float) -> Sizing | None:
        predicted = self.convergence_s(cell)
        if predicted > left:
            return None
        warmup = default_warmup(cell.steps)
        return Sizing("steps", cell.steps, warmup, cell.steps * self.step_s(cell), self.step_s(cell), predicted,
                      self.total_s, self.ci_width)

    def learn(self, cell: Cell, sizing: Sizing, wall_s: float, summary: dict[str, Any]) -> None:
        """What a run that ended cost: its measured global step (examples per global step over its
        throughput: the warm-up's tracing left out), the rest of its wall time as start-up, and its
        interval's width for its steps."""
        self.spent[cell.purpose] += wall_s
        step_s = global_step_s(summary)
        if step_s is None:
            return
        measured = summary["global_steps"] - sizing.warmup_steps
        key = (cell.strategy, cell.model, cell.workers)
        if cell.purpose == "convergence":
            self.learned.convergence_factor.append(max(0.0, wall_s - self.startup_s(cell))
                                                   / (sizing.steps * sizing.predicted_step_s))
            return
        if cell.baseline:
            self.learned.baselines.add(cell.strategy)
        self.learned.step_s[key].append(step_s)
        self.learned.startup_s[key].append(max(0.0, wall_s - measured * step_s))
        half = summary.get("throughput_ci95_examples_per_s")
        if half and measured > 0:
            self.learned.spread[cell.model].append(half / summary["throughput_examples_per_s"] * math.sqrt(measured))

    def least_s(self, cells: Sequence[Cell]) -> float:
        """What `cells` need at the least: their throughput runs' start-ups and least measured steps, and their
        convergence runs' fixed steps."""
        return sum(self.startup_s(c) + LEAST_MEASURED_STEPS * self.step_s(c) if c.purpose == "throughput"
                   else self.convergence_s(c) for c in cells)

    def status(self) -> str:
        """ "(7.2 of 10.0 min budget left)" for the progress line."""
        return f"{max(0.0, self.left_s()) / 60:.1f} of {self.total_s / 60:.1f} min budget left"

    def split(self) -> dict[str, float]:
        """Where the comparison's time went so far: the probe, throughput and convergence runs, the rest."""
        rest = self.clock() - self.started - sum(self.spent.values())
        return {**{k: round(v, 1) for k, v in self.spent.items()}, "between runs": round(rest, 1),
                "budget": self.total_s}
