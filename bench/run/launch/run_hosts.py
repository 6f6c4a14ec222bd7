"""Where a launched run's processes go, decided once for both launchers (a TF cluster's tasks,
an MPI job's ranks): Slurm job steps inside an allocation, the emulated cluster's hosts (placed
by hand, or the nodes Slurm gave), or children of this process on this host; and what the run
holds on them while it trains."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.config import RunConfig
from bench.run.launch import emulated_hosts
from bench.run.launch.emulated_hosts import Placement
from bench.run.launch.slurm import srun
from bench.run.launch.slurm.srun import SlurmPlacement
from bench.run.process.scratch import run_scratch


@dataclass(frozen=True)
class RunHosts:
    scheduled: SlurmPlacement | None  # job steps of the Slurm allocation this launcher runs in
    placement: Placement | None  # hosts of the emulated cluster (--emulated-cluster)

    @classmethod
    def of(cls, config: RunConfig, processes: dict[str, int]) -> RunHosts:
        """The run's hosts; a run folder some allocated node cannot see is refused before any step."""
        scheduled = srun.place(processes, srun.run_tag()) if srun.in_allocation() else None
        placement = emulated_hosts.place(config, processes, scheduled) if config.emulated_cluster else None
        if scheduled:
            srun.check_shared(scheduled, Path(config.output).resolve())
        return cls(scheduled, placement)

    @property
    def local(self) -> bool:
        return not (self.scheduled or self.placement)

    @contextmanager
    def held(self, run_dir: Path, run_start: float) -> Iterator[dict[str, str]]:
        """While the run's processes start and train: the emulated links metered, and whatever ends
        the run, every process left on those hosts and every Slurm step ended. Yields what the
        processes started on this host add to their environment (a TMPDIR of the run's own, removed
        after them: bench.run.process.scratch)."""
        with (emulated_hosts.metered(self.placement, run_dir, run_start), srun.steps_ended(self.scheduled),
              run_scratch(local=self.local) as scratch_env):
            yield scratch_env
