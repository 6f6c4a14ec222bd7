"""Where each process of a run goes on the emulated cluster, and how it gets there.

Workers take hosts 0..N-1 (rank i on host i), ps tasks the hosts after them. A process
enters its host with `ip netns exec`, in a UTS namespace of its own whose hostname is
the host's name, so that MPI and the logs see distinct machines.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.emulated.network import Cluster, Host

TF_PORT = 2222  # every host has its own port space; TensorFlow's customary port
AGENT = Path(__file__).with_name("netns_ssh")  # stands in for ssh: enters the namespace of a host


def enter(host: Host, argv: Sequence[str]) -> list[str]:
    """`argv` run on `host`."""
    return ["ip", "netns", "exec", host.namespace, "unshare", "--uts", "sh", "-c",
            'hostname "$0" && exec "$@"', host.namespace, *argv]


@dataclass(frozen=True)
class Placement:
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

    def labels(self) -> dict[int, str]:
        """{host index: "worker 0" / "ps 1"} for the hosts this run uses."""
        return {h.index: f"{role} {i}" for role, hosts in self.roles.items() for i, h in enumerate(hosts)}

    def describe(self) -> dict:
        return {"name": self.cluster.name, "subnet": self.cluster.subnet, "link_mbit": self.cluster.link_mbit,
                "hosts": {label: {"namespace": self.cluster.hosts[i].namespace,
                                  "address": self.cluster.hosts[i].address}
                          for i, label in self.labels().items()}}


def mpirun_host_args(placement: Placement) -> list[str]:
    """mpirun flags that place rank i on worker host i and keep MPI on the hosts' links."""
    hosts = placement.roles["worker"]
    subnet = placement.cluster.subnet
    return ["-H", ",".join(f"{h.address}:1" for h in hosts),
            "--mca", "plm_rsh_agent", str(AGENT), "--prtemca", "plm_ssh_no_tree_spawn", "1",
            "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", subnet,
            "--mca", "oob_tcp_if_include", subnet]


def agent_environment(placement: Placement, bin_dir: Path) -> dict[str, str]:
    """What the agent needs: the namespace of each address, and `ssh` on PATH for horovodrun."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    if not (bin_dir / "ssh").exists():
        (bin_dir / "ssh").symlink_to(AGENT)
    return {"DISTBENCH_NETNS_HOSTS": " ".join(f"{h.address}={h.namespace}" for h in placement.cluster.hosts),
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
