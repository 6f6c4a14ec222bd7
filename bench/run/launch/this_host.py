"""The host kind of a run without hosts to go to: every process a child of the launcher on this
host, a TensorFlow cluster's tasks on free loopback ports, an MPI job under mpirun (or horovodrun
--gloo) here, each in a scratch TMPDIR of the run's own (bench.run.process.scratch)."""

from __future__ import annotations

import socket
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path

from bench.infra.tools import free_ports
from bench.run.launch.host_kind import HostKind
from bench.run.launch.mpi_launchers import horovodrun_command, mpirun_command
from bench.run.process.scratch import run_scratch


class ThisHost(HostKind):
    def __init__(self, processes: dict[str, int]) -> None:
        self.processes = {role: n for role, n in processes.items() if n > 0}

    @cached_property
    def addresses(self) -> dict[str, list[str]]:
        ports = iter(free_ports(sum(self.processes.values())))
        return {role: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for role, n in self.processes.items()}

    def tf_cluster(self) -> dict[str, list[str]]:
        return self.addresses

    def task_hosts(self) -> dict[str, list[str]]:
        return {role: [socket.gethostname()] * n for role, n in self.processes.items()}

    def command(self, role: str, index: int, argv: list[str], env: dict[str, str]) -> list[str]:
        del role, index, env  # a child of the launcher: it inherits the environment it is given
        return argv

    def ranks(self, argv: list[str], gloo: bool, env: dict[str, str],
              run_dir: Path) -> tuple[list[str], dict[str, str]]:
        del env, run_dir
        return [*(horovodrun_command if gloo else mpirun_command)(self.processes.get("worker", 1)), *argv], {}

    def held(self, run_dir: Path, run_start: float) -> AbstractContextManager[dict[str, str]]:
        del run_dir, run_start
        return run_scratch()
