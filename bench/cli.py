"""Command line: `python -m bench [flags]` runs one run; `python -m bench report ...`
writes reports; `python -m bench all ...` runs the default comparison."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.config import OPTIMIZERS, RunConfig
from bench.errors import UsageError
from bench.run.launch.mpi_environment import under_mpi, world_size
from bench.run.launch.recovery import RECOVERY_LIMIT
from bench.run.launch.tf_config import topology_from_tf_config
from bench.run.process.schema import PURPOSES
from bench.run.validation import check_flags, check_resume_flags, validate
from bench.usage import OneLineParser, refuse

if TYPE_CHECKING:
    from bench.run.contract import Strategy

# subcommand -> "module:function" taking its arguments, imported only when called (as bench.run.models does)
SUBCOMMANDS = {"report": "bench.analysis.report.cli:main", "all": "bench.drivers.presets.matrix:main",
               "stragglers": "bench.drivers.presets.stragglers:main", "micro": "bench.drivers.micro.run:main",
               "cluster": "bench.infra.emulated.cli:main", "network": "bench.drivers.presets.network:main",
               "tradeoffs": "bench.drivers.presets.tradeoffs:main", "project": "bench.analysis.projection.cli:main",
               "overhead": "bench.drivers.overhead.run:main", "profile": "bench.drivers.profile.run:main",
               "peak": "bench.drivers.peak:main", "gpu-check": "bench.drivers.gpu_check:main",
               "stress": "bench.drivers.stress:main"}


def _hosts(text: str) -> tuple[str, ...]:
    return tuple(h for h in text.split(",") if h)


def run_parser() -> argparse.ArgumentParser:
    from strategies import registry

    p = OneLineParser(
        prog="python -m bench",
        description="Train one model under one distribution strategy and record throughput "
        "and convergence into results/<run_id>/. Subcommands: "
        f"{', '.join(SUBCOMMANDS)} (python -m bench SUBCOMMAND --help).",
    )
    d = RunConfig()
    for add_group in (_what_to_train, _embedding_and_teacher, _evaluation_and_output, _checkpoints_and_faults,
                      _topology, _gpus):
        add_group(p, d)
    g = p.add_argument_group("strategy options")
    for opt in registry.all_options():
        # no default here: what was not typed is absent, so a flag of another strategy can be told apart
        g.add_argument(opt.flag, dest=opt.name, type=opt.type, default=argparse.SUPPRESS,
                       help=f"{opt.help} [default: {opt.default}]")
    return p


def _what_to_train(p: argparse.ArgumentParser, d: RunConfig) -> None:
    from bench.run.models import MODELS
    from strategies import registry

    g = p.add_argument_group("what to train")
    g.add_argument("--strategy", default=None,
                   help=f"one of {', '.join(sorted(registry.all_strategies()))} (default: {registry.baseline()}; "
                        f"{registry.default(under_mpi=True)} under mpirun)")
    g.add_argument("--model", default=d.model,
                   help=f"{', '.join(MODELS)}, or your own: pkg.module:build or path/to/file.py:build, a "
                        "bench.run.models.base.Model or a compiled Keras 3 model "
                        "(docs/your-model.md; default: %(default)s)")
    g.add_argument("--image-size", type=int, default=None,
                   help="ImageNet models: a smaller square input for CPU runs; parameters do not change "
                        "(default: 224, inception3 299)")
    g.add_argument("--data", default=None,
                   help="images: synthetic, digits, teacher, mnist or cifar10 (default: digits); "
                        "for --model embedding: synthetic-ids or criteo (default: synthetic-ids); "
                        "your own model: synthetic (default); any model: your arrays as file.npz of x and y")
    g.add_argument("--data-dir", default=None,
                   help="folder with mnist.npz / IDX files, cifar-10-batches-py, or Criteo's train.txt / *.tsv")
    g.add_argument("--batch-size", type=int, default=d.batch_size, help="per worker (default: %(default)s)")
    g.add_argument("--steps", type=int, default=d.steps, help="global steps (default: %(default)s)")
    g.add_argument("--warmup-steps", type=int, default=None,
                   help="steps per worker left out of throughput (default: 10, at most a fifth of --steps)")
    g.add_argument("--optimizer", default=d.optimizer, help=f"{', '.join(OPTIMIZERS)} (default: %(default)s)")
    g.add_argument("--lr", type=float, default=d.lr, help="learning rate (default: %(default)s)")
    g.add_argument("--seed", type=int, default=d.seed, help="(default: %(default)s)")
    g.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="feed examples in file order (for equivalence checks)")


def _embedding_and_teacher(p: argparse.ArgumentParser, d: RunConfig) -> None:
    g = p.add_argument_group("the embedding model and its synthetic-ids data")
    # no default here: a value typed with a model that has no table is refused (see config_from_args)
    g.add_argument("--embedding-rows", type=int, default=argparse.SUPPRESS,
                   help=f"rows of the embedding table (default: {d.embedding_rows})")
    g.add_argument("--embedding-width", type=int, default=argparse.SUPPRESS,
                   help=f"floats per row (default: {d.embedding_width}; the default table is 32 MB)")
    g.add_argument("--id-features", type=int, default=argparse.SUPPRESS,
                   help=f"synthetic-ids: categorical features per example (default: {d.id_features})")
    g.add_argument("--zipf-exponent", type=float, default=argparse.SUPPRESS,
                   help=f"synthetic-ids: P(k-th most frequent row) ~ k^-s, s > 0 (default: {d.zipf_exponent})")
    g = p.add_argument_group("the teacher task (--data teacher)")
    g.add_argument("--teacher-factors", type=int, default=argparse.SUPPRESS,
                   help=f"latent factors behind each image and label: its difficulty (default: {d.teacher_factors})")
    g.add_argument("--teacher-examples", type=int, default=argparse.SUPPRESS,
                   help=f"training examples; validation gets a fifth as many (default: {d.teacher_examples})")


def _evaluation_and_output(p: argparse.ArgumentParser, d: RunConfig) -> None:
    from bench.run.data import IDS, IMAGES, teacher
    from bench.run.models import DEFAULT_TARGET

    g = p.add_argument_group("evaluation and output")
    g.add_argument("--eval-every", type=int, default=d.eval_every,
                   help="evaluate every N global steps, 0: only at the end (default: %(default)s)")
    g.add_argument("--target-accuracy", type=float, default=None,
                   help=f"accuracy whose time-to-reach is reported (default: {DEFAULT_TARGET[IMAGES]:g}; "
                        f"{teacher.TARGET:g} on teacher; {DEFAULT_TARGET[IDS]:g} for --model embedding)")
    g.add_argument("--output", default=d.output, help="folder for run folders (default: %(default)s)")
    g.add_argument("--run-name", default=None, help="label of the run folder")
    g.add_argument("--purpose", default=None, choices=PURPOSES,
                   help="what the run is for, as the report groups it (default: throughput when it is not "
                        "evaluated or its data are synthetic, else convergence)")
    g.add_argument("--save-weights", action="store_true", help="write the final weights to weights.npz")
    g.add_argument("--peak-tflops", type=float, default=None, metavar="X",
                   help="one device's peak TFLOP/s (its data sheet's) for the run's model FLOP/s utilization "
                        "(default: this machine's, measured once by ./run_bench.sh peak)")


def _checkpoints_and_faults(p: argparse.ArgumentParser, d: RunConfig) -> None:
    g = p.add_argument_group("checkpoints, recovery and time limits")
    g.add_argument("--checkpoint-every-steps", type=int, default=d.checkpoint_every_steps, metavar="K",
                   help="the chief saves a checkpoint (weights, optimizer state, global step) into the run "
                        "folder's checkpoints/ every K global steps and at the end (default: none)")
    g.add_argument("--checkpoint-every-s", type=float, default=d.checkpoint_every_s, metavar="T",
                   help="... or every T seconds of training")
    g.add_argument("--checkpoint-keep", type=int, default=d.checkpoint_keep, metavar="N",
                   help="checkpoints kept, the latest ones (default: %(default)s)")
    g.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="go on with the interrupted or failed run in RUN_DIR from its latest checkpoint, with "
                        "its own config, appending to its records (--strategy/--model, if given, must match)")
    g.add_argument("--recover", action="store_true",
                   help=f"restart after a failure (up to {RECOVERY_LIMIT} times): a dead worker alone, where the "
                        "strategy lets it rejoin (ps-async, ps-sync), else the whole job from its latest checkpoint")
    g.add_argument("--stall-timeout-s", type=float, default=d.stall_timeout_s,
                   help="fail a multi-process run when no step is recorded for this long once stepping "
                        "(default: %(default)s)")
    g.add_argument("--startup-timeout-s", type=float, default=d.startup_timeout_s,
                   help="fail a multi-process run when its first step is not recorded within this long "
                        "(default: %(default)s; a large model on a busy machine may need more)")
    g.add_argument("--config-json", default=None, help=argparse.SUPPRESS)
    g = p.add_argument_group("failure injection")
    g.add_argument("--kill-worker", default=None, metavar="W@S",
                   help="worker W kills itself with SIGKILL at its step S")
    g.add_argument("--kill-ps", default=None, metavar="P@S",
                   help="the launcher kills ps task P with SIGKILL once the run reaches global step S")
    g.add_argument("--straggler", default=None, metavar="W:F",
                   help="worker W's steps take F times as long (it sleeps (F-1) x its measured step time)")
    g.add_argument("--straggler-random", type=float, default=None, metavar="F",
                   help="each step one worker, drawn from the seed, is slowed by F")


def _topology(p: argparse.ArgumentParser, d: RunConfig) -> None:
    g = p.add_argument_group("topology")
    g.add_argument("--workers", type=int, default=None,
                   help="workers / towers / ranks (default: 2, or 1 for a strategy that runs with 1 only)")
    g.add_argument("--ps", type=int, default=d.ps, help="parameter-server tasks (default: %(default)s)")
    g.add_argument("--ps-hosts", type=_hosts, default=(), help="multi-host: host:port,host:port")
    g.add_argument("--worker-hosts", type=_hosts, default=(), help="multi-host: host:port,host:port")
    g.add_argument("--chief-host", default=None, help="multi-host ps-coordinator: the coordinator's host:port")
    g.add_argument("--job-name", default=None, help="multi-host: ps, worker (or chief: ps-coordinator's coordinator)")
    g.add_argument("--task-index", type=int, default=None, help="multi-host: index within --job-name")
    g.add_argument("--emulated-cluster", nargs="?", const="bench", default=None, metavar="NAME",
                   help="run each ps and worker on its own host of the emulated cluster NAME (default: bench; "
                   "see ./run_bench.sh cluster up)")
    # every name kept, empty ones too: `--hosts ,` is refused (bench.config.check_topology), not read as no hosts
    g.add_argument("--hosts", type=lambda t: tuple(t.split(",")), default=(), metavar="H1,H2,...",
                   help="hosts without a scheduler: each task started on its host over ssh, an MPI strategy's "
                        "ranks through mpirun -H (workers first, then ps tasks; DISTBENCH_SSH sets the command, "
                        "docs/several-hosts.md)")


def _gpus(p: argparse.ArgumentParser, d: RunConfig) -> None:
    g = p.add_argument_group("GPUs (docs/gpus.md)")
    g.add_argument("--gpus-per-host", type=int, default=d.gpus_per_host, metavar="N",
                   help="each host's GPUs where none are found (to plan, or to test the placement without GPUs); "
                        "where GPUs are found, N may take fewer (default: the host's)")
    g.add_argument("--gpus-per-worker", type=int, default=d.gpus_per_worker, metavar="K",
                   help="GPUs each worker process drives, as towers whose gradients it sums before the exchange "
                        "(default: %(default)s)")
    g.add_argument("--gpus-per-ps", type=int, default=d.gpus_per_ps, metavar="K",
                   help="GPUs each ps task sees (default: %(default)s)")
    g.add_argument("--share-gpus", action="store_true",
                   help="let more GPU processes onto a host than it has GPUs, each with a memory limit")
    g.add_argument("--on-cpu", action="store_true",
                   help="compute on the CPU on a GPU host: each process placed as planned, its TensorFlow shown no "
                        "GPU, and run.json says so (without it, a process given GPUs its TensorFlow cannot see fails)")
    g.add_argument("--gpu-memory-fraction", type=float, default=d.gpu_memory_fraction, metavar="F",
                   help="each process takes this fraction of each GPU's memory (the seed's "
                        "per_process_gpu_memory_fraction; default: memory growth, the seed's allow_growth)")
    g.add_argument("--precision", default=d.precision, metavar="P",
                   help="float32, mixed_float16 (loss scaled) or mixed_bfloat16: what the forward and backward passes "
                        "compute in, the variables float32 (Keras's policy names; default: %(default)s)")
    g.add_argument("--xla", action="store_true",
                   help="compile each step's forward and backward pass with XLA (tf_cnn_benchmarks' --xla_compile)")
    g.add_argument("--dry-run", action="store_true",
                   help="print the processes the run would start (host, role, local rank, GPUs, memory, "
                        "collective), one line each, and start none")
    g.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON on stdout")


def resumed(parsed: argparse.Namespace, argv: Sequence[str]) -> RunConfig:
    """--resume RUN_DIR: the run's own config, set to go on from its latest checkpoint."""
    from bench.run import models
    from bench.run.process.resume import resume_config

    typed = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    check_resume_flags(typed)
    return resume_config(parsed.resume, {"strategy": parsed.strategy,
                                         "model": models.resolve(parsed.model) if "--model" in typed else None})


def config_from_args(argv: Sequence[str]) -> RunConfig:
    """Parse and validate; raises UsageError (or exits 2 on a malformed flag)."""
    return run_from_args(argv)[0]


def run_from_args(argv: Sequence[str]) -> tuple[RunConfig, type[Strategy]]:
    """The run's config, parsed and validated, and its strategy: looked up here, once in this
    process, and handed down the run's path. Raises UsageError (or exits 2 on a malformed flag)."""
    from strategies import registry

    parsed = run_parser().parse_args(argv)
    if parsed.config_json:  # a task or rank started by a launcher: the launcher's config, as is
        config = RunConfig.from_dict(json.loads(parsed.config_json))
        return config, registry.get(config.strategy)
    if parsed.resume is not None:
        config = resumed(parsed, argv)
        return config, registry.get(config.strategy)
    args = vars(parsed)
    if args["strategy"] is None:
        args["strategy"] = registry.default(under_mpi())
    strategy_cls = registry.get(args["strategy"])
    args = completed(args, argv, strategy_cls)
    check_flags(args, strategy_cls, under_mpi(), registry.all_strategies())
    return validate(RunConfig.from_dict(args), strategy_cls, registry.all_strategies()), strategy_cls


def completed(args: dict, argv: Sequence[str], strategy_cls: type[Strategy]) -> dict:
    """The typed flags with what was left out filled in: the topology from TF_CONFIG or mpirun's
    world, the default workers, data and target, the strategy's typed options."""
    from bench.run import data as data_sources
    from bench.run import models
    from bench.run.contract import default_workers

    if not args["worker_hosts"] and os.environ.get("TF_CONFIG"):
        args.update(topology_from_tf_config(os.environ["TF_CONFIG"]))
    if under_mpi() and "--workers" not in argv:
        args["workers"] = world_size() or args["workers"]
    if args["workers"] is None:
        args["workers"] = default_workers(strategy_cls)
    args["options"] = {opt.name: args[opt.name] for opt in strategy_cls.options if opt.name in args}
    args["model"] = models.resolve(args["model"])
    if args["data"] is None:
        args["data"] = models.default_data(args["model"])
    args["data"] = data_sources.resolve(args["data"])
    if args["target_accuracy"] is None:
        args["target_accuracy"] = models.default_target(args["model"], args["data"])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # TensorFlow is imported (quietly) only by the processes that train: a launcher that starts
    # others, the presets, report and cluster save the seconds of the import
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return _subcommand(argv[0], argv[1:])
        config, strategy = run_from_args(argv)
        if "--json" in argv and "--dry-run" not in argv:
            raise UsageError("--json goes with --dry-run (the plan as JSON)")
        if "--dry-run" in argv:
            from bench.run.launch import gpu_plan

            return gpu_plan.show(config, strategy, as_json="--json" in argv)
    except UsageError as exc:
        return refuse(exc)
    from bench.run.launch.launcher import run_one

    try:
        return run_one(config, strategy)
    except UsageError as exc:
        return refuse(exc)


def _subcommand(name: str, argv: list[str]) -> int:
    module, _, function = SUBCOMMANDS[name].partition(":")
    return getattr(importlib.import_module(module), function)(argv)
