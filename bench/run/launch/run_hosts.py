"""Where a launched run's processes go, decided once for both launchers (a TF cluster's tasks,
an MPI job's ranks, both through the Placed protocol): Slurm job steps inside an allocation, the
emulated cluster's hosts (placed by hand, or the nodes Slurm gave), hosts reached over ssh
(--hosts), or children of this process on this host; and what the run holds on them while it
trains."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.config import RunConfig
from bench.run.launch import emulated_hosts
from bench.run.launch.emulated_hosts import Placement
from bench.run.launch.slurm import srun
from bench.run.launch.slurm.srun import SlurmPlacement
from bench.run.launch.ssh_hosts import HostPlacement
from bench.run.process.scratch import run_scratch


class Placed(Protocol):
    """What a launch kind that places tasks on hosts gives (docs/adding-a-launcher.md)."""

    def tf_cluster(self) -> dict[str, list[str]]:
        """Each role's task addresses, host:port."""

    def command(self, role: str, index: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """Task `index` of `role`'s command as started from this host; `env` is what the launcher gives it."""

    def describe(self) -> dict:
        """The placement, for run.json."""

    def ranks(self, argv: list[str], gloo: bool, env: dict[str, str],
              run_dir: Path) -> tuple[list[str], dict[str, str]]:
        """The MPI job whose ranks run `argv`, rank i where worker i is placed, as started from this host
        (through mpirun, or horovodrun when `gloo`), and what its launcher's environment adds to `env`
        (what the launcher gives every rank); `run_dir` holds anything the job needs written."""


@dataclass(frozen=True)
class RunHosts:
    scheduled: SlurmPlacement | None  # job steps of the Slurm allocation this launcher runs in
    placement: Placement | None  # hosts of the emulated cluster (--emulated-cluster)
    # any other launch kind (docs/adding-a-launcher.md): hosts without a scheduler (--hosts)
    elsewhere: Placed | None = None

    @classmethod
    def of(cls, config: RunConfig, processes: dict[str, int]) -> RunHosts:
        """The run's hosts; a run folder some allocated node cannot see is refused before any step."""
        scheduled = srun.place(processes, srun.run_tag()) if srun.in_allocation() else None
        placement = emulated_hosts.place(config, processes, scheduled) if config.emulated_cluster else None
        if scheduled:
            srun.check_shared(scheduled, Path(config.output).resolve())
        elsewhere = HostPlacement.for_processes(config.hosts, processes) if config.hosts else None
        return cls(scheduled, placement, elsewhere)

    @property
    def local(self) -> bool:
        return not self.placed

    @property
    def holds_stdin(self) -> bool:
        """Whether the launcher holds each started command's stdin open: a kind that reaches its hosts
        over a connection (ssh) ends a task there when that stdin closes (bench.run.launch.remote_task)."""
        return self.elsewhere is not None

    @property
    def placed(self) -> Placed | None:
        """The placement the run's tasks go by (None: children of this process on this host)."""
        return self.scheduled or self.placement or self.elsewhere

    def tf_cluster(self, local: dict[str, list[str]]) -> dict[str, list[str]]:
        """Each role's task addresses: where the placement put them, or `local`'s loopback ports."""
        return self.placed.tf_cluster() if self.placed else local

    @contextmanager
    def held(self, run_dir: Path, run_start: float) -> Iterator[dict[str, str]]:
        """While the run's processes start and train: the emulated links metered, and whatever ends
        the run, every process left on those hosts and every Slurm step ended. Yields what the
        processes started on this host add to their environment (a TMPDIR of the run's own, removed
        after them: bench.run.process.scratch)."""
        with (emulated_hosts.metered(self.placement, run_dir, run_start), srun.steps_ended(self.scheduled),
              run_scratch(local=self.local) as scratch_env):
            yield scratch_env
