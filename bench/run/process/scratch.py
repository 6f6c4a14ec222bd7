"""A run's scratch folder: the TMPDIR of the processes a launcher starts on its own host,
removed once every one of them has ended. Whatever they leave behind goes with it:

- AutoGraph writes each function it converts to a temporary file that only an atexit handler
  removes (tensorflow/python/autograph/pyct/loader.py), so a process ended by a signal (a killed
  worker, the launcher's SIGTERM after Ctrl-C) left its files in /tmp: 36 after one run of the
  test suite;
- Open MPI's session directory (`ompi.<pid>`), which mpirun removes only when it ends itself.

The folder's name is short: Open MPI puts its session directory, sockets included, under it.
Runs placed on other hosts (Slurm, the emulated cluster, --hosts) keep their hosts' own TMPDIR, as a
folder on this host would not exist there: only this host's kind holds one
(bench.run.launch.this_host)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def run_scratch() -> Iterator[dict[str, str]]:
    """The environment that gives a run's processes on this host a TMPDIR of their own; the folder
    is removed when the block ends."""
    path = tempfile.mkdtemp(prefix="distbench-")
    try:
        yield {"TMPDIR": path}
    finally:
        shutil.rmtree(path, ignore_errors=True)
