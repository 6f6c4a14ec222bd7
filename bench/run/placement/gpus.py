"""The placement decision, as plain functions of what they are given: the GPUs a host offers a run
(`host_slots`), a process's local rank on its host (`local_rank_from`, `local_ranks`), and the GPUs
it takes (`choose`). The launcher's plan (bench.run.placement.plan) and each process before
TensorFlow starts (bench.run.placement.visible) call the same ones, so what `--dry-run` prints is
what the processes do. Nothing here imports TensorFlow or needs a GPU."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence

from bench.errors import UsageError
from bench.infra.gpus import gpu_table

# a process's rank among the processes of its job on its host, as each launcher names it; first found wins.
# Open MPI's mpirun, MPICH's and Intel MPI's Hydra, horovodrun (and srun's Gloo ranks: bench.run.launch.slurm.gloo),
# MVAPICH2, Cray PALS, then srun. SLURM_LOCALID comes last: a batch script's mpirun passes the batch step's own on to
# its ranks. A rank of an MPI that sets none of them asks MPI (bench.run.launch.mpi_environment.local_position).
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "HOROVOD_LOCAL_RANK",
                        "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID", "SLURM_LOCALID")
VISIBLE = "CUDA_VISIBLE_DEVICES"
# the CUDA_VISIBLE_DEVICES this process's run was given before any process of it chose: a process that chose
# passes it on, so that a child chooses among what the user (or Slurm) named, not among what its parent took
GIVEN = "DISTBENCH_GIVEN_CUDA_VISIBLE_DEVICES"
UNSET = "unset"
NONE_VISIBLE = "-1"  # CUDA: no device at or after an invalid index, so none at all
# Slurm's GPUs of this step (srun's man page): present when Slurm bound GPUs to the step, which then sees only them
SLURM_STEP_GPUS = "SLURM_STEP_GPUS"
# towers on logical CPU devices share the same cores: past this many, a run only builds its graph slower (a
# 9999-tower mirrored run spent 120 s building devices before it was stopped)
MOST_CPU_TOWERS = 64
GROWTH = "growth"


class PlacementError(UsageError):
    """A placement the hosts cannot give: refused in one line before any process starts."""


def parse_visible(text: str | None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES' entries (indices, UUIDs or MIG names); None where it is not set; [] where it
    hides every GPU (empty, or an invalid first index: CUDA sees none from there on)."""
    if text is None or text == UNSET:
        return None
    entries = [e.strip() for e in text.split(",")]
    out = []
    for entry in entries:
        if not entry or entry.startswith("-"):
            break
        out.append(entry)
    return out


def given_visible(environ: Mapping[str, str]) -> list[str] | None:
    """The GPUs the run was given by CUDA_VISIBLE_DEVICES (the user's, or Slurm's), before any choice."""
    return parse_visible(environ.get(GIVEN, environ.get(VISIBLE)))


# CUDA numbers GPUs fastest first unless told to number them as nvidia-smi (and Slurm's gres.conf) do, by PCI bus
# (CUDA's programming guide, "CUDA Environment Variables"): told so, an index in CUDA_VISIBLE_DEVICES names the GPU
# nvidia-smi lists under it
DEVICE_ORDER = ("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def uuids_of(entries: Sequence[str], table: Sequence[Mapping[str, str]]) -> list[str]:
    """The UUIDs of the GPUs CUDA_VISIBLE_DEVICES' `entries` name, by this process's nvidia-smi `table`: an entry
    that is a UUID is itself; an index names the row nvidia-smi lists under it (where Slurm confines a step's devices
    both number the step's GPUs from 0, so an index is not a GPU's identity across steps, and its UUID is). A GPU
    nvidia-smi does not list (GPUs declared with --gpus-per-host on a host without any) has none."""
    by_index = {row["index"]: row["uuid"] for row in table}
    known = {row["uuid"] for row in table}
    out = []
    for entry in entries:
        if entry.startswith(("GPU-", "MIG-")):  # CUDA takes a UUID's unique prefix too
            out.append(next((u for u in known if u.startswith(entry)), entry))
        elif entry in by_index:
            out.append(by_index[entry])
    return out


def found_gpus() -> list[str]:
    """This host's GPUs by index, as nvidia-smi lists them ([] without nvidia-smi or a GPU)."""
    return [row["index"] for row in gpu_table()]


def host_slots(declared: int | None, found: Sequence[str], given: Sequence[str] | None) -> list[str]:
    """The GPUs a host offers the run: those CUDA_VISIBLE_DEVICES names where it is set, else those found;
    `declared` (--gpus-per-host) takes fewer of them, or stands for GPUs where none are found and none named."""
    base = list(given) if given is not None else list(found)
    if declared is None:
        return base
    if not base:
        return [str(i) for i in range(declared)]
    if declared > len(base):
        where = f"CUDA_VISIBLE_DEVICES names {len(base)}" if given is not None else f"this host has {len(base)}"
        raise PlacementError(f"--gpus-per-host {declared}: {where} GPU(s); give at most {len(base)}")
    return base[:declared]


def offered(declared: int | None, job_gpus_on: Callable[[str], list[str]] | None) -> Callable[[str], list[str]]:
    """The GPUs each host offers a run, for the launcher's plan: --gpus-per-host (`declared`) where given, else
    the Slurm job's on each of its nodes (`job_gpus_on`, bench.run.launch.slurm.srun.Allocation.gpus_on), else
    this host's (CUDA_VISIBLE_DEVICES, or nvidia-smi's), taken to be every host's."""
    if declared is None and job_gpus_on is not None:
        return job_gpus_on
    here, _ = environment_slots(declared)
    return lambda host: list(here)


def workers_a_host_holds(gpus: int, worker_gpus: int) -> int:
    """Worker processes one host takes: its GPUs over a worker's; one where workers take no GPU or it has none."""
    return max(1, gpus // worker_gpus) if worker_gpus and gpus else 1


# how many processes of its job share this process's host, as each launcher names it (LOCAL_RANK_VARIABLES' order)
LOCAL_SIZE_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "HOROVOD_LOCAL_SIZE",
                        "MV2_COMM_WORLD_LOCAL_SIZE", "PALS_LOCAL_SIZE")


def first_number(environ: Mapping[str, str], names: Sequence[str]) -> int | None:
    """The value of the first of `names` set to a number in `environ`, or None."""
    return next((int(environ[n]) for n in names if environ.get(n, "").isdigit()), None)


def local_rank_from(environ: Mapping[str, str]) -> int | None:
    """This process's local rank as its launcher set it (LOCAL_RANK_VARIABLES), or None."""
    return first_number(environ, LOCAL_RANK_VARIABLES)


def local_size_from(environ: Mapping[str, str]) -> int:
    """The processes of this process's job on its host, as its launcher set it (1 where none says)."""
    return first_number(environ, LOCAL_SIZE_VARIABLES) or 1


def role_order(roles: Sequence[str]) -> list[str]:
    """Workers first, then the other roles by name: the order in which processes take a host's GPUs."""
    return ["worker", *sorted(r for r in roles if r != "worker")] if "worker" in roles else sorted(roles)


def local_ranks(hosts: Mapping[str, Sequence[str]], needs: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """{(role, index): its rank among the GPU-taking processes on its host} for processes placed on `hosts`
    ({role: [host of task 0, ...]}), in role_order, then by index; a process that takes no GPU has local rank 0
    among none and is left out of the count."""
    seen: dict[str, int] = {}
    out = {}
    for role in role_order(list(hosts)):
        for index, host in enumerate(hosts[role]):
            if needs.get(role, 0) > 0:
                out[(role, index)] = seen.get(host, 0)
                seen[host] = seen.get(host, 0) + 1
            else:
                out[(role, index)] = 0
    return out


def address_host(address: str) -> str:
    """The host part of a TensorFlow task address, host:port."""
    return address.rpartition(":")[0] or address


def cluster_hosts(cluster: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """{role: [host of each task]} of a TensorFlow cluster ({role: [host:port, ...]})."""
    return {role: [address_host(a) for a in addresses] for role, addresses in cluster.items()}


def choose(need: int, local_rank: int, slots: Sequence[str], share: bool, bound: bool = False) -> list[str]:
    """The GPUs a process takes: `need` of the host's `slots`, those of its local rank (rank r takes
    slots r*need ... r*need+need-1); with `share`, round the slots again where they run out; `bound`: Slurm
    bound GPUs to its step, and where they are as many as it needs they are its own, all taken."""
    if need == 0 or not slots:
        return []
    if bound and len(slots) == need:
        return list(slots)
    if need > len(slots):
        raise PlacementError(f"a process of {need} GPUs on a host of {len(slots)}: at most {len(slots)} "
                             "(--gpus-per-worker, or the towers of --workers)")
    first = local_rank * need
    if first + need > len(slots) and not share:
        raise PlacementError(f"local rank {local_rank} would take GPUs {first}-{first + need - 1} of a host "
                             f"with {len(slots)}: fewer processes on the host, or --share-gpus")
    return [slots[(first + j) % len(slots)] for j in range(need)]


def sharing(processes_needs: Sequence[int], slots: int) -> int:
    """How many processes share one GPU of a host whose processes take `processes_needs` GPUs each."""
    return max(1, math.ceil(sum(processes_needs) / slots)) if slots else 1


def memory_policy(fraction: float | None, shared_by: int) -> str:
    """A GPU process's memory: GROWTH (taken as needed), or a fixed fraction of each GPU's memory (the
    seed's per_process_gpu_memory_fraction; a GPU shared by n processes gives each 1/n of it)."""
    if shared_by > 1:
        return f"fraction {(fraction or 1.0) / shared_by:.3g}"
    return f"fraction {fraction:g}" if fraction else GROWTH


def fraction_of(policy: str | None) -> float | None:
    """The fraction a memory_policy names, or None for growth (or no GPU)."""
    if policy and policy.startswith("fraction "):
        return float(policy.removeprefix("fraction "))
    return None


def as_indices(slots: Sequence[str]) -> list[int | str]:
    """GPU names as the plan's JSON gives them: integers where they are indices (a UUID stays a string)."""
    return [int(s) if s.isdigit() else s for s in slots]


def environment_slots(declared: int | None, environ: Mapping[str, str] = os.environ) -> tuple[list[str], bool]:
    """This host's slots for a process in `environ` (and whether Slurm bound them to its step)."""
    given = given_visible(environ)
    bound = SLURM_STEP_GPUS in environ and given is not None
    return host_slots(None if bound else declared, found_gpus(), given), bound
