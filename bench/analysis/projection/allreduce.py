"""Allreduce on a cluster of hosts of several devices, overlapped with the backward pass.

- A buffer of m bytes over N devices, G per host, H hosts:
  - flat ring, devices in host order: every device, and every host's link (one ring edge
    leaves and one enters each host), carries 2(N-1)/N m each way: 2(N-1) alpha +
    2(N-1)/N m / rate, the rate the slowest edge's (the network's; PCIe inside a host).
  - hierarchical: reduce-scatter inside each host, G rings of m/G across hosts (the host's
    link carries 2(H-1)/H m in all, in G flows at once), allgather inside the host:
    2(G-1)/G m / intra + 2(H-1) alpha + 2(H-1)/H m / rate.
  - the transport's rate is the one at the buffer's size where the profile measured it by size
    (`Transport.rate_by_bytes`; a hierarchical ring's G rings each at m/G).
  - a transport through host memory (Horovod's MPI or Gloo path for GPU tensors) first
    copies the buffer off the device and back: + 2 m / PCIe (not for CPU devices, whose
    tensors are in host memory).
- An embedding table's sparse gradient (Horovod's allreduce of tf.IndexedSlices) is an
  allgather of every device's touched rows, alone, not fused: (N-1) messages of one device's
  rows each way, (N-1) (alpha + u / rate), which grows with N where a ring's 2(N-1)/N m does
  not; with sparse_as_dense the table goes whole in the ring as any dense tensor.
- A synchronous step waits for the slowest device: every gradient is ready when the slowest
  device's is (Cluster.slowest).
- Overlap (Horovod's background loop): the gradients become ready during the backward pass,
  last layer first (bench.run.models.tensors); every cycle the loop takes what is ready,
  fuses it into buffers of up to the fusion threshold and reduces them one after another.
  The step ends when both the backward pass and the last reduction are done, and the host's
  own per-step work (Cluster.other_s) after them. On CPU devices a reduction in flight while
  the backward pass runs moves at the share of its rate the profile measured beside a busy
  CPU (Transport.rate_share_computing), at its whole rate once the pass is done; and a buffer
  started while the pass runs pays, per message, what a busy CPU adds to the wire's latency
  (Transport.busy_latency_s), one started after it the wire's alone.
"""

from __future__ import annotations

import dataclasses
import math

from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.transports import Transport
from bench.metrics import ring_factor
from bench.run.models.tensors import ModelTensors


def buffer_s(nbytes: float, cluster: Cluster, transport: Transport, hierarchical: bool) -> float:
    """One allreduce of `nbytes` over every device of the cluster."""
    n, g, h, latency_s = cluster.workers, cluster.devices_per_host, cluster.hosts, transport.latency_s
    if n < 2:
        return 0.0
    intra = cluster.intra_host_bytes_per_s
    copies = 2 * nbytes / intra if transport.host_copies and not cluster.on_host else 0.0
    if h < 2:
        rate = intra if not transport.host_copies else min(intra, transport.message_rate(nbytes) or intra)
        return copies + 2 * (n - 1) * latency_s + ring_factor(n) * nbytes / rate
    if hierarchical:
        local = ring_factor(g) * nbytes / intra if g > 1 else 0.0
        across = ring_factor(h) * nbytes / transport.network_bytes_per_s(cluster.link_gbit, flows=g, nbytes=nbytes / g)
        return copies + local + 2 * (h - 1) * latency_s + across
    rate = min(intra, transport.network_bytes_per_s(cluster.link_gbit, nbytes=nbytes))
    return copies + 2 * (n - 1) * latency_s + ring_factor(n) * nbytes / rate


def allgather_s(contributed_bytes: float, cluster: Cluster, transport: Transport) -> float:
    """A ring allgather in which every device contributes `contributed_bytes` (a table's touched rows)."""
    n = cluster.workers
    if n < 2 or contributed_bytes <= 0:
        return 0.0
    gathered = n * contributed_bytes
    copies = (contributed_bytes + gathered) / cluster.intra_host_bytes_per_s \
        if transport.host_copies and not cluster.on_host else 0.0
    rate = min(cluster.intra_host_bytes_per_s, transport.network_bytes_per_s(cluster.link_gbit)) \
        if cluster.hosts > 1 else min(cluster.intra_host_bytes_per_s, transport.process_bytes_per_s
                                      or cluster.intra_host_bytes_per_s)
    return copies + (n - 1) * (transport.latency_s + contributed_bytes / rate)


def fused_buffers(sizes: list[int], threshold: int) -> list[int]:
    """Buffers of at most `threshold` bytes, in order; a larger tensor goes alone (threshold 0: each)."""
    out: list[int] = []
    for size in sizes:
        if out and out[-1] + size <= threshold:
            out[-1] += size
        else:
            out.append(size)
    return out


def finished_s(start_s: float, work_s: float, computing_until_s: float, share: float) -> float:
    """When a transfer of `work_s` at its whole rate, started at `start_s`, ends, moving at `share` of
    that rate until `computing_until_s`."""
    if share >= 1.0 or start_s >= computing_until_s:
        return start_s + work_s
    slowed_s = (computing_until_s - start_s) * share  # work done before the compute ends
    return start_s + work_s / share if work_s <= slowed_s else computing_until_s + work_s - slowed_s


def communication_s(tensors: ModelTensors, cluster: Cluster, transport: Transport,
                    hierarchical: bool) -> tuple[float, float]:
    """(when the last reduction of a step ends, the step starting at 0; how long reductions were in flight)."""
    cycle_s = transport.cycle_s
    share = transport.rate_share_computing if cluster.on_host else 1.0  # a GPU's kernels leave the host's CPU
    busy = dataclasses.replace(transport, latency_s=transport.busy_latency_s()) if cluster.on_host else transport

    def carrier(start_s: float) -> Transport:  # a message meets a busy CPU while the compute runs
        return busy if start_s < cluster.compute_s else transport

    pending = [(cluster.forward_s + t.ready * cluster.backward_s, t) for t in tensors.in_ready_order()]
    busy_until, busy_s, i = 0.0, 0.0, 0
    while i < len(pending):
        # the loop wakes on its cycle once it is free and something is ready
        due = max(busy_until, pending[i][0])
        tick = math.ceil(due / cycle_s) * cycle_s if cycle_s > 0 else due
        ready = []
        while i < len(pending) and pending[i][0] <= tick:
            ready.append(pending[i][1])
            i += 1
        started = busy_until = tick
        for size in fused_buffers([t.nbytes for t in ready if not t.sparse], transport.fusion_bytes):
            busy_until = finished_s(busy_until, buffer_s(size, cluster, carrier(busy_until), hierarchical),
                                    cluster.compute_s, share)
        gathers_s = sum(allgather_s(t.slices_bytes, cluster, carrier(busy_until)) for t in ready if t.sparse)
        busy_until = finished_s(busy_until, gathers_s, cluster.compute_s, share)
        busy_s += busy_until - started
    return busy_until, busy_s


def step(tensors: ModelTensors, cluster: Cluster, transport: Transport, hierarchical: bool) -> StepTerms:
    other_s = cluster.other_s
    if cluster.workers < 2:
        return StepTerms.of(cluster.compute_s + other_s, cluster.compute_s, other_s=other_s)
    slowest = cluster.slowest()
    last, busy_s = communication_s(tensors, slowest, transport, hierarchical)
    end = max(slowest.compute_s, last) + other_s
    return StepTerms.of(end, cluster.compute_s, waiting_s=slowest.compute_s - cluster.compute_s, other_s=other_s,
                        collective_s=busy_s)
