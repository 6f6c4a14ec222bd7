"""An emulated cluster with its Slurm, made for a set of runs and removed after them whatever
happens: what a preset asks for (the presets never start daemons themselves)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bench.infra.emulated import network, slurm
from bench.infra.emulated.claim import claim, release


class HeldCluster:
    """The cluster `name` of `hosts` hosts of `budget_cores` cores each (None: sharing the machine's),
    its links capped at `link_mbit` until `cap` says otherwise."""

    def __init__(self, name: str, hosts: int, link_mbit: float, budget_cores: float | None = None) -> None:
        self.name, self.hosts, self.link_mbit, self.budget_cores = name, hosts, link_mbit, budget_cores

    def cap(self, link_mbit: float) -> None:
        """Re-cap every host's link (nothing to do when it already is)."""
        if link_mbit == self.link_mbit:
            return
        said(network.up(self.hosts, link_mbit, self.name, self.budget_cores))
        self.link_mbit = link_mbit


def said(cluster: network.Cluster) -> network.Cluster:
    cores = f", {cluster.budget_cores:g} cores each" if cluster.budget_cores else ""
    print(f"links capped at {cluster.link_mbit:g} Mbit/s on {len(cluster.hosts)} hosts{cores} ({cluster.subnet})",
          file=sys.stderr, flush=True)
    return cluster


@contextmanager
def cluster_with_slurm(name: str, hosts: int, link_mbit: float,
                       budget_cores: float | None = None) -> Iterator[HeldCluster]:
    """The cluster up with its Slurm daemons and this process's environment pointing at them (as
    `eval "$(./run_bench.sh cluster env)"` does for a user); raises UsageError before anything is
    made when a tool is missing or another process holds the name."""
    network.require_tools()
    held = claim(name)
    try:
        slurm.require_slurm()
        slurm.up(said(network.up(hosts, link_mbit, name, budget_cores)))
        os.environ.update(slurm.slurm_env(name))
        yield HeldCluster(name, hosts, link_mbit, budget_cores)
    finally:
        slurm.down(name)
        network.down(name)
        release(held)
