"""This machine's programs and ports: the programs the suite runs (mpirun, horovodrun, the
Slurm daemons), the virtual environment's own first so that `.venv/bin/python -m bench` works
without activating the venv; ports free to listen on; and the folder the suite keeps between
checkouts."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path


def suite_cache() -> Path:
    """Where the suite keeps what outlives a checkout on this machine (run_bench.sh's CACHE: Horovod's
    wheels, analysed models, the first-run tests' record)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "distbench"


def version(dist: str) -> str | None:
    """An installed distribution's version, None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def tensorflow_version() -> str | None:
    """TensorFlow's version, whichever build setup installed (setup: tensorflow-cpu; setup --gpu: tensorflow)."""
    return version("tensorflow-cpu") or version("tensorflow")


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


# servers' ports: below Linux's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default),
# from which every outgoing connection (gRPC clients', MPI's, srun's) takes its own port, so a server's port
# drawn from it can be taken before the server binds ("Could not start gRPC server": a local ps-coordinator
# run's ps, once, beside the suite's other runs; the profile's gRPC part on Slurm nodes before)
SERVER_PORTS = (20000, 31000)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports of SERVER_PORTS, drawn at random, that were free a moment ago."""
    draw = random.SystemRandom()
    ports: list[int] = []
    while len(ports) < count:
        port = draw.randrange(*SERVER_PORTS)
        if port not in ports and not port_in_use(port, host):
            ports.append(port)
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
