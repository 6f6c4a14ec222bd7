"""Hosts without a scheduler (`--hosts h1,h2,h3`): each task of a TensorFlow cluster started on its
host over ssh, as horovodrun reaches hosts, from the one command the user types on this one.

Workers take hosts 0..N-1, then the other roles (ps tasks, a coordinator) the hosts after them;
with fewer hosts than tasks the placement wraps around, each task on its host's next port. Every
host sees this Python, this folder and the run folder at the same paths (a shared or identical file system,
as for Slurm) and is reached without a password. The ssh command is `DISTBENCH_SSH` (default
`ssh` with batch mode and keep-alives, so that a lost host ends its connection within
KEEPALIVE_S); the emulated cluster's stand-in (bench/infra/emulated/netns_ssh) is one. On its
host each task runs under bench.run.launch.remote_task, which ends it when its ssh connection
closes: ending the launcher's ssh clients ends the run everywhere.

An MPI strategy's ranks go the same way through the launchers that already reach hosts over ssh:
Open MPI's mpirun (its ssh agent the same command, the launcher's environment exported to every
rank), or horovodrun --gloo started on the first worker host (its driver serves the ranks'
rendezvous, so it runs inside the hosts' network; it runs `ssh` from PATH: there, a shim that runs
the same command). Each launcher ends every rank when one fails or when it is ended itself."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.run.launch.host_kind import HostKind
from bench.run.launch.mpi_launchers import horovodrun_command, host_slots, mpirun_command
from bench.run.placement.gpus import GIVEN

TF_PORT = 2222  # TensorFlow's customary port; a host's second task takes the next
ALIVE_INTERVAL_S, ALIVE_COUNT = 5, 3
KEEPALIVE_S = ALIVE_INTERVAL_S * ALIVE_COUNT  # a host that stops answering ends its ssh client this soon
DEFAULT_SSH = ("ssh", "-o", "BatchMode=yes", "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
               "-o", f"ServerAliveCountMax={ALIVE_COUNT}")
# what a task's environment takes from the launcher's besides what the launcher gives it (ssh passes
# no environment): the suite's own settings, TensorFlow's, threading, Python's, and NCCL's and UCX's (the interface
# and fabric a multi-host NCCL job must use: NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG, UCX_NET_DEVICES; without
# them a remote rank picks its own and may hang). Not CUDA's: the GPUs a task sees are its host's, chosen there by
# its local rank (bench.run.placement), not the launcher's
FORWARDED_PREFIXES = ("DISTBENCH_", "TF_", "OMP_", "KMP_", "PYTHON", "HOROVOD_", "NCCL_", "UCX_")
NOT_FORWARDED = (GIVEN,)  # what this machine's processes were given, not the host's


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
class HostPlacement(HostKind):
    """Which host (and port) each task of a run goes on."""

    holds_stdin = True  # ssh ends nothing on its host when it ends: the guard on its stdin does

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

    def task_hosts(self) -> dict[str, list[str]]:
        return {role: [host for host, _ in tasks] for role, tasks in self.roles.items()}

    def describe(self) -> dict:
        return {"launch": "ssh", "ssh": ssh_command()[0],
                "hosts": {f"{role} {i}": host for role, tasks in self.roles.items()
                          for i, (host, _) in enumerate(tasks)}}

    def ranks(self, argv: list[str], gloo: bool, env: dict[str, str],
              run_dir: Path) -> tuple[list[str], dict[str, str]]:
        """mpirun (or horovodrun --gloo) started here, rank i on worker i's host, reached over ssh."""
        hosts = [host for host, _ in self.roles["worker"]]
        if gloo:
            # horovodrun's driver serves the ranks' rendezvous: it runs on the first worker host, inside the
            # hosts' network, and reaches the hosts (that one too) with the `ssh` it finds on PATH
            path = f"{ssh_shim(run_dir / 'bin')}:{os.environ.get('PATH', '')}"
            return self.over_ssh(hosts[0], [*horovodrun_command(len(hosts), hosts), *argv], {**env, "PATH": path}), {}
        names = sorted({*env, *(k for k in os.environ if k.startswith(FORWARDED_PREFIXES) and k not in NOT_FORWARDED)})
        host_args = ["-H", host_slots(hosts),
                     "--mca", "plm_rsh_agent", shlex.join(ssh_command()), "--wdir", os.getcwd(),
                     *(flag for name in names for flag in ("-x", name))]
        return [*mpirun_command(len(hosts), host_args), *argv], {}

    def command(self, role: str, index: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """`argv` as started on its host: over ssh, in this process's folder (its relative paths the same),
        under the guard that ends it with its connection, with the environment the launcher gives it (`env`)
        and the forwarded part of its own."""
        return self.over_ssh(self.roles[role][index][0], argv, env)

    @staticmethod
    def over_ssh(host: str, argv: list[str], env: dict[str, str]) -> list[str]:
        """`argv` started on `host` over ssh, in this process's folder, under the guard, with `env` and the
        forwarded part of this process's environment."""
        passed = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES) and k not in NOT_FORWARDED}
        passed.update(env)
        remote = " ".join([
            "cd", shlex.quote(os.getcwd()), "&&", "exec", "env",
            *(shlex.quote(f"{k}={v}") for k, v in sorted(passed.items())),
            shlex.quote(sys.executable), "-m", "bench.run.launch.remote_task",
            *(shlex.quote(a) for a in argv)])
        return [*ssh_command(), host, remote]


def ssh_shim(bin_dir: Path) -> Path:
    """A folder whose `ssh` runs ssh_command(): what horovodrun, which runs `ssh` from PATH, reaches hosts with."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "ssh"
    shim.write_text(f"#!/bin/sh\nexec {shlex.join(ssh_command())} \"$@\"\n")
    shim.chmod(0o755)
    return bin_dir
