"""One preset at a time on an emulated cluster: a second would re-cap or remove the links
under the first one's runs (seen: a default comparison removed a trade-offs preset's cluster
mid-run, and every later run of that preset failed)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

from bench.errors import UsageError


def lock_path(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"distbench-cluster-{name}.lock"


def claim(name: str) -> int:
    """Hold cluster `name` for this process (released by `release` or when the process ends,
    however it ends); UsageError naming the holder if another process holds it."""
    fd = os.open(lock_path(name), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise UsageError(f"emulated cluster '{name}' is in use by another preset (pid {holder}); "
                         f"run one preset on it at a time") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def release(fd: int) -> None:
    os.close(fd)
