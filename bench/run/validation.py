"""The one check of a run, before any work: the typed flags against each other (`check_flags`,
`check_resume_flags`), then the config's every value, the strategy's own rules, the model, the data
and the results folder (`validate`, which returns the config with the strategy's options complete)."""

from __future__ import annotations

from bench.config import OPTIMIZERS, RunConfig, check_injection, check_numbers, check_output, check_topology
from bench.errors import UsageError
from bench.run import data, models
from bench.run.contract import IN_PROCESS, Known, Strategy, options_elsewhere, strategies_taking
from bench.run.data import npz
from bench.run.launch.slurm import srun
from bench.run.models import user
from bench.run.placement import refusals

TABLE_COPIES = 3  # the table, its gradient (when dense) and an optimizer slot or an input copy


# flags --resume takes besides its folder, to check the run is the one meant
RESUME_CHECKS = ("--resume", "--strategy", "--model")
TABLE_FLAGS = ("embedding_rows", "embedding_width", "id_features", "zipf_exponent")
TEACHER_FLAGS = ("teacher_factors", "teacher_examples")


def check_flags(args: dict, strategy_cls: type[Strategy], under_mpi: bool, known: Known) -> None:
    """Flags typed that this run cannot take: another strategy's option, a table's flag without a
    table, a teacher's without its data, --recover under the user's own mpirun. `args`: the typed
    flags completed (bench.cli.completed); the flags without a default (argparse.SUPPRESS) are in
    it only when typed. `known`: every strategy the run's starter knows."""
    for opt in options_elsewhere(strategy_cls, known):
        if opt.name in args:
            raise UsageError(f"{opt.flag} is an option of {', '.join(strategies_taking(opt, known))}; "
                             f"--strategy {strategy_cls.name} does not take it")
    if under_mpi and args["recover"]:
        raise UsageError("--recover: this mpirun is yours, so the suite cannot restart it; start the run with "
                         "--workers N (the suite then runs mpirun), or run your mpirun again with --resume")
    for flag in TABLE_FLAGS:
        if flag in args and models.reads(args["model"]) != data.IDS:
            raise UsageError(f"--{flag.replace('_', '-')}: only for --model embedding, not {args['model']}")
    for flag in TEACHER_FLAGS:
        if flag in args and args["data"] != "teacher":
            raise UsageError(f"--{flag.replace('_', '-')}: only for --data teacher, not {args['data']}")


def check_resume_flags(typed: set[str]) -> None:
    """--resume goes on with the run's own config: nothing else may be typed but its checks."""
    others = sorted(typed - set(RESUME_CHECKS))
    if others:
        raise UsageError(f"--resume goes on with the run's own config; drop {', '.join(others)}")


def check_hosts(config: RunConfig) -> None:
    """--hosts starts a TensorFlow cluster's tasks over ssh, an MPI job's ranks through mpirun or horovodrun,
    a one-process run's process on the first host."""
    if not config.hosts:
        return
    if srun.in_allocation():
        raise UsageError("--hosts: inside a Slurm allocation Slurm places the tasks; drop --hosts")


def validate(config: RunConfig, strategy_cls: type[Strategy], known: Known) -> RunConfig:
    """Raise UsageError naming the first problem found; else the config, options complete.
    `strategy_cls` is the run's, as its process resolved it (bench.cli.run_from_args); `known`: every
    strategy its starter knows (for what another could do instead)."""
    if config.emulated_cluster is not None and strategy_cls.runs_as.kind == IN_PROCESS:
        raise UsageError(f"--emulated-cluster: {config.strategy} runs in one process; use a ps or allreduce strategy")
    check_hosts(config)
    check_model(config, strategy_cls, known)
    check_numbers(config)
    refusals.check_numbers(config)
    check_workers(config, strategy_cls)
    if config.optimizer not in OPTIMIZERS:
        raise UsageError(f"--optimizer: {config.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    if npz.is_file_name(config.data):  # the user's arrays, read once, against the model's input (imports TF)
        npz.check(config.data, models.input_shape(config.model, config.image_size),
                  models.signature(config.model).num_classes)
    else:
        data.check(config.data, config.data_dir, models.reads(config.model))
    check_memory(config, strategy_cls)
    refusals.check_towers(config, strategy_cls)
    check_precision(config, strategy_cls)
    check_topology(config)
    check_injection(config)
    check_recovery(config, strategy_cls)
    config = strategy_cls.with_defaults(config)
    for opt in strategy_cls.options:
        opt.validate(config.options[opt.name])
    strategy_cls.validate(config)
    if config.checkpointing and not strategy_cls.checkpoints:
        raise UsageError(f"--checkpoint-every-*: {config.strategy} cannot save checkpoints")
    check_output(config.output)
    return config


def check_model(config: RunConfig, strategy_cls: type[Strategy], known: Known) -> None:
    """The model is registered or imports; a user's Keras 3 model goes only to a strategy that can build it."""
    models.check(config.model)
    models.check_image_size(config.model, config.image_size)
    refusal = model_refusal(config.model, strategy_cls, known)
    if refusal:
        raise UsageError(f"--model {models.label(config.model)}: {refusal}")


def model_refusal(model: str, strategy_cls: type[Strategy], known: Known) -> str | None:
    """Why `strategy_cls` cannot train `model` (a checked model name), or None."""
    if strategy_cls.v1_graph and user.is_spec(model) and user.kind(model) == user.KERAS:
        able = [name for name, cls in known.items() if not cls.v1_graph]
        return (f"a Keras 3 model cannot be built in the TensorFlow 1 graph {strategy_cls.name} trains in; "
                f"run it with {', '.join(able)}")
    return None


def check_precision(config: RunConfig, strategy_cls: type[Strategy]) -> None:
    """--precision is one this suite knows and the model computes in; --xla goes to a strategy whose gradients
    XLA can compile (its declared `xla`)."""
    from bench.run.models.precision import FLOAT32, PRECISIONS

    if config.precision not in PRECISIONS:
        raise UsageError(f"--precision: {config.precision!r} is not one of {', '.join(PRECISIONS)}")
    if config.precision != FLOAT32 and not models.mixed_precision(config.model):
        raise UsageError(f"--precision {config.precision}: model {models.label(config.model)} computes in float32 only "
                         "(a mixed precision runs the suite's models and a Keras model; docs/gpus.md, \"Precision "
                         "and XLA\")")
    if config.xla and not strategy_cls.xla:
        raise UsageError(f"--xla: {config.strategy} does not compile its steps with XLA ({strategy_cls.xla_refusal})")


def check_recovery(config: RunConfig, strategy_cls: type[Strategy]) -> None:
    """--kill-ps names a ps task this run has; --recover has something to restart, and a
    checkpoint to restart a whole job from."""
    kill = config.kill_ps_plan
    if kill:
        tasks = strategy_cls.processes(config).get("ps", 0)
        if config.multi_host or kill[0] >= tasks:
            raise UsageError(f"--kill-ps: ps task {kill[0]} is not a process this launcher starts "
                             f"({config.strategy} starts {tasks} here)")
        if not 0 < kill[1] < config.steps:
            raise UsageError(f"--kill-ps: global step {kill[1]} is not inside the run (--steps {config.steps})")
    if not config.recover:
        return
    if strategy_cls.runs_as.kind == IN_PROCESS:
        raise UsageError(f"--recover: {config.strategy} runs in this one process, so nothing outlives a failure "
                         "to restart it; --resume the failed run instead")
    if config.multi_host:
        raise UsageError("--recover: tasks started by hand (--job-name) are restarted by whoever started them, "
                         "with --resume")
    if not config.checkpointing and strategy_cls.checkpoints:
        # a strategy that cannot save one (ps-coordinator) has its lost workers restarted, and nothing else
        raise UsageError("--recover needs --checkpoint-every-steps K or --checkpoint-every-s T: a job that "
                         "cannot go on without the dead process restarts from its latest checkpoint")


def check_memory(config: RunConfig, strategy_cls: type[Strategy]) -> None:
    """An embedding table must fit in this machine's memory in every process that holds it."""
    table, copies = models.table_bytes(config), copies_here(config, strategy_cls)
    needed = table * TABLE_COPIES * copies
    available = available_memory()
    if needed and available and needed > available:
        raise UsageError(f"--embedding-rows {config.embedding_rows} x --embedding-width {config.embedding_width}: "
                         f"the table ({table / 2**20:,.0f} MB, with its gradient and optimizer state, in {copies} "
                         f"process(es) or towers here) needs {needed / 2**30:,.1f} GB; this machine has "
                         f"{available / 2**30:,.1f} GB available")


def copies_here(config: RunConfig, strategy_cls: type[Strategy]) -> int:
    """Copies of the model's variables this machine holds: one per worker (tower or rank), and
    the ps tasks' share, unless the run's processes are on other hosts."""
    if config.multi_host:
        return 1
    return config.workers + (1 if strategy_cls.processes(config).get("ps") else 0)


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_workers(config: RunConfig, strategy_cls: type[Strategy]) -> None:
    low, high = strategy_cls.worker_range
    if config.workers < low or (high is not None and config.workers > high):
        allowed = f"exactly {low}" if low == high else (f"{low} to {high}" if high else f"{low} or more")
        raise UsageError(f"--workers {config.workers}: {config.strategy} runs with {allowed} worker(s)")
