"""Every constant the cluster projection uses that is not measured in the run at hand: its
value, and where it comes from (docs/projection.md lists them). Figures "measured here"
were taken on this project's 2-core machine with the command given; a micro-benchmark
sweep under `--from` replaces them (bench.analysis.projection.calibrate_transports)."""

from __future__ import annotations

from dataclasses import dataclass

from strategies.base import GLOO_CONTROLLER as GLOO
from strategies.base import GRPC, NCCL
from strategies.base import MPI_CONTROLLER as MPI

# the transports' names are those strategies declare as their wire (Strategy.wire)

# TCP payload per byte on the wire at MTU 1500 with timestamps: 1448 of 1538 (preamble 8,
# Ethernet header 14, FCS 4, inter-frame gap 12, IP 20, TCP 32)
TCP_GOODPUT = 1448 / 1538
TCP_GOODPUT_SOURCE = "Ethernet and TCP/IP framing at MTU 1500: 1448 payload bytes per 1538 on the wire"

# a message's fixed cost between hosts of one rack (also bench.analysis.projection.calibrate's default)
LATENCY_S = 50e-6
LATENCY_SOURCE = "a TCP round trip between hosts of one rack, about 50 us"

# bytes a device moves to or from its host (and to a device of the same host through it) per second
PCIE_BYTES_PER_S = 12e9
PCIE_SOURCE = ("PCIe 3.0 x16: 15.75 GB/s after 128b/130b coding; pinned cudaMemcpy reaches about 12 GB/s "
               "(NVIDIA's bandwidthTest on such hosts)")

# the backward pass costs twice the forward pass's FLOPs, layer by layer
FORWARD_SHARE = 1 / 3
FORWARD_SHARE_SOURCE = "backward = 2 x forward FLOPs (Kaplan et al. 2020, section 2.1: 2N forward, 4N backward)"

# Horovod's tensor fusion when the published table was made (0.9-0.11, autumn 2017)
FUSION_BYTES = 64 * 2**20
CYCLE_S = 5e-3
FUSION_SOURCE = "Horovod 0.9-0.11 defaults: HOROVOD_FUSION_THRESHOLD 64 MB, HOROVOD_CYCLE_TIME 5 ms"


# what TensorFlow 2's ClusterCoordinator spends to schedule one function and hear of its end, one
# after another, however many workers it feeds: ps-coordinator's steps per second are at most K / this
COORDINATOR_FUNCTION_S = 1.22e-3
COORDINATOR_SOURCE = ("TensorFlow 2.21's ClusterCoordinator: 200 empty functions scheduled at once onto one worker "
                      "task, the time per function, median of 3 rounds in each of 2 runs 1.223 and 1.225 ms, measured "
                      "here 2026-11-27 (python -m bench micro --transports coordinator)")


@dataclass(frozen=True)
class Transport:
    """How one transport moves a step's bytes between hosts.

    `flow_share`: the fraction of the link's bit rate one flow of it reaches; `link_share`: what
    all flows together reach; `process_bytes_per_s`: what one process of it moves per second when
    its own CPU work binds (None: no such limit known); `host_copies`: GPU tensors cross PCIe to
    host memory and back; `message_s`: what a ps task's process spends on each tensor it takes
    in or sends out, beyond its bytes (a collective's fixed cost is its hops' latency instead)."""

    name: str
    flow_share: float
    process_bytes_per_s: float | None
    host_copies: bool
    source: str
    link_share: float = TCP_GOODPUT
    message_s: float = 0.0
    message_source: str = ""

    def network_bytes_per_s(self, link_gbit: float, flows: int = 1) -> float:
        """The rate of a transfer between hosts carried by `flows` flows (processes, or sockets) at once."""
        link = link_gbit * 1e9 / 8
        one = self.flow_share * link
        if self.process_bytes_per_s is not None:
            one = min(one, self.process_bytes_per_s)
        return min(self.link_share * link, flows * one)


TRANSPORTS = {
    NCCL: Transport(NCCL, 1.7e9 / (25e9 / 8), None, False,
                    "NCCL's socket transport: all_reduce_perf bus bandwidth tops out at 1.7 GB/s on a 25 Gbit/s "
                    "TCP network, 0.54 of the link, one flow's speed (NVIDIA/nccl-tests issue 83: NCCL's bandwidth "
                    "is the slowest socket's times the sockets); it cannot run here"),
    MPI: Transport(MPI, TCP_GOODPUT, 1.035e9, True,
                   "Horovod over Open MPI 5.0 with TCP alone: allreduce bus bandwidth at 64 MB (the fusion "
                   "buffer), 2 ranks, median of 12 runs in two sessions 1.035 GB/s (0.73, 0.75, 0.88; 0.94, 0.98, "
                   "1.02, 1.05, 1.08, 1.08, 1.17, 1.19, 1.20), measured here (OMPI_MCA_btl=tcp,self python -m bench "
                   "micro --full --processes 2 --transports horovod-mpi)"),
    GLOO: Transport(GLOO, TCP_GOODPUT, 0.925e9, True,
                    "Horovod over Gloo: allreduce bus bandwidth at 64 MB, 2 ranks, median of 12 runs in two sessions "
                    "0.925 GB/s (0.71, 0.92, 0.97; 0.71, 0.73, 0.80, 0.90, 0.93, 0.96, 0.99, 1.03, 1.05), measured "
                    "here (python -m bench micro --full --processes 2 --transports horovod-gloo)"),
    GRPC: Transport(GRPC, TCP_GOODPUT, 1.555e9, True,
                    "TensorFlow's gRPC, one ps task: push and pull of 64 MB, bytes moved per second, median of 12 "
                    "runs in two sessions 1.555 GB/s (0.98, 1.32, 1.43; 1.39, 1.48, 1.52, 1.59, 1.60, 1.66, 1.80, "
                    "1.92, 2.00), measured here (python -m bench micro --full --processes 2 --transports ps)",
                    message_s=37.95e-6,
                    message_source="TensorFlow's gRPC, one ps task: a 64 KB push and pull in 1, 16 and 64 tensors, the "
                                   "slope per message, median of 12 runs in two sessions 37.95 us (33.7, 43.4, 50.2; "
                                   "27.6, 29.8, 29.9, 35.6, 37.1, 38.8, 39.4, 42.8, 44.7), measured here "
                                   "(python -m bench micro --full --processes 2 --transports ps)"),
}
ALLREDUCE_TRANSPORTS = (NCCL, MPI, GLOO)
