"""`python -m bench tradeoffs`: which family reaches a target accuracy first, by link bandwidth.

On an emulated cluster (each worker and the ps on a host of its own, every link capped), at
4 workers (`--workers`) on the teacher task (mlp, batch 64 per worker, SGD 0.1), for links of 100 and
1000 Mbit/s: ps-sync, ps-async, allreduce, local-sgd with H = 1, 4 and 16, and allreduce
with fp16 and with top-k compression (Horovod over Gloo); each with seeds 0..K-1. Every
run takes the same number of steps per worker and is evaluated every 100 global steps; the
report's section "Trade-offs" gives time to target against link bandwidth and accuracy
reached against bytes moved, and its headline names the family that reaches the target
first on each link.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from bench.config import default_warmup
from bench.drivers.presets.network import CLUSTER, run_on_links
from bench.drivers.presets.runner import strategy_of
from bench.errors import UsageError
from bench.usage import OneLineParser, refuse

LINKS = (100.0, 1000.0)
WORKERS, PS = 4, 1
STEPS = 1500  # per worker: synchronous 4-worker runs reach the teacher task's target in 600-1,200
EVAL_EVERY = 100
# Horovod over Gloo: on the emulated links Open MPI's TCP transport used 43% of a 100 Mbit/s
# link where Gloo used 76% (the network preset), so Gloo is Horovod at its best here
GLOO = ["--hvd-controller", "gloo"]
VARIANTS = (("ps-sync", ["--strategy", "ps-sync", "--ps", str(PS)]),
            ("ps-async", ["--strategy", "ps-async", "--ps", str(PS)]),
            ("allreduce", ["--strategy", "allreduce", *GLOO]),
            ("local-sgd-h1", ["--strategy", "local-sgd", "--sync-period", "1", *GLOO]),
            ("local-sgd-h4", ["--strategy", "local-sgd", "--sync-period", "4", *GLOO]),
            ("local-sgd-h16", ["--strategy", "local-sgd", "--sync-period", "16", *GLOO]),
            ("allreduce-fp16", ["--strategy", "allreduce", "--compression", "fp16", *GLOO]),
            ("allreduce-topk", ["--strategy", "allreduce", "--compression", "topk:0.01", *GLOO]))


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def plan(links: Sequence[float], seeds: int, steps: int, variants: Sequence[str] | None = None,
         workers: int = WORKERS) -> list[tuple[float, str, list[str]]]:
    from strategies import registry

    runs = []
    for link in links:
        for seed in range(seeds):
            for label, args in VARIANTS:
                if variants and label not in variants:
                    continue
                # an asynchronous strategy counts every worker's step as a global step: as many
                # steps per worker as the others take, and evaluated as often per worker step
                asynchronous = registry.get(strategy_of(args)).asynchronous
                scale = workers if asynchronous else 1
                runs.append((link, f"{link:g} Mbit/s {label} seed {seed}", [
                    *args, "--model", "mlp", "--data", "teacher", "--workers", str(workers),
                    "--steps", str(steps * scale), "--warmup-steps", str(default_warmup(steps)),
                    "--eval-every", str(EVAL_EVERY * scale), "--seed", str(seed),
                    "--run-name", f"tradeoffs-{link:g}mbit-{label}-s{seed}", "--emulated-cluster", CLUSTER]))
    return runs


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench tradeoffs", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--links", type=_floats, default=list(LINKS), help="link caps in Mbit/s (default: 100,1000)")
    p.add_argument("--seeds", type=int, default=3, help="runs of each setting, with seeds 0..K-1 (default: 3)")
    p.add_argument("--steps", type=int, default=STEPS, help=f"steps per worker of each run (default: {STEPS})")
    p.add_argument("--workers", type=int, default=WORKERS, help=f"workers of each run (default: {WORKERS})")
    p.add_argument("--variants", type=lambda t: [v for v in t.split(",") if v], default=None,
                   help=f"a subset of {','.join(label for label, _ in VARIANTS)} (default: all)")
    p.add_argument("--output", default="results")
    p.add_argument("--timeout-s", type=float, default=900, help="longest a single run may take (default: 900)")
    return p


def main(argv: Sequence[str]) -> int:
    args, extra = parser().parse_known_args(list(argv))
    try:
        unknown = set(args.variants or ()) - {label for label, _ in VARIANTS}
        if unknown:
            raise UsageError(f"--variants: unknown {', '.join(sorted(unknown))}")
        if args.seeds < 1 or args.steps < 2 * EVAL_EVERY or not args.links or min(args.links) <= 0:
            raise UsageError(f"--seeds must be >= 1, --steps >= {2 * EVAL_EVERY} and every link cap > 0")
        if args.workers < 2:
            raise UsageError(f"--workers: the trade-offs are between workers; give 2 or more, got {args.workers}")
    except UsageError as exc:
        return refuse(exc)
    runs = plan(args.links, args.seeds, args.steps, args.variants, args.workers)
    return run_on_links("tradeoffs", runs, args.workers + PS, extra, Path(args.output), args.timeout_s)
