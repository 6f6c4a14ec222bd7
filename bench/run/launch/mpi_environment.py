"""Whether this process is a rank of mpirun / horovodrun, read from the variables they set."""

from __future__ import annotations

import os

# Open MPI, MPICH / Intel MPI (PMI), PMIx launchers, horovodrun --gloo; first found wins
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "HOROVOD_RANK")
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "HOROVOD_SIZE")


def _first(names: tuple[str, ...]) -> int | None:
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def under_mpi() -> bool:
    return any(v in os.environ for v in RANK_VARIABLES)


def world_rank() -> int | None:
    return _first(RANK_VARIABLES)


def world_size() -> int | None:
    return _first(SIZE_VARIABLES)


def local_position() -> tuple[int, int]:
    """This process's (local rank, processes of its job on its host): as its launcher set them
    (bench.run.placement.gpus.LOCAL_RANK_VARIABLES), else, for a rank of an MPI whose variables the suite does not
    know, MPI's own answer (COMM_WORLD split by shared memory, through mpi4py, before TensorFlow starts: MPI is then
    initialized here, and Horovod takes it as it is); (0, 1) for a process alone."""
    from bench.run.placement.gpus import local_rank_from, local_size_from

    known = local_rank_from(os.environ)
    if known is not None or (world_size() or 1) <= 1:
        return known or 0, local_size_from(os.environ)
    try:
        from mpi4py import MPI
    except ImportError as exc:
        from bench.errors import UsageError

        raise UsageError(f"rank {world_rank()} of {world_size()}: its launcher sets no local rank the suite knows, "
                         f"and mpi4py, which would ask MPI, does not import ({exc})") from None
    host = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    return host.Get_rank(), host.Get_size()

