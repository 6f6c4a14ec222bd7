"""A run's plan: every process it starts that trains or serves, with its host, role, local rank, the GPUs it
sees, its memory policy and the collective it runs. Made by the launcher from where its host kind puts the
processes and checked before any starts (a host asked for more GPUs than it has is refused in one line);
`--dry-run` prints it (bench.run.launch.gpu_plan.show); the processes make the same choice for themselves
(bench.run.placement.visible)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from bench.config import RunConfig
from bench.run.contract import TF_CLUSTER, Strategy
from bench.run.placement.gpus import (
    MOST_CPU_TOWERS,
    PlacementError,
    as_indices,
    choose,
    local_ranks,
    memory_policy,
    role_order,
    sharing,
)

COORDINATOR = "coordinator"


@dataclass(frozen=True)
class PlannedProcess:
    host: str
    role: str  # worker (every training process, a Horovod rank too), ps, chief or coordinator
    index: int
    local_rank: int
    gpus: list[int | str]  # the host's GPUs it sees, by index ([] none)
    memory: str | None  # its GPU memory policy (None: no GPU)
    collective: str  # what it exchanges through, in words

    def as_json(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        gpus = ",".join(map(str, self.gpus)) or "none"
        return (f"{self.host:<14} {self.role + ' ' + str(self.index):<14} local rank {self.local_rank:<3} "
                f"GPUs {gpus:<9} memory {self.memory or '-':<15} {self.collective}")


def display_role(strategy: type[Strategy], config: RunConfig, role: str) -> str:
    """A role as the plan names it: a TF cluster's trainer that is not a worker schedules the others' steps."""
    if strategy.runs_as.kind == TF_CLUSTER and role == strategy.runs_as.trainer_role(config) and role != "worker":
        return COORDINATOR
    return role


def make_plan(config: RunConfig, strategy: type[Strategy], hosts: Mapping[str, Sequence[str]],
              slots_of: Callable[[str], list[str]], ranks: Mapping[tuple[str, int], int] | None = None,
              indices: Mapping[str, Sequence[int]] | None = None) -> list[PlannedProcess]:
    """The plan of processes placed on `hosts` ({role: [host of each task]}), on hosts offering `slots_of(host)`
    GPUs; `ranks` and `indices` where the processes' local ranks and indices are known otherwise (one rank of
    the user's mpirun). Raises PlacementError for a placement the hosts cannot give."""
    needs = strategy.gpus(config)
    ranks = ranks or local_ranks(hosts, needs)
    check_hosts(config, hosts, needs, slots_of, strategy.nccl_on_gpus(config))
    on_host: dict[str, list[int]] = {}  # the GPUs each process of a host takes
    for role, placed in hosts.items():
        for host in placed:
            on_host.setdefault(host, []).append(needs.get(role, 0))
    out = []
    for role in role_order(list(hosts)):
        for k, host in enumerate(hosts[role]):
            index = indices[role][k] if indices else k
            slots = slots_of(host)
            gpus = choose(needs.get(role, 0), ranks[(role, k)], slots, config.share_gpus)
            memory = memory_policy(config.gpu_memory_fraction, sharing(on_host[host], len(slots))) if gpus else None
            out.append(PlannedProcess(host, display_role(strategy, config, role), index, ranks[(role, k)],
                                      as_indices(gpus), memory, strategy.collective(config, role, bool(gpus))))
    return out


def check_hosts(config: RunConfig, hosts: Mapping[str, Sequence[str]], needs: Mapping[str, int],
                slots_of: Callable[[str], list[str]], nccl: bool = False) -> None:
    """Every host gives what its processes take: GPUs enough (unless shared, and never for an NCCL collective),
    towers a host without GPUs can build as logical CPU devices."""
    taking: dict[str, list[str]] = {}
    for role in role_order(list(hosts)):
        for index, host in enumerate(hosts[role]):
            need = needs.get(role, 0)
            slots = slots_of(host)
            if not slots and need > MOST_CPU_TOWERS:
                raise PlacementError(f"{need} towers in one process on {host}, which has no GPU: towers there are "
                                     f"logical CPU devices sharing its {os.cpu_count()} cores, at most "
                                     f"{MOST_CPU_TOWERS}")
            if slots and need > len(slots):
                raise PlacementError(f"{role} {index} takes {need} GPUs and {host} has {len(slots)}: at most "
                                     f"{len(slots)} (--gpus-per-host, the towers of --workers, --gpus-per-worker)")
            taking.setdefault(host, []).extend([f"{role} {index}"] * need if slots else [])
    for host, takers in taking.items():
        slots = slots_of(host)
        if len(takers) > len(slots) and config.share_gpus and nccl:
            raise PlacementError(f"--share-gpus: {config.strategy} all-reduces through NCCL, which refuses two ranks "
                                 f"on one GPU ({len(takers)} GPU processes on {host}, {len(slots)} GPUs): fewer "
                                 "workers per host or more hosts")
        if len(takers) > len(slots) and not config.share_gpus:
            names = sorted(set(takers), key=takers.index)
            raise PlacementError(f"{len(names)} GPU processes on {host} ({names[0]} ... {names[-1]}) take "
                                 f"{len(takers)} GPUs and it has {len(slots)}: fewer workers per host, more hosts, "
                                 "or --share-gpus")
