"""One run on the emulated cluster: choose its hosts, meter their links while it
trains, and make sure nothing of it is left on the hosts afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.config import RunConfig
from bench.emulated import network
from bench.emulated.meter import Meter, bytes_per_step
from bench.emulated.placement import Placement
from bench.errors import UsageError
from bench.launch.slurm import SlurmPlacement
from bench.metrics import Gradient
from bench.run.records import RunFolder
from strategies.base import Strategy


def place(config: RunConfig, processes: dict[str, int], scheduled: SlurmPlacement | None = None) -> Placement:
    """Hosts for every process of the run (the nodes Slurm gave it, when `scheduled`); a missing
    cluster or a busy host is a usage error."""
    needed = sum(processes.values())
    cluster = network.get(config.emulated_cluster, min_hosts=1 if scheduled else needed)
    if scheduled:
        return from_slurm(cluster, scheduled)
    placement = Placement.for_processes(cluster, processes)
    for index in placement.labels():
        host = cluster.hosts[index]
        busy = network.processes_in(host.namespace)
        if busy:
            raise UsageError(f"host {host.namespace} of the emulated cluster is busy ({len(busy)} processes, "
                             f"another run?): wait for it, or ./run_bench.sh cluster down")
    return placement


def from_slurm(cluster: network.Cluster, scheduled: SlurmPlacement) -> Placement:
    """The emulated hosts of the nodes Slurm placed the run's processes on (a node is a host)."""
    hosts = {h.namespace: h for h in cluster.hosts}
    unknown = sorted({node for _, _, node in scheduled.labels()} - set(hosts))
    if unknown:
        raise UsageError(f"--emulated-cluster {cluster.name}: Slurm's node(s) {', '.join(unknown)} are not its "
                         f"hosts (is SLURM_CONF its own? ./run_bench.sh cluster env --name {cluster.name})")
    if len({node for _, _, node in scheduled.labels()}) < len(scheduled.labels()):
        raise UsageError(f"--emulated-cluster {cluster.name}: the run's processes share nodes; metering needs a "
                         "node per process (allocate more nodes)")
    return Placement(cluster, {role: [hosts[node] for node in nodes] for role, nodes in scheduled.roles.items()})


@contextmanager
def metered(placement: Placement | None, run_dir: Path, run_start: float) -> Iterator[None]:
    """Meter the run's links while it trains; whatever happens, end every process left on its hosts."""
    if placement is None:
        yield
        return
    namespaces = [placement.cluster.hosts[i].namespace for i in placement.labels()]
    try:
        with Meter(placement.cluster, sorted(placement.labels()), run_dir, run_start):
            yield
    finally:
        network.end_processes(namespaces)


def network_record(placement: Placement, folder: RunFolder, config: RunConfig, strategy: type[Strategy]) -> dict:
    """run.json's "network": the hosts, the link cap, and bytes per step against the formulas."""
    model = folder.read_run()["model"]
    gradient_bytes = model.get("gradient_bytes_per_step")
    if gradient_bytes is None:  # the chief never built its model
        return {**placement.describe(), "per_host": {"error": "the run ended before its model was built"}}
    run_dir = folder.path
    predicted = strategy.traffic(config, Gradient.from_facts(model))
    try:
        per_host = bytes_per_step(run_dir, placement.labels(), config.warmup_steps, placement.cluster.link_mbit,
                                  predicted)
    except (OSError, ValueError, KeyError) as exc:
        per_host = {"error": f"bytes per step could not be computed: {exc}"}
    return {**placement.describe(), "gradient_bytes_per_step": gradient_bytes, "per_host": per_host}
