"""A run's plan of processes (bench.run.placement.plan) as its launcher sees it: where the host kind puts each
process, the GPUs each host offers (declared with --gpus-per-host, the Slurm job's, or this host's, taken for
its peers), each process's local rank there. Made and checked before anything starts, recorded in run.json's
`plan`, printed by --dry-run (`show`)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

from bench.config import RunConfig
from bench.run.contract import IN_PROCESS, MPI, Strategy
from bench.run.launch.host_kind import HostKind
from bench.run.launch.mpi_environment import local_position, under_mpi, world_rank
from bench.run.launch.slurm import srun
from bench.run.launch.tf_config import hand_started_cluster
from bench.run.placement.gpus import cluster_hosts, offered
from bench.run.placement.plan import PlannedProcess, make_plan


def slots_of(config: RunConfig, allocation: srun.Allocation | None) -> Callable[[str], list[str]]:
    """The GPUs each host offers the run (bench.run.placement.gpus.offered), `allocation` the Slurm job's."""
    return offered(config.gpus_per_host, allocation.gpus_on if allocation is not None else None)


def of_kind(config: RunConfig, strategy: type[Strategy], kind: HostKind) -> list[PlannedProcess]:
    """The plan of a launched run whose processes go where `kind` puts them; raises PlacementError."""
    return make_plan(config, strategy, kind.task_hosts(), slots_of(config, allocation()))


def recorded(plan: list[PlannedProcess]) -> dict:
    """run.json's `plan`."""
    return {"plan": [p.as_json() for p in plan]}


def allocation() -> srun.Allocation | None:
    """The Slurm job this launcher runs in (read once a plan), or None."""
    return srun.Allocation.current() if srun.in_allocation() else None


def one_process_host(config: RunConfig, job: srun.Allocation | None) -> str:
    """Where a one-process run goes: the allocation's first node, the first of --hosts, or here."""
    if job is not None:
        return job.nodes[0]
    return config.hosts[0] if config.hosts else socket.gethostname()


def planned(config: RunConfig, strategy: type[Strategy]) -> list[PlannedProcess]:
    """The plan of the run `config` would start from this process, whichever way it starts: this rank of the
    user's mpirun (its own entry), this task of a cluster started by hand (the cluster's), a one-process run,
    or a launched run's processes where its host kind would put them (nothing is started or probed)."""
    kind = strategy.runs_as.kind
    if kind == MPI and under_mpi():
        rank = world_rank() or 0
        return make_plan(config, strategy, {"worker": [socket.gethostname()]}, slots_of(config, None),
                         ranks={("worker", 0): local_position()[0]}, indices={"worker": [rank]})
    if config.job_name is not None:
        return make_plan(config, strategy, cluster_hosts(hand_started_cluster(config)), slots_of(config, None))
    if kind == IN_PROCESS:
        job = allocation()
        return make_plan(config, strategy, {"worker": [one_process_host(config, job)]}, slots_of(config, job))
    from bench.run.launch.run_hosts import RunHosts

    processes = {r: n for r, n in strategy.processes(config).items() if n > 0}
    return of_kind(config, strategy, RunHosts.of(config, processes, strategy.gpus(config), probe=False).kind)


def show(config: RunConfig, strategy: type[Strategy], as_json: bool) -> int:
    """--dry-run: the processes the run would start, a line each (`as_json`: {"processes": [...]} on stdout), and
    none started."""
    plan = planned(config, strategy)
    if as_json:
        print(json.dumps({"processes": [p.as_json() for p in plan]}))
        return 0
    gpus = sum(len(p.gpus) for p in plan)
    print(f"{config.strategy}, {config.workers} worker(s): {len(plan)} process(es), {gpus} GPU(s) "
          "(--dry-run: nothing started)")
    for process in plan:
        print(process.line())
    return 0
