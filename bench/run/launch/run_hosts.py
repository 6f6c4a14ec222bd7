"""Where a launched run's processes go, decided once for both launchers (a TF cluster's tasks and
an MPI job's ranks go through one host kind, bench.run.launch.host_kind): Slurm job steps
inside an allocation, the emulated cluster's hosts placed by hand, hosts reached over ssh
(--hosts), or this host; and, on the emulated cluster, the hosts whose links the run meters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.config import RunConfig
from bench.run.contract import Strategy
from bench.run.launch import emulated_hosts
from bench.run.launch.emulated_hosts import Placement
from bench.run.launch.host_kind import HostKind
from bench.run.launch.slurm import srun
from bench.run.launch.ssh_hosts import HostPlacement
from bench.run.launch.this_host import ThisHost
from bench.run.process.records import RunFolder


@dataclass(frozen=True)
class RunHosts:
    kind: HostKind  # where the processes go (docs/adding-a-launcher.md)
    # the emulated cluster's hosts the processes run on (placed by hand, or the nodes Slurm gave)
    network: Placement | None = None

    @classmethod
    def of(cls, config: RunConfig, processes: dict[str, int], gpus: dict[str, int] | None = None,
           probe: bool = True) -> RunHosts:
        """The run's hosts, with `gpus` GPUs a process of each role (a Slurm node holds as many workers as its
        GPUs give); a run folder some allocated node cannot see is refused before any step (unless not `probe`:
        a plan only)."""
        scheduled = srun.place(processes, srun.run_tag(), config.gpus_per_host, gpus) \
            if srun.in_allocation() else None
        network = emulated_hosts.place(config, processes, scheduled) if config.emulated_cluster else None
        if scheduled and probe:
            srun.check_shared(scheduled, Path(config.output).resolve())
        over_ssh = HostPlacement.for_processes(config.hosts, processes) if config.hosts else None
        kind = scheduled or network or over_ssh or ThisHost(processes)
        return cls(kind, network)

    def placement_record(self) -> dict:
        """run.json's `placement`, as the kind describes it (nothing when it has nothing to say)."""
        described = self.kind.describe()
        return {"placement": described} if described else {}

    def started(self, folder: RunFolder, commands: int) -> None:
        """Tell the kind its `commands` commands were started; run.json's `placement` again if that changed
        what the kind describes (Slurm's step ids)."""
        before = self.kind.describe()
        self.kind.started(commands)
        if self.kind.describe() != before:
            folder.update_run(**self.placement_record())

    def closing_record(self, folder: RunFolder, config: RunConfig, strategy: type[Strategy]) -> dict:
        """What run.json records of the hosts when the run closes: the placement, and the emulated links'
        bytes per step against the strategy's formulas."""
        network = {"network": emulated_hosts.network_record(self.network, folder, config, strategy)} \
            if self.network else {}
        return {**self.placement_record(), **network}

    @contextmanager
    def held(self, run_dir: Path, run_start: float) -> Iterator[dict[str, str]]:
        """While the run's processes start and train: the emulated links metered, and what the kind holds
        (bench.run.launch.host_kind.HostKind.held); whatever ends the run, every process left on the
        emulated hosts ended. Yields what the processes started on this host add to their environment."""
        with emulated_hosts.metered(self.network, run_dir, run_start), self.kind.held(run_dir, run_start) as env:
            yield env
