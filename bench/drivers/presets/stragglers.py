"""`python -m bench stragglers`: what each strategy does with a slow worker and a dead one.

At 4 workers on cnn with synthetic data: ps-async, ps-sync with R = N, ps-sync with one
backup worker (R = N - 1), ps-coordinator, allreduce and allreduce-tf, each clean, with one 3x
straggler, with one worker killed halfway, and with it killed halfway under --recover
(checkpoints every third of the run, where the strategy saves them); the ps strategies also
with ps task 0 killed halfway under --recover. A case a strategy refuses (ps-coordinator's
straggler: its workers only run what the coordinator schedules) is left out and said. Then
convergence pairs on digits (clean and with the straggler) for ps-async and ps-sync. Then the
report, which gains the sections "Stragglers and failures" and "Recovery".
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from bench.config import RunConfig
from bench.drivers.presets.runner import refused_cells, run_all, strategy_of
from bench.errors import UsageError
from bench.run import models
from bench.run.launch.slurm import srun
from bench.run.validation import model_refusal
from bench.usage import OneLineParser, refuse
from strategies import registry

FACTOR = 3.0
STRAGGLER = 1  # never the chief: the chief also evaluates and writes run.json


def variants(workers: int) -> list[tuple[str, list[str], bool]]:
    """(label, arguments, whether it also gets the convergence pair)."""
    return [("ps-async", ["--strategy", "ps-async"], True),
            ("ps-sync R=N", ["--strategy", "ps-sync"], True),
            ("ps-sync R=N-1", ["--strategy", "ps-sync", "--replicas-to-aggregate", str(workers - 1)], False),
            ("ps-coordinator", ["--strategy", "ps-coordinator"], False),
            ("allreduce", ["--strategy", "allreduce"], False),
            ("allreduce-tf", ["--strategy", "allreduce-tf"], False)]


SCENARIOS = ("clean", "straggler", "kill", "recover", "ps-kill")


def plan(workers: int, steps: int, convergence_steps: int, model: str = "cnn",
         chosen: Sequence[str] | None = None, cases: Sequence[str] = SCENARIOS) -> list[tuple[str, list[str]]]:
    return planned(workers, steps, convergence_steps, model, chosen, cases)[0]


def planned(workers: int, steps: int, convergence_steps: int, model: str = "cnn",
            chosen: Sequence[str] | None = None,
            cases: Sequence[str] = SCENARIOS) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The runs, and the cases left out because their strategy refuses them (one line each, why)."""
    runs, refused = [], []
    picked = [v for v in variants(workers) if chosen is None or v[0] in chosen]
    for label, args, _ in picked:
        # halfway through the run: an asynchronous worker does about steps / workers steps of its own
        strategy = registry.get(strategy_of(args))
        if model_refusal(model, strategy, registry.all_strategies()):  # left out, and said (runner.refused_cells)
            continue
        halfway = steps // (2 * workers) if strategy.asynchronous else steps // 2
        kill = {"kill_worker": f"{STRAGGLER}@{max(1, halfway)}"}
        recover = {"recover": True, **({"checkpoint_every_steps": max(1, steps // 3)} if strategy.checkpoints else {})}
        scenarios = {"clean": {}, "straggler": {"straggler": f"{STRAGGLER}:{FACTOR:g}"}, "kill": kill,
                     "recover": {**kill, **recover}}
        if strategy.processes(RunConfig(strategy=strategy.name, workers=workers)).get("ps"):
            scenarios["ps-kill"] = {"kill_ps": f"0@{steps // 2}", **recover}
        for scenario, faults in scenarios.items():
            if scenario not in cases:
                continue
            try:
                strategy.validate(RunConfig(strategy=strategy.name, workers=workers, steps=steps, **faults))
            except UsageError as exc:
                refused.append(f"{label} {scenario}: {exc}")
                continue
            name = f"stragglers-{scenario}-{label.replace(' ', '').replace('=', '')}"
            runs.append((f"{label} {scenario}", [*args, "--model", model, "--data", "synthetic", "--workers",
                                                 str(workers), "--steps", str(steps), "--warmup-steps", "5",
                                                 "--eval-every", "0", "--run-name", name, *flags(faults)]))
    convergence = {"clean": [], "straggler": ["--straggler", f"{STRAGGLER}:{FACTOR:g}"]}
    for label, args, with_convergence in picked if convergence_steps else []:
        if not with_convergence:
            continue
        for scenario in ("clean", "straggler"):
            name = f"stragglers-convergence-{scenario}-{label.replace(' ', '').replace('=', '')}"
            runs.append((f"{label} convergence {scenario}",
                         [*args, "--model", "mlp", "--data", "digits", "--workers", "2", "--steps",
                          str(convergence_steps), "--eval-every", "25", "--run-name", name,
                          *convergence[scenario]]))
    return runs, refused


def flags(faults: dict) -> list[str]:
    """A case's RunConfig fields as the command-line flags that set them."""
    out = []
    for field, value in faults.items():
        flag = "--" + field.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench stragglers", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--steps", type=int, default=100, help="global steps of each throughput run (default: 100)")
    p.add_argument("--model", default="cnn", help="model of the throughput runs (default: cnn)")
    p.add_argument("--variants", type=lambda t: [v for v in t.split(",") if v], default=None,
                   help=f"comma-separated, of: {', '.join(label for label, *_ in variants(4))} (default: all)")
    p.add_argument("--scenarios", type=lambda t: [v for v in t.split(",") if v], default=list(SCENARIOS),
                   help=f"comma-separated, of: {', '.join(SCENARIOS)} (default: all; ps-kill for the ps variants)")
    p.add_argument("--convergence-steps", type=int, default=300,
                   help="steps of each convergence run on digits; 0 leaves them out (default: 300)")
    p.add_argument("--output", default="results")
    p.add_argument("--timeout-s", type=float, default=600)
    return p


def main(argv: Sequence[str]) -> int:
    args, extra = parser().parse_known_args(list(argv))
    known = [label for label, *_ in variants(args.workers)]
    problem = ("--workers must be >= 2 and --steps >= 10" if args.workers < 2 or args.steps < 10 else
               f"--variants: choose from {', '.join(known)}" if args.variants and set(args.variants) - set(known)
               else f"--scenarios: choose from {', '.join(SCENARIOS)}" if set(args.scenarios) - set(SCENARIOS)
               else None)
    if problem is None:
        try:
            args.model = models.resolve(args.model)
            models.check(args.model)
            if srun.in_allocation():  # every run takes --workers workers: all of them must fit
                srun.counts_that_fit([args.workers], "--workers")
        except UsageError as exc:
            problem = str(exc)
    if problem:
        return refuse(problem)
    runs, refused = planned(args.workers, args.steps, args.convergence_steps, args.model, args.variants,
                            args.scenarios)
    refused_strategies = refused_cells((strategy_of(args_), args.model) for label, args_, _ in
                             variants(args.workers) if args.variants is None or label in args.variants)
    return run_all("stragglers", [(label, [*run_args, *extra]) for label, run_args in runs], Path(args.output),
                   args.timeout_s, refused=[*refused_strategies, *refused])
