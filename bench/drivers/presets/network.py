"""`python -m bench network`: parameter servers against allreduce across link bandwidths.

On an emulated cluster (network namespaces, each host's link capped with tc): at 4
workers, on cnn, resnet20 and embedding with synthetic data (random images; Zipf-drawn
ids for embedding), for link caps of 100, 1000 and 10000 Mbit/s: ps-sync with 1 and
with 2 ps tasks, ps-async, allreduce (Horovod over mpirun, and over Gloo; on embedding
also with the table sent dense) and allreduce-tf. Each worker and each ps runs on a host
of its own. Then the report, which gains the section "Network". The cluster is made for
the preset, with its Slurm, and removed at its end, whatever happens (root only); each run
is a Slurm job (salloc) whose processes are job steps, as on a user's cluster.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.config import default_warmup
from bench.drivers.presets.matrix import FULL_STEPS
from bench.drivers.presets.runner import refused_cells, run_all, strategy_of
from bench.errors import UsageError
from bench.infra.emulated.held import cluster_with_slurm
from bench.run.launch.slurm.srun import nodes_not_seeing
from bench.usage import OneLineParser, refuse

CLUSTER = "benchnet"  # its own name: the preset never takes over a cluster the user brought up
LINKS = (100.0, 1000.0, 10000.0)
MODELS = ("cnn", "resnet20", "embedding")
VARIANTS = (("ps-sync-1ps", ["--strategy", "ps-sync", "--ps", "1"]),
            # variables split by bytes, the large ones partitioned: else one ps gets cnn's dense kernel
            ("ps-sync-2ps", ["--strategy", "ps-sync", "--ps", "2", "--ps-placement", "balanced",
                             "--ps-partition-mb", "1"]),
            ("ps-async", ["--strategy", "ps-async", "--ps", "1"]),
            ("allreduce", ["--strategy", "allreduce"]),
            # Horovod's sparse_as_dense: the embedding table's gradient in one dense ring allreduce
            ("allreduce-dense", ["--strategy", "allreduce", "--sparse-as-dense", "true"]),
            # the same Horovod allreduce with Gloo's TCP transport instead of Open MPI's
            ("allreduce-gloo", ["--strategy", "allreduce", "--hvd-controller", "gloo"]),
            ("allreduce-tf", ["--strategy", "allreduce-tf"]))
MAX_PS = 2
ONLY_WITH_TABLES = {"allreduce-dense"}  # without a table it is the same run as allreduce


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def plan(workers: int, links: Sequence[float], models: Sequence[str], steps: int | None,
         batch_size: int, variants: Sequence[str] | None = None) -> list[tuple[float, str, list[str]]]:
    from bench.run import models as known_models
    from bench.run.data import IDS, SYNTHETIC
    from bench.run.validation import model_refusal
    from strategies import registry

    runs = []
    for link in links:
        for model in models:
            n_steps = steps or FULL_STEPS.get(model, 100)
            kind = known_models.reads(model)
            for label, args in VARIANTS:
                if (variants and label not in variants) or (label in ONLY_WITH_TABLES and kind != IDS):
                    continue
                # an asynchronous strategy counts every worker's step as a global step: as many of
                # them, so that each worker takes (and leaves out as warm-up) as many steps as in a
                # synchronous run
                strategy = registry.get(strategy_of(args))
                if model_refusal(model, strategy):  # left out, and said (runner.refused_cells)
                    continue
                steps_here = n_steps * workers if strategy.asynchronous else n_steps
                name = f"network-{link:g}mbit-{known_models.label(model)}-{label}"
                runs.append((link, f"{link:g} Mbit/s {known_models.label(model)} {label}", [
                    *args, "--model", model, "--data", SYNTHETIC[kind], "--workers", str(workers), "--steps",
                    str(steps_here), "--warmup-steps", str(default_warmup(n_steps)), "--batch-size", str(batch_size),
                    "--eval-every", "0", "--run-name", name, "--emulated-cluster", CLUSTER]))
    return runs


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench network", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=4, help="(default: 4)")
    p.add_argument("--links", type=_floats, default=list(LINKS), help="link caps in Mbit/s (default: 100,1000,10000)")
    p.add_argument("--models", type=lambda t: [m for m in t.split(",") if m], default=list(MODELS),
                   help="(default: cnn,resnet20,embedding)")
    p.add_argument("--variants", type=lambda t: [v for v in t.split(",") if v], default=None,
                   help=f"a subset of {','.join(label for label, _ in VARIANTS)} (default: all)")
    p.add_argument("--steps", type=int, default=None,
                   help="global steps of each run (default: cnn 100, resnet20 40, embedding 200)")
    p.add_argument("--batch-size", type=int, default=64, help="per worker (default: 64)")
    p.add_argument("--output", default="results")
    p.add_argument("--timeout-s", type=float, default=900, help="longest a single run may take (default: 900)")
    return p


def _end_on_sigterm(signum, frame):
    raise SystemExit(143)


def main(argv: Sequence[str]) -> int:
    args, extra = parser().parse_known_args(list(argv))
    try:
        from bench.run import models

        args.models = [models.resolve(model) for model in args.models]
        for model in args.models:
            models.check(model)
        unknown = set(args.variants or ()) - {label for label, _ in VARIANTS}
        if unknown:
            raise UsageError(f"--variants: unknown {', '.join(sorted(unknown))}")
        if args.workers < 2 or (args.steps is not None and args.steps < 10) or not args.links \
                or min(args.links) <= 0:
            raise UsageError("--workers must be >= 2, --steps >= 10 and every link cap > 0")
    except UsageError as exc:
        return refuse(exc)
    runs = plan(args.workers, args.links, args.models, args.steps, args.batch_size, args.variants)
    left_out = refused_cells((strategy_of(variant[1]), model) for model in args.models
                             for variant in VARIANTS if not args.variants or variant[0] in args.variants)
    return run_on_links("network", runs, args.workers + MAX_PS, extra, Path(args.output), args.timeout_s,
                        skipped=left_out)


def salloc_command(hosts: int, preset: str) -> list[str]:
    """Each run as a user runs it on their cluster: a Slurm job of every host, its processes job steps."""
    return ["salloc", "--quiet", "-N", str(hosts), f"--job-name=distbench-{preset}", sys.executable, "-m", "bench"]


def run_on_links(preset: str, runs: list[tuple[float, str, list[str]]], hosts: int, extra: Sequence[str],
                 output: Path, timeout_s: float, skipped: Sequence[str] = ()) -> int:
    """The runs, each (link cap, label, arguments), on the emulated cluster CLUSTER of `hosts`
    hosts with its Slurm, made for them and removed at the end whatever happens; each run is a
    Slurm job; links re-capped when a run's cap differs from the last one's."""
    previous = signal.signal(signal.SIGTERM, _end_on_sigterm)
    try:
        with cluster_with_slurm(CLUSTER, hosts, runs[0][0] if runs else LINKS[0]) as cluster:
            unseen = nodes_not_seeing(output.resolve(), [f"--nodes={hosts}", f"--ntasks={hosts}"])
            if unseen:
                raise UsageError(f"--output {output} is not visible on the emulated hosts (each has its own /tmp, "
                                 "as a real cluster's nodes do): use a folder on the shared disk, e.g. results/")
            return run_all(preset, [(label, [*run_args, *extra]) for _, label, run_args in runs], output,
                           timeout_s, before=lambda i: cluster.cap(runs[i][0]), command=salloc_command(hosts, preset),
                           skipped=skipped)
    except UsageError as exc:
        return refuse(exc)
    finally:
        signal.signal(signal.SIGTERM, previous)
