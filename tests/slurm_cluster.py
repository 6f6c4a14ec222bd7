"""An emulated cluster with its real Slurm daemons, for tests that reach it as a user does."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from tests.processes import CLUSTER_LIMIT_S, bench


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, Slurm's daemons)"
    for tool in ("ip", "tc", "unshare", "slurmctld", "slurmd", "munged", "salloc"):
        if shutil.which(tool) is None:
            return f"needs {tool} (./run_bench.sh test installs slurm-wlm and munge as root)"
    return None


WHY_NOT = _why_not()


@contextmanager
def slurm_cluster(name: str, hosts: int, env: dict[str, str], gpus_per_host: int = 0) -> Iterator[dict[str, str]]:
    """Cluster `name` up with `hosts` hosts at 1000 Mbit/s, each declaring `gpus_per_host` GPUs to Slurm; `env` as
    after `eval "$(./run_bench.sh cluster env)"` (with GPUs, the stand-in nvidia-smi first on its PATH); the cluster
    down afterwards."""
    up = bench("cluster", "up", "--hosts", str(hosts), "--link-mbit", "1000", "--name", name, "--gpus-per-host",
               str(gpus_per_host), timeout=CLUSTER_LIMIT_S)
    assert up.returncode == 0, up.stderr
    try:
        env = dict(env)
        for line in bench("cluster", "env", "--name", name).stdout.split():
            if "=" in line:
                key, _, value = line.partition("=")
                env[key] = value.replace('"$PATH"', env.get("PATH", ""))
        yield env
    finally:
        down = bench("cluster", "down", "--name", name, timeout=CLUSTER_LIMIT_S)
        assert down.returncode == 0, down.stderr
