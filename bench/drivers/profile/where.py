"""Where `python -m bench profile` measures: across the nodes of the Slurm allocation it runs
in (2 or more), each process a job step on its node; or on this machine, over loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.drivers.micro.run import collective_argv, horovod_environment
from bench.drivers.profile.fold import LATENCY_BYTES
from bench.drivers.profile.ps_rate import CORES_ENV, EVERY_WORKER, NEIGHBOUR
from bench.errors import UsageError
from bench.infra.tools import free_ports
from bench.run.launch.slurm import srun
from bench.run.launch.ssh_hosts import wrapped

RANK = [sys.executable, "-m", "bench.drivers.micro.rank_pytest"]
COLLECTIVES = Path(__file__).parent.parent / "micro" / "collective_test.py"
PS_TASK = [sys.executable, "-m", "bench.drivers.profile.ps_rate"]
# the sizes of an allreduce run before its rates' buffers: Horovod's at 64 KB, for the summary's fit; raw
# MPI's 1 KiB alone, its per-hop latency
SMALL_SIZES = {"mpi4py": (LATENCY_BYTES,), "horovod-mpi": (64 * 1024,), "horovod-gloo": (64 * 1024,)}
RATES_BY_SIZE = ("horovod-mpi", "horovod-gloo")  # their rate at every size of the sweep; raw MPI's is not a constant
ROUNDS = 5
# on one machine MPI would move its bytes through shared memory: TCP, as between hosts
LOOPBACK_TCP = {"OMPI_MCA_btl": "tcp,self"}
# raw MPI's message beside a busy CPU: numpy's BLAS one thread each, so a rank keeps as many cores busy as its
# computing threads (collective_test.cores_of_this_rank), not every core of the machine per rank
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ENDING_S = 10  # a measurement past its limit: SIGTERM, then SIGKILL after this
PLACEMENT_FILE = "placement.json"  # a gRPC measurement's tasks' nodes, per role


@dataclass
class Where:
    placement_of: Callable[[dict[str, list[str]]], srun.SlurmPlacement] | None  # None: on one machine
    nodes: tuple[str, ...]
    ranks_per_node: int
    allocation: srun.Allocation | None = None

    @classmethod
    def here(cls, ranks_per_node: int) -> Where:
        if srun.in_allocation():
            allocation = srun.Allocation.current()
            if len(allocation.nodes) >= 2:
                return cls(lambda roles: srun.SlurmPlacement(allocation, roles, "own", f"profile-{os.getpid()}"),
                           allocation.nodes, ranks_per_node, allocation)
        return cls(None, ("localhost",), ranks_per_node)

    def check_fits(self) -> None:
        """Refuse, before any measurement, more ranks than the allocation holds: every allreduce's job
        step would be refused by Slurm ("More processors requested than permitted")."""
        if self.allocation is None:
            return
        ranks, nodes = len(self.nodes) * self.ranks_per_node, len(self.nodes)
        if ranks > self.allocation.tasks:
            raise UsageError(f"--ranks-per-node {self.ranks_per_node}: {ranks} ranks on {nodes} nodes, more than "
                             f"Slurm job {self.allocation.job_id} holds ({self.allocation.tasks} processes): ask "
                             f"for them (salloc -N {nodes} --ntasks-per-node {self.ranks_per_node}) or fewer")

    def check_output(self, folder: Path) -> None:
        """Refuse, before any measurement, an output folder some node of the allocation cannot see:
        each process writes its figures there from its own node (the runs' own check)."""
        if self.placement_of is not None:
            srun.check_shared(self.placement_of({"worker": list(self.nodes)}), folder.resolve())

    @property
    def describes(self) -> str:
        if self.placement_of is None:
            return "this machine over loopback (TCP), measured by ./run_bench.sh profile"
        return (f"{len(self.nodes)} nodes of a Slurm allocation ({', '.join(self.nodes)}), {self.ranks_per_node} "
                "allreduce rank(s) per node, measured across them by ./run_bench.sh profile")

    def allreduce(self, transport: str, out: Path, rate_sizes: Sequence[int], timeout_s: float) -> bool:
        """One run of `transport`'s allreduce benchmark, its JSON into `out`; `rate_sizes`, ascending:
        the buffers a rate is measured at."""
        rates = rate_sizes if transport in RATES_BY_SIZE else ()
        sizes = ",".join(str(b) for b in (*SMALL_SIZES[transport], *rates))
        env = {**os.environ, "DISTBENCH_MICRO_MODE": "fast", "DISTBENCH_MICRO_SIZES": sizes,
               "DISTBENCH_MICRO_ROUNDS": str(ROUNDS), "DISTBENCH_MICRO_COMPUTE_ROUNDS": str(ROUNDS),
               "DISTBENCH_MICRO_TRANSPORT": transport,
               **horovod_environment(transport), **(ONE_BLAS_THREAD if transport == "mpi4py" else {})}
        if self.placement_of is None:
            ranks = max(2, self.ranks_per_node)
            return _run(collective_argv(transport, ranks, out), {**env, **LOOPBACK_TCP}, out, timeout_s)
        ranks = len(self.nodes) * self.ranks_per_node
        placement = self.placement_of({"worker": [self.nodes[i % len(self.nodes)] for i in range(ranks)]})
        argv = [*RANK, str(out), f"{transport}-np{ranks}", str(COLLECTIVES)]
        with placement.serving(transport == "horovod-gloo") as meet:  # srun meets MPI by PMIx
            return _run(placement.srun_ranks(argv, mpi=transport != "horovod-gloo"), {**env, **meet}, out, timeout_s)

    def ps_job(self, workers: int, out: Path, rounds: int, rate_bytes: int, timeout_s: float,
               tasks: int | None = None, computing: bool = False, ps_cores: int | None = None,
               every_worker: bool = False) -> bool:
        """One ps task and `workers` workers of the gRPC measurement (bench.drivers.profile.ps_rate):
        the ps on a node of its own, the workers on another; `computing`: a computing process beside
        the ps task on its node (ps_rate.NEIGHBOUR), measured with every worker at once, as with
        `every_worker`; `ps_cores`: the ps tasks held to that many of their node's cores (ps_rate.hold).
        Or (`tasks`: the layout check) `tasks`
        ps tasks beside the workers, every task on the node `--hosts` would put it on (workers first,
        then the ps tasks, round-robin over the nodes: ssh_hosts.wrapped); `out`/placement.json says which."""
        mode = str(tasks) if tasks else EVERY_WORKER if computing or every_worker else ""
        after = [str(rounds), str(rate_bytes), *([mode] if mode else [])]
        commands = self._ps_commands(workers, tasks, [str(out)], after, out, computing)
        held = {**os.environ, CORES_ENV: str(ps_cores)} if ps_cores else None
        with _log(out) as log:
            servers = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=held)
                       for argv in commands["ps"]]
            servers += [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
                        for argv in commands.get(NEIGHBOUR, [])]
            try:
                done = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log) for argv in commands["worker"]]
                return all(_wait(p, timeout_s) == 0 for p in done)
            finally:
                for ps in servers:
                    _end(ps)  # a ps task serves until it is ended

    def _ps_commands(self, workers: int, tasks: int | None, before: list[str], after: list[str],
                     out: Path, computing: bool = False) -> dict[str, list[list[str]]]:
        """Each role's commands: `before` CLUSTER ROLE INDEX `after`."""
        counts = {"worker": workers, "ps": tasks or 1}
        if self.placement_of is None:
            ports = iter(free_ports(workers + counts["ps"]))
            cluster = {role: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for role, n in counts.items()}
            nodes = {role: ["localhost"] * n for role, n in counts.items()}
        else:
            nodes = wrapped(self.nodes, counts) if tasks else {"worker": [self.nodes[0]] * workers,
                                                                "ps": [self.nodes[1]]}
        if computing:
            counts[NEIGHBOUR], nodes[NEIGHBOUR] = 1, list(nodes["ps"])
        if self.placement_of is None:
            def wrap(role: str, index: int) -> list[str]:
                return list(PS_TASK)
        else:
            placement = self.placement_of(nodes)
            cluster = {role: hosts for role, hosts in placement.tf_cluster().items() if role != NEIGHBOUR}

            def wrap(role: str, index: int) -> list[str]:
                return placement.srun(role, index, PS_TASK)

        (out / PLACEMENT_FILE).write_text(json.dumps(nodes))
        return {role: [[*wrap(role, i), *before, json.dumps(cluster), role, str(i), *after] for i in range(n)]
                for role, n in counts.items()}


def _log(out: Path):
    return open(out / "profile.log", "ab")  # noqa: SIM115 - handed to a child process, closed with ours


def _end(process: subprocess.Popen) -> None:
    """SIGTERM, which srun passes on to its job step's tasks; SIGKILL if it is still there after ENDING_S."""
    process.terminate()
    try:
        process.wait(timeout=ENDING_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait(process: subprocess.Popen, timeout_s: float) -> int | None:
    """Its exit status; past `timeout_s`, None, once it is ended."""
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _end(process)
        return None


def _run(argv: list[str], env: dict[str, str], out: Path, timeout_s: float) -> bool:
    with _log(out) as log:
        return _wait(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT), timeout_s) == 0
