"""Runs a strategy with one process per rank: under mpirun / horovodrun, or by
starting mpirun (or horovodrun --gloo) for the user.

Started by the user as `mpirun -np 4 python -m bench`, rank 0 opens the run folder
and tells the others its path; started by `--workers N`, this process opens it,
runs mpirun and watches it like any other multi-process run.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from bench.config import RunConfig
from bench.run.contract import GLOO_CONTROLLER, Strategy, WorkerContext
from bench.run.launch import gpu_plan
from bench.run.launch.close import close_watched_run
from bench.run.launch.hang import hang_account
from bench.run.launch.mpi_environment import under_mpi, world_rank
from bench.run.launch.mpi_init_race import relaunching
from bench.run.launch.processes import start
from bench.run.launch.rank_failures import which_rank_failed
from bench.run.launch.recovery import recovering
from bench.run.launch.run_hosts import RunHosts
from bench.run.launch.slurm.gloo import adopt_slot
from bench.run.launch.supervisor import Outcome, steps_written, supervise
from bench.run.phase import Phase
from bench.run.process.lifecycle import close_run, join_environment, joined_run, start_run
from bench.run.process.records import RunFolder


def run_ranks(config: RunConfig, strategy: type[Strategy]) -> int:
    adopt_slot()  # a Gloo rank started by srun: its Horovod slot
    if under_mpi():
        return run_rank(config, strategy)
    return recovering(config, lambda attempt: start_ranks(attempt, strategy))


def start_ranks(config: RunConfig, strategy_cls: type[Strategy]) -> tuple[int, RunFolder]:
    """One attempt: mpirun (or horovodrun) started and watched; its exit status and the run folder."""
    processes = strategy_cls.processes(config)
    hosts = RunHosts.of(config, processes, strategy_cls.gpus(config))
    kind = hosts.kind
    plan = gpu_plan.of_kind(config, strategy_cls, kind)  # refused here, before any rank, if the hosts cannot give it
    gloo = strategy_cls.runs_as.rank_controller(config) == GLOO_CONTROLLER
    folder, run_start = start_run(config, strategy_cls)
    env = {**join_environment(folder, run_start), **strategy_cls.runs_as.environment(config, str(folder.path))}
    rank = [sys.executable, "-m", "bench", *config_argv(config.replace(emulated_cluster=None, hosts=()))]
    argv, added = kind.ranks(rank, gloo, env, folder.path)  # the job's command as the host kind starts it
    env.update(added)
    folder.update_run(launcher=shlex.join(argv[:len(argv) - len(rank)]), **hosts.placement_record(),
                      **gpu_plan.recorded(plan))
    with hosts.held(folder.path, run_start) as scratch_env, kind.serving(gloo) as rendezvous_env:
        log = folder.path / "logs" / "ranks.log"

        def launch() -> Outcome:
            child = start("ranks", argv, log, env={**env, **rendezvous_env, **scratch_env}, echo=True,
                          hold_stdin=kind.holds_stdin)
            hosts.started(folder, 1)
            return supervise([child], [], False, steps_written(folder), config.stall_timeout_s,
                             startup_timeout_s=config.startup_timeout_s, on_hang=hang_account(log.parent))

        def record(relaunched: list[dict]) -> None:
            kind.end_started()  # the crashed launch's (a Slurm step), before its relaunch takes the nodes
            folder.update_run(relaunched=relaunched)
            print(f"{folder.run_id}: relaunching the ranks: {relaunched[-1]['why']}", file=sys.stderr, flush=True)

        outcome, since = relaunching(launch, log, steps_written(folder), run_start, record)
    status = outcome.status
    if status.startswith("failed"):
        status = f"failed: {which_rank_failed(log, since) or status.removeprefix('failed: ')}"
    return close_watched_run(folder, config, strategy_cls, status, run_start, outcome, hosts), folder


def config_argv(config: RunConfig) -> list[str]:
    """The config as the hidden --config-json flag every rank parses."""
    return ["--config-json", config.to_json()]


def run_rank(config: RunConfig, strategy: type[Strategy]) -> int:
    """This process is one rank."""
    from bench.run.launch.mpi_environment import local_position
    from bench.run.placement import visible
    from bench.run.quiet_tf import import_horovod_without_keras

    # the GPUs this rank sees, before TensorFlow (and Horovod) start: by its local rank, as its launcher set it, or
    # as MPI says
    visible.apply(config, strategy, "worker", world_rank() or 0, *local_position())
    import_horovod_without_keras()  # TensorFlow quietly, before Horovod imports it
    import horovod.tensorflow as hvd

    from bench.run.process.process import prepare_process, train

    runtime = prepare_process(config, strategy)
    # started by the user's mpirun, the ranks get the strategy's settings here (ours come with them)
    for name, value in strategy.runs_as.environment(config, None).items():
        os.environ.setdefault(name, value)
    hvd.init()
    joined = joined_run()
    owner = joined is None  # started by the user's mpirun: rank 0 owns run.json
    if owner:
        opened, run_start = start_run(config, strategy) if hvd.rank() == 0 else (None, None)
        path, run_start = hvd.broadcast_object((opened and str(opened.path), run_start), root_rank=0)
        folder = RunFolder(Path(path))
    else:
        folder, run_start = joined
    context = WorkerContext(rank=hvd.rank(), num_workers=hvd.size(), is_chief=hvd.rank() == 0,
                            run_start=run_start, run_dir=str(folder.path),
                            phase=Phase.of_task(folder.path, "rank", hvd.rank()))
    report = train(config, strategy, context, folder, runtime, show_progress=hvd.rank() == 0)
    folder.write_task_report(hvd.rank(), report)
    if "error" in report:  # the other ranks learn of it through mpirun, which ends them
        if owner and hvd.rank() == 0:  # under the user's mpirun no launcher is left to say why
            close_run(folder, config, f"failed: rank 0: {report['error']}", runtime=runtime)
        # out through the interpreter's exit (Horovod's atexit shutdown), not bench.__main__'s
        # os._exit after hvd.shutdown(), which is for ranks that finished
        raise SystemExit(1)
    hvd.join()  # every rank has written its rows
    if owner and hvd.rank() == 0:
        close_run(folder, config, "ok", startup_s=report.get("startup_s"), runtime=runtime,
                  strategy_info=report.get("strategy_info"))
    return 0
