"""`python -m bench network`: parameter servers against allreduce across link bandwidths.

On an emulated cluster (network namespaces, each host's link capped with tc): at 4
workers, on cnn, resnet20 and embedding with synthetic data (random images; Zipf-drawn
ids for embedding), for link caps of 100, 1000 and 10000 Mbit/s: ps-sync with 1 and
with 2 ps tasks, ps-async, allreduce (Horovod over mpirun, and over Gloo; on embedding
also with the table sent dense) and allreduce-tf. Each worker and each ps runs on a host
of its own. Then the report, which gains the section "Network". The cluster is made for
the preset, with its Slurm, and removed at its end, whatever happens (root only); each run
is a Slurm job (salloc) whose processes are job steps, as on a user's cluster.

With --host-cores C each host runs on a CPU budget of its own (`cluster up --host-cores`),
and each model is also run by one worker on one such host (`srun -N 1`, strategy single):
the compute that `python -m bench project --from` calibrates these runs with. Those runs are
made --one-host-repeats times (default 3), before the link runs, among them and after them,
so that the compute's interval is what the repetitions gave over the preset's time.

With --repeats R every link run is made R times, in rounds (every run once, then every run again):
the rig's own repeat error, which `project --from` sets beside the projection's, comes from them,
and a drift over the preset's time falls on every figure alike.
"""

from __future__ import annotations

import argparse
import signal
from collections.abc import Sequence
from pathlib import Path

from bench.config import default_warmup
from bench.drivers.presets.matrix import FULL_STEPS
from bench.drivers.presets.runner import BENCH, refused_cells, run_all, strategy_of
from bench.errors import UsageError
from bench.infra.emulated import cpu_budget
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
         batch_size: int, variants: Sequence[str] | None = None,
         repeats: int = 1) -> list[tuple[float, str, list[str]]]:
    from bench.run import models as known_models
    from bench.run.data import IDS
    from bench.run.validation import model_refusal
    from strategies import registry

    runs = []
    for link in links:
        for model in models:
            n_steps = steps_of(model, steps)
            kind = known_models.reads(model)
            for label, args in VARIANTS:
                if (variants and label not in variants) or (label in ONLY_WITH_TABLES and kind != IDS):
                    continue
                # an asynchronous strategy counts every worker's step as a global step: as many of
                # them, so that each worker takes (and leaves out as warm-up) as many steps as in a
                # synchronous run
                strategy = registry.get(strategy_of(args))
                # left out, and said (runner.refused_cells)
                if model_refusal(model, strategy, registry.all_strategies()):
                    continue
                steps_here = n_steps * workers if strategy.asynchronous else n_steps
                name = f"network-{link:g}mbit-{known_models.label(model)}-{label}"
                runs.append((link, f"{link:g} Mbit/s {known_models.label(model)} {label}", [
                    *args, *training(model, steps_here, default_warmup(n_steps), batch_size), "--workers",
                    str(workers), "--run-name", name, "--emulated-cluster", CLUSTER]))
    return in_rounds(runs, repeats)


def in_rounds(runs: list[tuple[float, str, list[str]]], repeats: int) -> list[tuple[float, str, list[str]]]:
    """Every run once, then every run again, `repeats` rounds; beyond one, each run's name and label
    say its round."""
    if repeats == 1:
        return runs
    out = []
    for k in range(1, repeats + 1):
        for link, label, args in runs:
            at = args.index("--run-name") + 1
            out.append((link, f"{label} ({k} of {repeats})", [*args[:at], f"{args[at]}-r{k}", *args[at + 1:]]))
    return out


def steps_of(model: str, steps: int | None) -> int:
    """A run's global steps: those asked for, else the model's own (FULL_STEPS)."""
    return steps or FULL_STEPS.get(model, 100)


def training(model: str, steps: int, warmup_steps: int, batch_size: int) -> list[str]:
    """What every run of the preset trains: the model on its synthetic data, for throughput."""
    from bench.run import models
    from bench.run.data import SYNTHETIC

    return ["--model", model, "--data", SYNTHETIC[models.reads(model)], "--steps", str(steps), "--warmup-steps",
            str(warmup_steps), "--batch-size", str(batch_size), "--eval-every", "0"]


def on_one_host(models: Sequence[str], steps: int | None, batch_size: int,
                repeat: int = 0) -> list[tuple[str, list[str]]]:
    """Each model's 1-worker run, made on one emulated host (its compute on the host's budget)."""
    from bench.run import models as known_models

    runs = []
    for model in models:
        n_steps, label = steps_of(model, steps), known_models.label(model)
        runs.append((f"{label} single, on one host ({repeat + 1})", [
            "--strategy", "single", *training(model, n_steps, default_warmup(n_steps), batch_size),
            "--run-name", f"network-one-host-{label}-single-{repeat + 1}"]))
    return runs


def interleaved(runs: Sequence, repeats: Sequence[Sequence]) -> list[tuple[bool, object]]:
    """`runs` with each of `repeats` (a list of runs each) placed among them at even spaces, the
    first before them all and the last after them all: (is it a repeat's, the run)."""
    at = [round(k * len(runs) / max(1, len(repeats) - 1)) for k in range(len(repeats))]
    out: list[tuple[bool, object]] = []
    for i in range(len(runs) + 1):
        out += [(True, run) for k, repeat in enumerate(repeats) if at[k] == i for run in repeat]
        out += [(False, runs[i])] if i < len(runs) else []
    return out


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
    p.add_argument("--host-cores", type=float, default=None,
                   help="each host's CPU budget in cores, as `cluster up --host-cores` (default: the hosts share "
                        "the machine's cores); each model is then also run by one worker on one host")
    p.add_argument("--one-host-repeats", type=int, default=3,
                   help="with --host-cores: how many times each model's one-host run is made (default: 3)")
    p.add_argument("--repeats", type=int, default=1,
                   help="each link run made this many times, in rounds: the rig's repeat error (default: 1)")
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
                or min(args.links) <= 0 or args.one_host_repeats < 1 or args.repeats < 1:
            raise UsageError("--workers must be >= 2, --steps >= 10, --repeats and --one-host-repeats >= 1 and "
                             "every link cap > 0")
        if args.host_cores is not None:
            cpu_budget.check(args.workers + MAX_PS, args.host_cores)
    except UsageError as exc:
        return refuse(exc)
    runs = plan(args.workers, args.links, args.models, args.steps, args.batch_size, args.variants, args.repeats)
    refused = refused_cells((strategy_of(variant[1]), model) for model in args.models
                             for variant in VARIANTS if not args.variants or variant[0] in args.variants)
    one_host = [on_one_host(args.models, args.steps, args.batch_size, k) for k in range(args.one_host_repeats)] \
        if args.host_cores is not None else []
    return run_on_links("network", runs, args.workers + MAX_PS, extra, Path(args.output), args.timeout_s,
                        refused=refused, budget_cores=args.host_cores, on_one_host_repeats=one_host)


def salloc_command(hosts: int, preset: str) -> list[str]:
    """Each run as a user runs it on their cluster: a Slurm job of every host, its processes job steps."""
    return ["salloc", "--quiet", "-N", str(hosts), f"--job-name=distbench-{preset}", *BENCH]


def one_host_command(preset: str) -> list[str]:
    """A run made whole on one host (launcher and process), as a job step there."""
    return ["srun", "--quiet", "-N", "1", "-n", "1", f"--job-name=distbench-{preset}", *BENCH]


def run_on_links(preset: str, runs: list[tuple[float, str, list[str]]], hosts: int, extra: Sequence[str],
                 output: Path, timeout_s: float, refused: Sequence[str] = (), budget_cores: float | None = None,
                 on_one_host_repeats: Sequence[Sequence[tuple[str, list[str]]]] = ()) -> int:
    """The runs, each (link cap, label, arguments), on the emulated cluster CLUSTER of `hosts`
    hosts (each of `budget_cores` cores, None: sharing the machine's) with its Slurm, made for them
    and removed at the end whatever happens; each run is a Slurm job; links re-capped when a run's
    cap differs from the last one's. `on_one_host_repeats`: runs each (label, arguments) made whole
    on one host, a repeat before the link runs, the others among them and after (interleaved)."""
    previous = signal.signal(signal.SIGTERM, _end_on_sigterm)
    commands, links = [], []
    for alone, run in interleaved(runs, on_one_host_repeats):
        if alone:
            label, run_args = run
            commands.append((label, [*one_host_command(preset), *run_args, *extra]))
            links.append(None)
        else:
            link, label, run_args = run
            commands.append((label, [*salloc_command(hosts, preset), *run_args, *extra]))
            links.append(link)

    def before(i: int) -> None:
        if links[i] is not None:  # a run on one host uses no link
            cluster.cap(links[i])

    try:
        with cluster_with_slurm(CLUSTER, hosts, runs[0][0] if runs else LINKS[0], budget_cores) as cluster:
            unseen = nodes_not_seeing(output.resolve(), [f"--nodes={hosts}", f"--ntasks={hosts}"])
            if unseen:
                raise UsageError(f"--output {output} is not visible on the emulated hosts (each has its own /tmp, "
                                 "as a real cluster's nodes do): use a folder on the shared disk, e.g. results/")
            return run_all(preset, commands, output, timeout_s, before=before, command=(), refused=refused)
    except UsageError as exc:
        return refuse(exc)
    finally:
        signal.signal(signal.SIGTERM, previous)
