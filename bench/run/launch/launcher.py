"""Turns a validated config into the processes of a run, by how its strategy runs (`Strategy.runs_as`)."""

from __future__ import annotations

import os
from pathlib import Path

from bench.config import RunConfig
from bench.run.contract import IN_PROCESS, MPI, TF_CLUSTER, Strategy, WorkerContext
from bench.run.launch import gpu_plan
from bench.run.launch.interrupts import Interrupted, interruptible
from bench.run.launch.slurm import srun
from bench.run.placement import visible
from bench.run.placement.gpus import local_rank_from, local_size_from
from bench.run.process.lifecycle import close_run, joined_run, open_run, start_run
from bench.run.process.process import prepare_process, train
from bench.usage import refuse


def run_in_process(config: RunConfig, strategy: type[Strategy]) -> int:
    visible.apply(config, strategy, "worker", 0, local_rank_from(os.environ) or 0, local_size_from(os.environ))
    runtime = prepare_process(config, strategy)
    joined = joined_run()  # started on its host by a launcher (bench.run.launch.one_host): its folder, its clock
    folder, run_start = (open_run(config, strategy, joined[1], folder=joined[0]), joined[1]) if joined \
        else start_run(config, strategy)
    where = srun.step_record()
    if where:
        folder.update_run(placement=where)
    context = WorkerContext(run_start=run_start, run_dir=str(folder.path))
    try:
        with interruptible():  # as the multi-process launchers' supervisor is
            report = train(config, strategy, context, folder, runtime)
    except Interrupted as exc:
        close_run(folder, config, f"interrupted ({exc})")
        return 130
    if "error" in report:
        close_run(folder, config, f"failed: {report['error']}")
        return 1
    close_run(folder, config, "ok", startup_s=report["startup_s"], runtime=runtime,
              strategy_info=report["strategy_info"])
    return 0


def run_one(config: RunConfig, strategy: type[Strategy]) -> int:
    """Run `config` in this process, or start and watch its processes. `strategy` is the run's,
    looked up once where the process parsed its config (bench.cli.run_from_args)."""
    kind = strategy.runs_as.kind
    if kind == IN_PROCESS:
        gpu_plan.planned(config, strategy)  # a placement the host cannot give is refused before anything starts
        if srun.in_allocation():
            return srun.run_as_step(config.to_json(), Path(config.output).resolve(), strategy.gpus(config),
                                    config.gpus_per_host)
        if config.hosts and not joined_run():
            from bench.run.launch import one_host

            return one_host.run_on_first_host(config, strategy)
        return run_in_process(config, strategy)
    if kind == TF_CLUSTER:
        from bench.run.launch import cluster as cluster_launcher

        return cluster_launcher.run_cluster(config, strategy)
    if kind == MPI:
        from bench.run.launch import mpi as mpi_launcher

        return mpi_launcher.run_ranks(config, strategy)
    return refuse(f"strategy {config.strategy} has unknown launch kind {kind!r}")
