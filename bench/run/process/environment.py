"""Where a run came from: machine, software versions and the suite's git commit."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from bench import CHECKOUT
from bench.infra import cpu_quota
from bench.infra.gpus import gpu_table, tensorflow_build
from bench.infra.peak import cpu_model, vector_extensions
from bench.infra.tools import tensorflow_version, version

SUITE_ROOT = CHECKOUT


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def gpus() -> list[str]:
    """This host's GPU names from nvidia-smi, without importing TensorFlow."""
    return [row["name"] for row in gpu_table()]


def git_commit() -> str | None:
    commit = _run(["git", "rev-parse", "HEAD"], SUITE_ROOT)
    if commit and _run(["git", "status", "--porcelain", "--untracked-files=no"], SUITE_ROOT):
        commit += "-dirty"
    return commit


def mpi_version() -> str | None:
    from bench.infra.tools import mpirun_version

    out = mpirun_version()
    return out.splitlines()[0] if out else None


def describe() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_extensions": vector_extensions(),
        "cpu_quota_cores": cpu_quota.own_cores(),  # a cgroup's CPU limit on the run's launcher, if any
        "gpus": gpus(),
        "python": platform.python_version(),
        "tensorflow": tensorflow_version(),
        "tensorflow_build": tensorflow_build(),
        "horovod": version("horovod"),
        "mpi": mpi_version(),
        "mpi4py": version("mpi4py"),
        "numpy": version("numpy"),
        "pandas": version("pandas"),
        "suite_commit": git_commit(),
    }
