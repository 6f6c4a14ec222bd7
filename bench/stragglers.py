"""`python -m bench stragglers`: what each strategy does with a slow worker and a dead one.

At 4 workers on cnn with synthetic data: ps-async, ps-sync with R = N, ps-sync with one
backup worker (R = N - 1), allreduce and allreduce-tf, each clean, with one 3x straggler,
and with one worker killed halfway; then convergence pairs on digits (clean and with the
straggler) for ps-async and ps-sync. Then the report, which gains the section
"Stragglers and failures".
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.cli import OneLineParser
from bench.matrix import execute

FACTOR = 3.0
STRAGGLER = 1  # never the chief: the chief also evaluates and writes run.json


def variants(workers: int) -> list[tuple[str, list[str]]]:
    return [("ps-async", ["--strategy", "ps-async"]),
            ("ps-sync R=N", ["--strategy", "ps-sync"]),
            ("ps-sync R=N-1", ["--strategy", "ps-sync", "--replicas-to-aggregate", str(workers - 1)]),
            ("allreduce", ["--strategy", "allreduce"]),
            ("allreduce-tf", ["--strategy", "allreduce-tf"])]


def plan(workers: int, steps: int, convergence_steps: int) -> list[tuple[str, list[str]]]:
    runs = []
    for label, args in variants(workers):
        # halfway through the run: an asynchronous worker does about steps / workers steps of its own
        halfway = steps // (2 * workers) if label == "ps-async" else steps // 2
        scenarios = {"clean": [], "straggler": ["--straggler", f"{STRAGGLER}:{FACTOR:g}"],
                     "kill": ["--kill-worker", f"{STRAGGLER}@{max(1, halfway)}"]}
        for scenario, extra in scenarios.items():
            name = f"stragglers-{scenario}-{label.replace(' ', '').replace('=', '')}"
            runs.append((f"{label} {scenario}", [*args, "--model", "cnn", "--data", "synthetic", "--workers",
                                                 str(workers), "--steps", str(steps), "--warmup-steps", "5",
                                                 "--eval-every", "0", "--run-name", name, *extra]))
    convergence = {"clean": [], "straggler": ["--straggler", f"{STRAGGLER}:{FACTOR:g}"]}
    for label, args in variants(workers)[:2]:
        for scenario in ("clean", "straggler"):
            name = f"stragglers-convergence-{scenario}-{label.replace(' ', '').replace('=', '')}"
            runs.append((f"{label} convergence {scenario}",
                         [*args, "--model", "mlp", "--data", "digits", "--workers", "2", "--steps",
                          str(convergence_steps), "--eval-every", "25", "--run-name", name,
                          *convergence[scenario]]))
    return runs


def main(argv: Sequence[str]) -> int:
    p = OneLineParser(prog="python -m bench stragglers", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--steps", type=int, default=100, help="global steps of each cnn run (default: 100)")
    p.add_argument("--convergence-steps", type=int, default=300)
    p.add_argument("--output", default="results")
    p.add_argument("--timeout-s", type=float, default=600)
    args, extra = p.parse_known_args(list(argv))
    if args.workers < 2 or args.steps < 10:
        print("bench: error: --workers must be >= 2 and --steps >= 10", file=sys.stderr)
        return 2
    folder = Path(args.output) / f"stragglers-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    runs = plan(args.workers, args.steps, args.convergence_steps)
    started = time.monotonic()
    for i, (label, run_args) in enumerate(runs, 1):
        print(f"[{i}/{len(runs)}] {label}", file=sys.stderr, flush=True)
        execute([*run_args, "--output", str(folder), *extra], args.timeout_s, folder / "matrix.log")
    from bench.report.build import write_report

    html = write_report([folder], folder, remark=f"Stragglers preset: {time.monotonic() - started:.0f} s.")
    shutil.copy(html, Path(args.output) / "report.html")
    shutil.copy(folder / "summary.csv", Path(args.output) / "summary.csv")
    print(f"report: {(Path(args.output) / 'report.html').resolve()}")
    return 0
