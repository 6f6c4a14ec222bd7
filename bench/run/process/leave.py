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


def leave(code: int) -> NoReturn:
    """Flush the output, remove AutoGraph's files, and end the process at once with `code`."""
    sys.stdout.flush()
    sys.stderr.flush()
    remove_autograph_files()
    from bench.run.launch.mpi_environment import finalize_mpi

    finalize_mpi()
    os._exit(code)
