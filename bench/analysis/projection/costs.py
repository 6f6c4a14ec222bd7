"""Cost terms of one training step per family, in seconds, for n workers exchanging S
gradient bytes over links of latency alpha and bandwidth B (bytes/s) each way.

- ring allreduce: 2(n-1) messages of S/n each way, pipelined round the ring:
  2(n-1) alpha + 2(n-1)/n S/B (the ring factor of bench.metrics).
- parameter servers, k tasks on hosts of their own: a phase (push, or pull) moves S
  per worker and n S / k per ps task; the busier end sets it: alpha + max(S, n S / k) / B.
  Push and pull do not overlap in a ps-sync step (the emulated cluster's busiest ps link
  ran at 54 % of its cap), so a step pays both.
- a table's gradient (bench.metrics.Gradient): ring allreduce of the dense part D plus an
  allgather of every rank's touched rows, (n-1) (alpha + u(r+i) / B), which grows with n
  where the ring's 2(n-1)/n (D + T) does not; or the whole table in the ring (dense). A ps
  phase moves the worker's larger direction, max(sent, received) of bench.metrics.ps_worker_bytes.
- ps-async: no worker waits for another; throughput is capped by the workers
  (n / t_worker) and by the ps links (k B / S: each update crosses them once each way, and
  the two directions carry pushes and pulls at once).
- a synchronous step waits for the slowest worker's compute: the expected maximum of n
  (with b backup workers, the (n-b)-th fastest) of the workers' step computes.
- BytePS (OSDI '20, section 4) compares the per-direction times 2(n-1)/n S/B and
  max(S, n S / k) / B: dedicated ps hosts win only when k > n^2 / (2(n-1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import norm

from bench.metrics import ring_factor


@dataclass(frozen=True)
class Link:
    """Time to move m bytes one way: alpha + m / bandwidth."""

    alpha_s: float
    bandwidth_bytes_per_s: float

    def seconds(self, nbytes: float) -> float:
        return self.alpha_s + nbytes / self.bandwidth_bytes_per_s

    @classmethod
    def gbit(cls, gbit_per_s: float, alpha_s: float = 0.0) -> Link:
        return cls(alpha_s, gbit_per_s * 1e9 / 8)


def ring_allreduce_s(workers: int, gradient_bytes: float, link: Link) -> float:
    if workers < 2:
        return 0.0
    return 2 * (workers - 1) * link.alpha_s + ring_factor(workers) * gradient_bytes / link.bandwidth_bytes_per_s


def allgather_s(workers: int, contributed_bytes: float, link: Link) -> float:
    """Ring allgather: n-1 messages each way, each of one rank's contribution (none: no messages)."""
    if workers < 2 or contributed_bytes <= 0:
        return 0.0
    return (workers - 1) * (link.alpha_s + contributed_bytes / link.bandwidth_bytes_per_s)


def ps_phase_s(workers: int, ps_tasks: int, gradient_bytes: float, link: Link) -> float:
    """One push (or one pull): the worker's S or the ps task's n S / k, whichever end is busier."""
    return link.seconds(max(gradient_bytes, workers * gradient_bytes / ps_tasks))


def ps_sync_exchange_s(workers: int, ps_tasks: int, gradient_bytes: float, link: Link) -> float:
    return 2 * ps_phase_s(workers, ps_tasks, gradient_bytes, link)


def closed_queue_throughput(customers: int, demands_s: list[float], delay_s: float) -> float:
    """Cycles per second of `customers` that each, in turn, take `delay_s` on their own and queue
    for every station of `demands_s` (each serving one at a time, or all at once at a shared
    rate: the same throughput), by exact mean value analysis (Reiser and Lavenberg, 1980)."""
    queued = [0.0] * len(demands_s)
    rate = 0.0
    for n in range(1, customers + 1):
        residence = [d * (1 + q) for d, q in zip(demands_s, queued, strict=True)]
        rate = n / (delay_s + sum(residence))
        queued = [rate * r for r in residence]
    return rate


def ps_async_updates_per_s(workers: int, ps_tasks: int, gradient_bytes: float, link: Link,
                           worker_step_s: float) -> float:
    """Updates per second of n workers that each compute, push and pull (`worker_step_s` alone
    on the links): the pushes queue on the ps links' inbound direction and the pulls on their
    outbound one, S / (k B) each, the two directions busy at once with different workers.
    One worker: 1 / worker_step_s; many: the k B / S one direction carries."""
    direction = gradient_bytes / (ps_tasks * link.bandwidth_bytes_per_s)
    alone = max(worker_step_s - 2 * direction, 0.0)  # what is left of a worker's cycle off the ps links
    return closed_queue_throughput(workers, [direction, direction], alone)


def expected_order_statistic(n: int, rank: int, mean: float, sd: float) -> float:
    """Expected `rank`-th smallest of n normal draws (Blom's approximation); rank = n: the maximum."""
    if n < 1 or not 1 <= rank <= n:
        raise ValueError(f"rank {rank} of {n}")
    if n == 1:
        return mean
    return mean + sd * float(norm.ppf((rank - 0.375) / (n + 0.25)))


def synchronous_compute_s(workers: int, mean: float, sd: float, backups: int = 0) -> float:
    """What a synchronous step waits for: the (n-b)-th fastest worker's compute."""
    return expected_order_statistic(workers, workers - backups, mean, sd)


def step_s(compute_s: float, communication_s: float, overlap: float = 0.0) -> float:
    """A step whose communication overlaps `overlap` (0..1) of itself with compute."""
    hidden = min(overlap * communication_s, compute_s)
    return compute_s + communication_s - hidden


def byteps_crossover_ps_tasks(workers: int) -> float:
    """The ps host count above which a ps exchange beats ring allreduce (BytePS section 4). At
    n = 2 it never does: a worker's own link carries S either way, as much as the ring's."""
    return math.inf if workers <= 2 else workers**2 / (2 * (workers - 1))
