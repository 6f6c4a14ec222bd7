"""Ending a training process with os._exit, as one must (a TF server cannot be shut down, and
TensorFlow's teardown at interpreter exit does nothing a finished run needs), without leaving
behind what atexit would have removed: AutoGraph writes each function it converts to a temp file
and registers that file's removal with atexit (tensorflow/python/autograph/pyct/loader.py,
`load_source`), which os._exit skips. The loader keeps each such module in sys.modules."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

AUTOGRAPH_MODULE_PREFIX = "__autograph_generated_file"  # loader.load_source's temp-file prefix


def remove_autograph_files() -> None:
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.startswith(AUTOGRAPH_MODULE_PREFIX) else None
        if path:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def finalize_mpi() -> None:
    """Finalize MPI where mpi4py initialized it (a rank that asked MPI its local rank:
    bench.run.launch.mpi_environment.local_position) and nothing finalized it since: mpirun and srun wait
    for every rank's MPI_Finalize, which os._exit would skip."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()


# Objects kept until the process leaves: a TensorFlow session closes itself when collected, and its close
# waits, with no deadline, on every task it reached (seen: a worker whose ps was stopped hung in Session.__del__)
_KEPT: list[object] = []


def keep_until_exit(thing: object) -> None:
    """Keep `thing` alive until `leave` ends the process (the sessions of a worker of a TensorFlow cluster)."""
    _KEPT.append(thing)


def leave(code: int) -> NoReturn:
    """Flush the output, remove AutoGraph's files, and end the process at once with `code`."""
    sys.stdout.flush()
    sys.stderr.flush()
    remove_autograph_files()
    finalize_mpi()
    os._exit(code)
