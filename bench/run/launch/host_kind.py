"""What a host kind is, the launchers' one interface to hosts: where a run's processes go, and
what the run holds there while it trains (docs/adding-a-launcher.md). The machinery
(bench.run.launch.cluster, bench.run.launch.mpi) reads only these members, the same for every
kind: this host, Slurm job steps, the emulated cluster's hosts, hosts over ssh.

A kind fills the first three; the others are what a kind with nothing to hold, note or explain does."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from bench.run.placement.gpus import cluster_hosts


class HostKind:
    # whether the launcher holds each started command's stdin open: a kind that reaches its hosts over a
    # connection (ssh) ends a task there when that stdin closes (bench.run.launch.remote_task)
    holds_stdin = False

    def tf_cluster(self) -> dict[str, list[str]]:
        """Each role's task addresses, host:port."""
        raise NotImplementedError

    def task_hosts(self) -> dict[str, list[str]]:
        """Each role's tasks' hosts, by name (the placement's plan: bench.run.placement)."""
        return cluster_hosts(self.tf_cluster())

    def command(self, role: str, index: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """Task `index` of `role`'s command as started from this host; `env` is what the launcher gives it."""
        raise NotImplementedError

    def ranks(self, argv: list[str], gloo: bool, env: dict[str, str],
              run_dir: Path) -> tuple[list[str], dict[str, str]]:
        """The MPI job whose ranks run `argv`, rank i where worker i is placed, as started from this host
        (through mpirun, or horovodrun when `gloo`), and what its launcher's environment adds to `env`
        (what the launcher gives every rank); `run_dir` holds anything the job needs written."""
        raise NotImplementedError

    def describe(self) -> dict | None:
        """The placement, for run.json's `placement` (None: nothing to record)."""
        return None

    def held(self, run_dir: Path, run_start: float) -> AbstractContextManager[dict[str, str]]:
        """While the run's processes start and train: what the kind holds on its hosts, ended whatever
        ends the run; yields what the processes started on this host add to their environment."""
        del run_dir, run_start
        return nullcontext({})

    def serving(self, gloo: bool) -> AbstractContextManager[dict[str, str]]:
        """While an MPI job's ranks run: what they need served that their launcher does not serve, and
        the environment that leads them to it."""
        del gloo
        return nullcontext({})

    def started(self, commands: int) -> None:
        """The run's `commands` commands were started (a relaunch's replace the last ones)."""

    def end_started(self) -> None:
        """End what the started commands left running that ending them does not end (before a relaunch)."""

    def explain(self, status: str) -> str:
        """A run's final status as the kind can explain it (a scheduler's reason for a failure)."""
        return status
