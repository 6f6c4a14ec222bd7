"""`python -m bench all`: the default comparison.

Every registered strategy at 1, 2 and 4 workers on mlp, cnn and embedding with synthetic
data (throughput; Zipf-drawn ids for embedding), plus one convergence run of each
strategy on the teacher task (bench.run.data.teacher); each run in a process of its own;
then the report. A run that fails is recorded and the matrix goes on. By default a
strategy of several processes runs at 2 and 4 only (its 1-process run measures its
machinery, not scaling, whose baseline is the 1-worker run of the baseline strategy);
--full or --workers runs it at 1 too.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.config import default_warmup
from bench.drivers.presets import budget, cluster_answer
from bench.drivers.presets.budgeted import BudgetedRuns
from bench.drivers.presets.probe import probe
from bench.drivers.presets.runner import refused_cells, run_all
from bench.errors import UsageError
from bench.infra import peak
from bench.run import models as known_models
from bench.run.contract import ALLREDUCE, IN_PROCESS, PARAMETER_AVERAGING, PARAMETER_SERVER
from bench.run.data import SYNTHETIC
from bench.run.launch.slurm import srun
from bench.run.validation import model_refusal
from bench.usage import OneLineParser, refuse
from strategies import registry

DEFAULT_WORKERS = (1, 2, 4)
DEFAULT_MODELS = ("mlp", "cnn", "embedding")
CONVERGENCE = {"model": "mlp", "data": "teacher", "workers": 2, "eval_every": 100}
CONVERGENCE_STEPS = 2500  # single reaches the teacher task's target after 1,000-2,000
# a budgeted comparison's convergence runs per strategy: the fewest whose spread says whether a lead holds
# (bench.analysis.report.convergence_answer); each of the answer's 5 takes 4-32 s on 2 cores (docs/convergence.md)
CONVERGENCE_SEEDS = 2
# throughput steps per model: enough measured time for a small model's sub-millisecond steps
# (--full, and the network preset: cnn 100; the default's 60 keeps cnn's median 95% interval
# under 4% of its throughput, docs/presets.md)
FULL_STEPS = {"mlp": 500, "cnn": 100, "resnet20": 40, "embedding": 200}
DEFAULT_STEPS = {**FULL_STEPS, "cnn": 60}
# The baseline's 1-worker run divides every scaling figure of its model. One run of it was one
# draw: in a default comparison, mirrored at 1 replica came out 1.16x single on cnn, while 6
# alternated pairs of the two measured a median 0.92 (0.89-1.09; docs/micro-benchmarks.md, "The
# baseline at its best"). At least this many runs of it per model, spread over the model's runs,
# give the median the report divides by (report.aggregate.baseline_throughput) and an interval.
BASELINE_REPEATS = 3


@dataclass(frozen=True)
class Planned:
    strategy: str
    model: str
    data: str
    workers: int
    steps: int
    purpose: str  # "throughput" or "convergence"
    seed: int | None = None  # a convergence repeat's seed (None: the run's default)
    first: bool = False  # in its model's family cell, run before the rest (family_cells_first)

    def argv(self, batch_size: int, extra: Sequence[str]) -> list[str]:
        name = f"{self.purpose}-{self.strategy}-{known_models.label(self.model)}-w{self.workers}"
        args = ["--strategy", self.strategy, "--model", self.model, "--data", self.data,
                "--workers", str(self.workers), "--steps", str(self.steps),
                "--warmup-steps", str(default_warmup(self.steps)),
                "--batch-size", str(batch_size)]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
            name += f"-s{self.seed}"
        args += ["--run-name", name, "--purpose", self.purpose]
        if self.purpose == "convergence":
            args += ["--eval-every", str(CONVERGENCE["eval_every"])]
        else:
            args += ["--eval-every", "0"]
        return [*args, *own_flags(self.strategy, extra)]


def own_flags(strategy: str, extra: Sequence[str]) -> list[str]:
    """The extra flags, less the options of other strategies (a run would refuse them): each
    option takes one value, as `--flag V` or `--flag=V`."""
    foreign = {opt.flag for opt in registry.others_options(strategy)}
    out, tokens = [], iter(extra)
    for token in tokens:
        if token.split("=", 1)[0] in foreign:
            if "=" not in token:
                next(tokens, None)
            continue
        out.append(token)
    return out


def worker_counts(strategy: str, wanted: Sequence[int], one_process_runs: bool = True) -> list[int]:
    """The wanted counts the strategy runs with; a strategy that runs with none of them (single
    takes 1) runs at its smallest count, as the baseline. Without `one_process_runs`, a strategy
    of several processes leaves out its 1-worker run where it has others."""
    declared = registry.get(strategy)
    low, high = declared.worker_range
    counts = [n for n in wanted if low <= n and (high is None or n <= high)] or [low]
    if not one_process_runs and declared.runs_as.kind != IN_PROCESS and len(counts) > 1:
        counts = [n for n in counts if n > 1]
    return counts


def plan(strategies: Sequence[str], models: Sequence[str], workers: Sequence[int], steps: int | None,
         convergence_steps: int, repeats: int, convergence_workers: int | None = None,
         per_model: dict[str, int] = DEFAULT_STEPS, one_process_runs: bool = True,
         rounds: int | None = None, family_first: bool = False, seeds: int | None = None) -> list[Planned]:
    """Throughput runs in `rounds` rounds (default: `repeats`), a cell's strategies one after the other (model,
    then worker count, then strategy: a slow drift of the machine touches every strategy of a cell alike), their
    order reversed in every other round (A B C, C B A: a steady drift adds the same to each strategy's mean);
    the baseline's 1-worker run at least BASELINE_REPEATS times, the extra runs spread through its model's last
    round; convergence runs, one per seed 0..`seeds`-1 (default: `repeats`) (convergence_runs). A strategy that
    cannot train a model (bench.run.validation.model_refusal) has no runs of it (runner.refused_cells).
    `family_first` (a budgeted comparison): every model's family cell first (family_cells_first), then the
    convergence runs of the answer, then the rest."""
    rounds = repeats if rounds is None else rounds
    runs = []
    for round_ in range(rounds):
        order = list(strategies) if round_ % 2 == 0 else list(reversed(strategies))
        for model in models:
            counts = {strategy: worker_counts(strategy, workers, one_process_runs) for strategy in order
                      if not model_refusal(model, registry.get(strategy), registry.all_strategies())}
            n_steps = steps or per_model.get(model, 100)
            data = SYNTHETIC[known_models.reads(model)]
            block = [Planned(strategy, model, data, n, n_steps, "throughput")
                     for n in sorted({n for mine in counts.values() for n in mine})
                     for strategy in counts if n in counts[strategy]]
            if round_ == rounds - 1:
                block = with_baseline_repeats(block, BASELINE_REPEATS - rounds)
            runs += block
    seeds = repeats if seeds is None else seeds
    converging = convergence_runs(strategies, convergence_steps, seeds, convergence_workers,
                                  workers if family_first else None) if convergence_steps else []
    if not family_first:
        return runs + converging
    cells, rest = family_cells_first(runs)
    return cells + converging + rest


def convergence_runs(strategies: Sequence[str], steps: int, seeds: int, workers: int | None,
                     answer_workers: Sequence[int] | None = None) -> list[Planned]:
    """One convergence run of each strategy per seed on the teacher task, seed after seed (a comparison cut short
    has each strategy's first). `answer_workers` (a budgeted comparison, whose answer they are part of): only the
    strategies declared in the time-to-accuracy answer (Strategy.in_convergence_answer), each at the most of these
    it runs with, as its family cell; else every strategy, at `workers` (default CONVERGENCE's)."""
    runs = []
    for seed in range(seeds):
        for strategy in strategies:
            if answer_workers is not None and not registry.get(strategy).in_convergence_answer:
                continue
            if answer_workers is not None and workers is None:
                n = worker_counts(strategy, answer_workers, one_process_runs=False)[-1]
            else:
                n = worker_counts(strategy, [workers or CONVERGENCE["workers"]])[0]
            runs.append(Planned(strategy, CONVERGENCE["model"], CONVERGENCE["data"], n, steps, "convergence",
                                seed if seeds > 1 else None))
    return runs


# the families the suite's question sets against each other, and averaging, whose fastest the convergence answer runs
FAMILY_CELL = (PARAMETER_SERVER, ALLREDUCE, PARAMETER_AVERAGING)


def family_cells_first(runs: list[Planned]) -> tuple[list[Planned], list[Planned]]:
    """The first round's runs of each model's family cell, model after model, marked `first`: its baseline's
    1-worker run (what the projection to a cluster calibrates its compute from) and its parameter-server,
    allreduce and averaging strategies at its most workers; and the rest in their order. Where a budget cannot
    hold every run, every model keeps its family verdict (bench.drivers.presets.budgeted)."""
    most = {}
    for run in runs:
        if run.purpose == "throughput" and registry.get(run.strategy).family in FAMILY_CELL:
            most[run.model] = max(most.get(run.model, 0), run.workers)

    def in_cell(run: Planned) -> bool:
        if run.purpose != "throughput" or run.model not in most:
            return False
        if run.workers == 1 and registry.is_baseline(run.strategy):
            return True
        return most[run.model] == run.workers and registry.get(run.strategy).family in FAMILY_CELL

    seen, cells, rest = set(), [], []
    for run in runs:
        key = (run.strategy, run.model, run.workers)
        if in_cell(run) and key not in seen:
            seen.add(key)
            cells.append(replace(run, first=True))
        else:
            rest.append(run)
    cells.sort(key=lambda run: list(most).index(run.model))  # stable: a model's baseline, then its cell
    return cells, rest


def with_baseline_repeats(block: list[Planned], extra: int) -> list[Planned]:
    """A model's runs with `extra` more runs of its 1-worker baseline, at even intervals among them."""
    base = next((run for run in block if run.workers == 1 and registry.is_baseline(run.strategy)), None)
    if base is None or extra < 1:
        return block
    out = list(block)
    for i in range(extra, 0, -1):
        out.insert(round(len(block) * i / (extra + 1)), base)
    return out


def _names(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench all", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategies", type=_names, default=None, help="comma-separated (default: every registered)")
    p.add_argument("--workers", type=lambda t: [int(v) for v in _names(t)], default=None,
                   help="comma-separated worker counts (default: 1,2,4; a strategy of several processes at "
                        "2,4 unless --full)")
    p.add_argument("--models", type=_names, default=list(DEFAULT_MODELS), help="default: mlp,cnn,embedding")
    p.add_argument("--steps", type=int, default=None,
                   help="global steps of each throughput run (default: "
                        f"{', '.join(f'{m} {n}' for m, n in DEFAULT_STEPS.items())})")
    p.add_argument("--full", action="store_true",
                   help="longer throughput runs, for narrower intervals: "
                        f"{', '.join(f'{m} {n}' for m, n in FULL_STEPS.items())} steps; and every strategy at "
                        "1 worker too")
    p.add_argument("--convergence-steps", type=int, default=CONVERGENCE_STEPS,
                   help=f"steps of each convergence run on {CONVERGENCE['data']}; 0 leaves them out "
                        f"(default: {CONVERGENCE_STEPS})")
    p.add_argument("--convergence-workers", type=int, default=None,
                   help=f"workers of each convergence run (default: {CONVERGENCE['workers']}; with --budget, the "
                        "family cells' most)")
    p.add_argument("--batch-size", type=int, default=64, help="per worker (default: 64)")
    p.add_argument("--repeats", type=int, default=None,
                   help="rounds of the throughput runs (each round every setting once, a cell's strategies one after "
                        "the other), and convergence runs of each strategy with seeds 0..N-1 (default: 1; with "
                        f"--budget, as many rounds as the budget fits, and {CONVERGENCE_SEEDS} seeds)")
    p.add_argument("--output", default="results", help="(default: results)")
    p.add_argument("--timeout-s", type=float, default=600, help="longest a single run may take (default: 600)")
    p.add_argument("--budget", default=None,
                   help="size every run by time so that the whole comparison ends within this (10m, 90s, 600; "
                        f"'default': {budget.DEFAULT_S / 60:.0f}m, what ./run_bench.sh alone gives): a probe of the "
                        "machine first, then each run measures what the budget leaves it, no longer than its "
                        "interval needs (--ci-width); without it, fixed steps (--steps)")
    p.add_argument("--profile", default=None,
                   help="transport profile the runs are projected to a cluster with at the end (a file, or a shipped "
                        "name; default: the one ./run_bench.sh profile wrote into --output, else python -m bench "
                        "project's default)")
    p.add_argument("--ci-width", default=f"{budget.DEFAULT_CI_WIDTH:.0%}",
                   help="with --budget: a run measures no longer than its model's 95%% interval needs to be within "
                        "this share of its throughput (default: %(default)s)")
    return p


def validate(args: argparse.Namespace) -> None:
    known = registry.all_strategies()
    args.strategies = args.strategies or sorted(known)
    for name in args.strategies:
        registry.get(name)
    args.models = [known_models.resolve(name) for name in args.models]
    for name in args.models:
        known_models.check(name)
    args.one_process_runs = args.full or args.workers is not None
    args.workers = list(DEFAULT_WORKERS) if args.workers is None else args.workers
    if not args.workers or min(args.workers) < 1:
        raise UsageError("--workers: give positive worker counts, e.g. 1,2,4")
    args.rounds_given = args.repeats
    args.repeats = 1 if args.repeats is None else args.repeats
    for flag, value in (("--repeats", args.repeats), ("--batch-size", args.batch_size),
                        ("--convergence-workers", args.convergence_workers)):
        if value is not None and value < 1:
            raise UsageError(f"{flag}: must be >= 1, got {value}")
    if args.steps is not None and args.steps < 5:
        raise UsageError("--steps: a throughput run needs at least 5 steps")
    if args.budget is not None:
        if args.steps is not None or args.full:
            raise UsageError("--budget sizes each run's steps by time: leave out --steps and --full, or --budget")
        args.budget = budget.DEFAULT_S if args.budget == "default" else budget.parse_budget(args.budget)
    args.ci_width = budget.parse_ci_width(args.ci_width)
    if args.profile is not None:
        from bench.analysis.projection import profile

        profile.load(args.profile)  # refused now, not after the runs
    if srun.in_allocation():
        args.workers = srun.counts_that_fit(args.workers, "--workers")
        if args.convergence_workers is not None:
            args.convergence_workers = srun.counts_that_fit([args.convergence_workers], "--convergence-workers")[0]


def convergence_seeds(args: argparse.Namespace) -> int:
    """--repeats where given; else CONVERGENCE_SEEDS with --budget (its answer weighs seeds), 1 without."""
    return args.rounds_given or (CONVERGENCE_SEEDS if args.budget is not None else 1)


def measure_peak_once() -> None:
    """This machine's peak FLOP/s, measured once (a few seconds) where none is recorded, so that every
    run of the comparison has its MFU (bench.run.process.utilization); a failure only leaves it unknown."""
    if peak.read() is not None:
        return
    print("compare: measuring this machine's peak FLOP/s once (./run_bench.sh peak)", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "bench", "peak", "--rounds", "3"], check=False)


def probed_budget(runs: Sequence[Planned], args: argparse.Namespace, began: float,
                  extra: Sequence[str] = ()) -> budget.Budget:
    """The --budget after the probe of this machine (with the runs' own flags, `extra`); its clock started at
    `began` (the peak's measurement, where one was made, and the probe come out of it)."""
    models = list(dict.fromkeys((run.model, run.data) for run in runs if run.purpose == "throughput"))
    probed = probe(registry.baseline(), models, args.batch_size, args.timeout_s, Path(args.output), extra)
    within = budget.Budget(args.budget, args.ci_width, probed, started=began)
    within.spent["probe"] = time.monotonic() - began
    return within


def cells(runs: Sequence[Planned]) -> list[budget.Cell]:
    return [budget.Cell(run.strategy, run.model, run.workers, run.purpose, run.steps,
                        registry.is_baseline(run.strategy), registry.get(run.strategy).runs_as.kind != IN_PROCESS,
                        registry.get(run.strategy).family, run.first,
                        registry.get(run.strategy).in_convergence_answer if run.purpose == "convergence" else "")
            for run in runs]


def main(argv: Sequence[str]) -> int:
    args, extra = parser().parse_known_args(list(argv))
    try:
        validate(args)
    except UsageError as exc:
        return refuse(exc)
    began = budget.started_at()
    measure_peak_once()

    def planned(rounds: int | None = None) -> list[Planned]:
        return plan(args.strategies, args.models, args.workers, args.steps, args.convergence_steps, args.repeats,
                    args.convergence_workers, FULL_STEPS if args.full else DEFAULT_STEPS, args.one_process_runs,
                    rounds, family_first=args.budget is not None, seeds=convergence_seeds(args))

    runs, sizer = planned(), None
    refused = refused_cells((strategy, model) for model in args.models for strategy in args.strategies)
    if args.budget is not None:
        within = probed_budget(runs, args, began, extra)
        sizer = BudgetedRuns(cells(runs), within, more_rounds=args.rounds_given is None)
    return run_all("compare", [(f"{run.purpose}: {run.strategy} {known_models.label(run.model)} x{run.workers}",
                                run.argv(args.batch_size, extra)) for run in runs], Path(args.output), args.timeout_s,
                   refused=refused, sizer=sizer,
                   before_report=lambda folder: cluster_answer.project(folder, Path(args.output), args.profile))
