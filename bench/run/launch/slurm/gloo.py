"""Horovod over Gloo under Slurm: the ranks are the tasks of one `srun` step and meet at
Horovod's own rendezvous server (the one `horovodrun --gloo` starts), run here by the
launcher instead of reaching the nodes over ssh.

srun's cyclic distribution puts task i on node i mod K; the launcher gives Horovod the
same plan, and each task takes its slot's HOROVOD_* variables from the table by
SLURM_PROCID before hvd.init().
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

SLOTS_VARIABLE = "DISTBENCH_GLOO_SLOTS"  # [{HOROVOD_RANK: ..., ...} per task], with each node's address


def slots(workers: list[str]) -> list[dict[str, str]]:
    """Horovod's slot variables per rank, for rank i on node workers[i] (cyclic, as srun places them)."""
    nodes = list(dict.fromkeys(workers))
    on_node = {node: [r for r, w in enumerate(workers) if w == node] for node in nodes}
    out = []
    for rank, node in enumerate(workers):
        local_rank = on_node[node].index(rank)
        crossing = [n for n in nodes if len(on_node[n]) > local_rank]  # hosts with this local rank
        out.append({"HOROVOD_HOSTNAME": node, "HOROVOD_RANK": str(rank), "HOROVOD_SIZE": str(len(workers)),
                    "HOROVOD_LOCAL_RANK": str(local_rank), "HOROVOD_LOCAL_SIZE": str(len(on_node[node])),
                    "HOROVOD_CROSS_RANK": str(crossing.index(node)), "HOROVOD_CROSS_SIZE": str(len(crossing))})
    return out


def own_address(toward: str) -> str:
    """This machine's address on the route to `toward` (a node): where the ranks reach the server."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((toward, 9))  # no packet is sent: it only chooses the route
        return probe.getsockname()[0]


@contextmanager
def rendezvous(workers: list[str], addresses: dict[str, str]) -> Iterator[dict[str, str]]:
    """Horovod's rendezvous server for ranks on the nodes `workers` (rank i on workers[i], a node at
    addresses[node]), and the environment that leads them to it (horovodrun, where it runs, starts
    its own)."""
    from horovod.runner.common.util.hosts import SlotInfo
    from horovod.runner.http.http_server import RendezvousServer

    table = slots(workers)
    plan = [SlotInfo(hostname=s["HOROVOD_HOSTNAME"], rank=int(s["HOROVOD_RANK"]),
                     local_rank=int(s["HOROVOD_LOCAL_RANK"]), cross_rank=int(s["HOROVOD_CROSS_RANK"]),
                     size=int(s["HOROVOD_SIZE"]), local_size=int(s["HOROVOD_LOCAL_SIZE"]),
                     cross_size=int(s["HOROVOD_CROSS_SIZE"])) for s in table]
    for slot, node in zip(table, workers):
        slot["address"] = addresses[node]
    server = RendezvousServer()
    port = server.start()
    server.init(plan)
    try:
        yield {"HOROVOD_GLOO_RENDEZVOUS_ADDR": own_address(addresses[workers[0]]),
               "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port), "HOROVOD_CONTROLLER": "gloo",
               "HOROVOD_CPU_OPERATIONS": "gloo", SLOTS_VARIABLE: json.dumps(table)}
    finally:
        server.stop()


def interface_of(address: str) -> str | None:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "to", address], capture_output=True, text=True,
                         check=False).stdout.split()
    return out[1] if len(out) > 1 else None


def adopt_slot() -> None:
    """In a task of the step: this rank's HOROVOD_* variables (and Gloo's interface) from the table."""
    if SLOTS_VARIABLE not in os.environ or "HOROVOD_RANK" in os.environ:
        return
    slot = dict(json.loads(os.environ[SLOTS_VARIABLE])[int(os.environ["SLURM_PROCID"])])
    iface = interface_of(slot.pop("address"))
    os.environ.update(slot)
    if iface:
        os.environ["HOROVOD_GLOO_IFACE"] = iface
