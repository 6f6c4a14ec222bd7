"""A run on the emulated cluster: which host each process goes on, how MPI and horovodrun reach
those hosts, the metering of their links while it trains, and nothing of it left on the hosts
afterwards.

Workers take hosts 0..N-1 (rank i on host i), ps tasks the hosts after them; a process enters its
host with bench.infra.emulated.network.enter.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.config import RunConfig
from bench.errors import UsageError
from bench.infra.emulated import cpu_budget, network
from bench.infra.emulated.network import AGENT, Cluster, Host
from bench.metrics import Gradient
from bench.run.contract import Strategy
from bench.run.launch.host_kind import HostKind
from bench.run.launch.link_meter import Meter, bytes_per_step
from bench.run.launch.mpi_launchers import horovodrun_command, mpirun_command
from bench.run.launch.slurm.srun import SlurmPlacement
from bench.run.process.records import RunFolder

TF_PORT = 2222  # every host has its own port space; TensorFlow's customary port


@dataclass(frozen=True)
class Placement(HostKind):
    cluster: Cluster
    roles: dict[str, list[Host]]  # {"worker": [...], "ps": [...]}

    @classmethod
    def for_processes(cls, cluster: Cluster, processes: dict[str, int]) -> Placement:
        order = ["worker"] + sorted(r for r in processes if r != "worker")
        hosts = iter(cluster.hosts)
        return cls(cluster, {role: [next(hosts) for _ in range(processes.get(role, 0))] for role in order
                             if processes.get(role, 0) > 0})

    def tf_cluster(self) -> dict[str, list[str]]:
        return {role: [f"{h.address}:{TF_PORT}" for h in hosts] for role, hosts in self.roles.items()}

    def task_hosts(self) -> dict[str, list[str]]:
        return {role: [h.namespace for h in hosts] for role, hosts in self.roles.items()}

    def command(self, role: str, index: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """A task's command as placed (the host kinds' one interface): entered on its host by hand, as a
        user types it on each; the environment is inherited."""
        del env
        return network.enter(self.roles[role][index], argv)

    def labels(self) -> dict[int, str]:
        """{host index: "worker 0" / "ps 1"} for the hosts this run uses."""
        return {h.index: f"{role} {i}" for role, hosts in self.roles.items() for i, h in enumerate(hosts)}

    def describe(self) -> dict:
        return {"name": self.cluster.name, "subnet": self.cluster.subnet, "link_mbit": self.cluster.link_mbit,
                "host_cores": self.cluster.budget_cores,
                # a budgeted host's CPU comes in these periods: a step shorter than a few of them
                # meets a spent quota by chance (bench.analysis.projection.from_runs scores none)
                "host_cpu_period_s": cpu_budget.PERIOD_US / 1e6 if self.cluster.budget_cores else None,
                "hosts": {label: {"namespace": self.cluster.hosts[i].namespace,
                                  "address": self.cluster.hosts[i].address}
                          for i, label in self.labels().items()}}

    def ranks(self, argv: list[str], gloo: bool, env: dict[str, str],
              run_dir: Path) -> tuple[list[str], dict[str, str]]:
        """mpirun (or horovodrun) started on the first worker host, as rank 0's launcher would be, each rank
        on its host, through the namespace agent."""
        del env  # the agent runs on this machine: the ranks inherit the launcher's environment
        workers = self.roles["worker"]
        launcher = horovodrun_command(len(workers), [h.address for h in workers], "eth0") if gloo \
            else mpirun_command(len(workers), mpirun_host_args(self))
        return network.enter(workers[0], [*launcher, *argv]), agent_environment(self, run_dir / "bin")


def mpirun_host_args(placement: Placement) -> list[str]:
    """mpirun flags that place rank i on worker host i and keep MPI on the hosts' links."""
    hosts = placement.roles["worker"]
    subnet = placement.cluster.subnet
    return ["-H", ",".join(f"{h.address}:1" for h in hosts),
            "--mca", "plm_rsh_agent", str(AGENT), "--prtemca", "plm_ssh_no_tree_spawn", "1",
            "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", subnet,
            "--mca", "oob_tcp_if_include", subnet]


def agent_environment(placement: Placement, bin_dir: Path) -> dict[str, str]:
    """What the agent needs: the namespace of each address, each host's CPU budget group, and `ssh`
    on PATH for horovodrun."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    if not (bin_dir / "ssh").exists():
        (bin_dir / "ssh").symlink_to(AGENT)
    hosts = placement.cluster.hosts
    return {"DISTBENCH_NETNS_HOSTS": " ".join(f"{h.address}={h.namespace}" for h in hosts),
            "DISTBENCH_NETNS_GROUPS": " ".join(f"{ns}={path}" for ns, path in
                                               cpu_budget.groups([h.namespace for h in hosts]).items()),
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}


def place(config: RunConfig, processes: dict[str, int], scheduled: SlurmPlacement | None = None) -> Placement:
    """Hosts for every process of the run (the nodes Slurm gave it, when `scheduled`); a missing
    cluster or a busy host is a usage error."""
    needed = sum(processes.values())
    cluster = network.get(config.emulated_cluster, min_hosts=1 if scheduled else needed)
    if cluster.budgets_differ:
        raise UsageError(f"--emulated-cluster {cluster.name}: its hosts' CPU budgets differ "
                         f"({', '.join(f'{c:g}' for c in cluster.cores_by_host)}): a run on them is not modelled; "
                         "./run_bench.sh cluster up --host-cores C gives every host the same")
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
