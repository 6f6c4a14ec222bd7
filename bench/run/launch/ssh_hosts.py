"""Hosts without a scheduler (`--hosts h1,h2,h3`): each task of a TensorFlow cluster started on its
host over ssh, as horovodrun reaches hosts, from the one command the user types on this one.

Workers take hosts 0..N-1, then the other roles (ps tasks, a coordinator) the hosts after them;
with fewer hosts than tasks the placement wraps around, each task on its host's next port. Every
host sees this Python, this folder and the run folder at the same paths (a shared or identical file system,
as for Slurm) and is reached without a password. The ssh command is `DISTBENCH_SSH` (default
`ssh` with batch mode and keep-alives, so that a lost host ends its connection within
KEEPALIVE_S); the emulated cluster's stand-in (bench/infra/emulated/netns_ssh) is one. On its
host each task runs under bench.run.launch.remote_task, which ends it when its ssh connection
closes: ending the launcher's ssh clients ends the run everywhere."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

TF_PORT = 2222  # TensorFlow's customary port; a host's second task takes the next
ALIVE_INTERVAL_S, ALIVE_COUNT = 5, 3
KEEPALIVE_S = ALIVE_INTERVAL_S * ALIVE_COUNT  # a host that stops answering ends its ssh client this soon
DEFAULT_SSH = ("ssh", "-o", "BatchMode=yes", "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
               "-o", f"ServerAliveCountMax={ALIVE_COUNT}")
# what a task's environment takes from the launcher's besides what the launcher gives it (ssh passes
# no environment): the suite's own settings, TensorFlow's, threading and Python's
FORWARDED_PREFIXES = ("DISTBENCH_", "TF_", "OMP_", "KMP_", "PYTHON", "HOROVOD_", "CUDA_")


def ssh_command() -> list[str]:
    """The ssh client and its options: DISTBENCH_SSH split as a shell would, or DEFAULT_SSH."""
    given = os.environ.get("DISTBENCH_SSH", "").strip()
    return shlex.split(given) if given else list(DEFAULT_SSH)


def wrapped(hosts: Sequence[str], processes: dict[str, int]) -> dict[str, list[str]]:
    """Each role's tasks' hosts: workers first, then the other roles by name, round-robin over `hosts`
    (with fewer hosts than tasks, wrapping around)."""
    order = ["worker"] + sorted(r for r in processes if r != "worker")
    out, k = {}, 0
    for role in order:
        for _ in range(processes.get(role, 0)):
            out.setdefault(role, []).append(hosts[k % len(hosts)])
            k += 1
    return out


@dataclass(frozen=True)
class HostPlacement:
    """Which host (and port) each task of a run goes on."""

    hosts: tuple[str, ...]
    roles: dict[str, list[tuple[str, int]]]  # {"worker": [(host, port), ...], "ps": [...]}

    @classmethod
    def for_processes(cls, hosts: tuple[str, ...], processes: dict[str, int]) -> HostPlacement:
        slots, used = {}, {}
        for role, on in wrapped(hosts, processes).items():
            for host in on:
                used[host] = used.get(host, -1) + 1
                slots.setdefault(role, []).append((host, TF_PORT + used[host]))
        return cls(hosts, slots)

    def tf_cluster(self) -> dict[str, list[str]]:
        return {role: [f"{host}:{port}" for host, port in tasks] for role, tasks in self.roles.items()}

    def describe(self) -> dict:
        return {"launch": "ssh", "ssh": ssh_command()[0],
                "hosts": {f"{role} {i}": host for role, tasks in self.roles.items()
                          for i, (host, _) in enumerate(tasks)}}

    def command(self, role: str, index: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """`argv` as started on its host: over ssh, in this process's folder (its relative paths the same),
        under the guard that ends it with its connection, with the environment the launcher gives it (`env`)
        and the forwarded part of its own."""
        host = self.roles[role][index][0]
        passed = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES)}
        passed.update(env)
        remote = " ".join([
            "cd", shlex.quote(os.getcwd()), "&&", "exec", "env",
            *(shlex.quote(f"{k}={v}") for k, v in sorted(passed.items())),
            shlex.quote(sys.executable), "-m", "bench.run.launch.remote_task",
            *(shlex.quote(a) for a in argv)])
        return [*ssh_command(), host, remote]
