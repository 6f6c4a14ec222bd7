"""The MPI job launchers a run's ranks start under: Open MPI's `mpirun` and Horovod's
`horovodrun --gloo`, on this host or over the hosts a host kind gives them (its host arguments)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from bench.errors import UsageError
from bench.infra.tools import find_tool, mpirun_version


def mpirun_command(np: int, host_args: Sequence[str] = ()) -> list[str]:
    """mpirun for `np` ranks: on this machine, or one rank per host in host order over the hosts
    `host_args` name (`-H ...` and how to reach them)."""
    mpirun = find_tool("mpirun")
    if mpirun is None:
        raise UsageError("mpirun not found: run ./run_bench.sh setup (or install an MPI)")
    out = mpirun_version()
    cmd = [mpirun, "-np", str(np), "--bind-to", "none"]
    # one rank per host, in host order; on one host by slot, so that a rank's local rank (which picks its GPU:
    # bench.run.placement) is its place in world order, as Horovod's local_rank() counts (Open MPI 5 maps by
    # package by default, and numbered this machine's 4 ranks' local ranks 0, 2, 1, 3)
    spread = "node" if host_args else "slot"
    if "Open MPI" in out or "OpenRTE" in out:
        # more ranks than cores is normal on a laptop run; root is normal in containers
        older = " 4." in out or " 3." in out
        cmd += ["--map-by", spread, "--oversubscribe"] if older else ["--map-by", f"{spread}:OVERSUBSCRIBE"]
        if not older and not host_args:
            # ranks on one host talk through shared memory; the libfabric BTL's probe of the
            # machine's providers costs every rank 1 s of MPI_Init on the project's machine
            cmd += ["--mca", "btl", "^ofi"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    elif spread:
        cmd += ["--map-by", spread]
    return cmd + list(host_args)


def horovodrun_command(np: int, hosts: Sequence[str] = (), nic: str | None = None) -> list[str]:
    """horovodrun --gloo for `np` ranks: on this machine, or rank i on `hosts[i]` (horovodrun reaches
    them with the `ssh` on PATH)."""
    horovodrun = find_tool("horovodrun")
    if horovodrun is None:
        raise UsageError("horovodrun not found: run ./run_bench.sh setup")
    listed = host_slots(hosts) if hosts else f"localhost:{np}"
    return [horovodrun, "--gloo", "-np", str(np), "-H", listed, *(["--network-interface", nic] if nic else [])]


def host_slots(hosts: Sequence[str]) -> str:
    """`-H`'s list for rank i on hosts[i]: each host once, with its count of ranks ("a:2,b:1")."""
    slots: dict[str, int] = {}
    for host in hosts:
        slots[host] = slots.get(host, 0) + 1
    return ",".join(f"{host}:{n}" for host, n in slots.items())
