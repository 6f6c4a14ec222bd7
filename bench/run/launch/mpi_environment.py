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
