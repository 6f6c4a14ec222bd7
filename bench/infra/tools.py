"""This machine's programs and ports: the programs the suite runs (mpirun, horovodrun, the
Slurm daemons), the virtual environment's own first so that `.venv/bin/python -m bench` works
without activating the venv; and ports free to listen on."""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path


def find_tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


@functools.lru_cache(maxsize=1)
def mpirun_version() -> str:
    """What `mpirun --version` prints ("" without an mpirun, or if it fails), read once a process."""
    mpirun = find_tool("mpirun")
    if mpirun is None:
        return ""
    try:
        done = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports that were free a moment ago."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
        return ports


def port_in_use(port: int, host: str = "") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as a server binds: a listener makes the port taken, a closed connection's TIME_WAIT does not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False
