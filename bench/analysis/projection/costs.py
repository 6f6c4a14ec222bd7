"""The projection's closed forms that are not a transport's or a tensor's: a link's time for a
message, what a synchronous step waits for, and where dedicated ps hosts beat the ring.

- a synchronous step waits for the slowest worker's compute: the expected maximum of n
  (with b backup workers, the (n-b)-th fastest) of the workers' step computes.
- BytePS (OSDI '20, section 4) compares the per-direction times of ring allreduce,
  2(n-1)/n S/B, and of a ps phase over k dedicated ps hosts, max(S, n S / k) / B:
  dedicated ps hosts win only when k > n^2 / (2(n-1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import ndtri


@dataclass(frozen=True)
class Link:
    """Time to move m bytes one way: alpha + m / bandwidth (what the micro-benchmark fit gives)."""

    alpha_s: float
    bandwidth_bytes_per_s: float

    def seconds(self, nbytes: float) -> float:
        return self.alpha_s + nbytes / self.bandwidth_bytes_per_s


def expected_order_statistic(n: int, rank: int, mean: float, sd: float) -> float:
    """Expected `rank`-th smallest of n normal draws (Blom's approximation); rank = n: the maximum.
    scipy.special's ndtri is the standard normal's quantile that scipy.stats.norm.ppf calls, without
    importing scipy.stats (0.6 s of every `project` and report)."""
    if n < 1 or not 1 <= rank <= n:
        raise ValueError(f"rank {rank} of {n}")
    if n == 1:
        return mean
    return mean + sd * float(ndtri((rank - 0.375) / (n + 0.25)))


def synchronous_compute_s(workers: int, mean: float, sd: float, backups: int = 0) -> float:
    """What a synchronous step waits for: the (n-b)-th fastest worker's compute."""
    return expected_order_statistic(workers, workers - backups, mean, sd)


def byteps_crossover_ps_tasks(workers: int) -> float:
    """The ps host count above which a ps exchange beats ring allreduce (BytePS section 4). At
    n = 2 it never does: a worker's own link carries S either way, as much as the ring's."""
    return math.inf if workers <= 2 else workers**2 / (2 * (workers - 1))
