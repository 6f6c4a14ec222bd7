"""Bandwidth as NCCL's tests define it (doc/PERFORMANCE.md there).

algbw = bytes / time. For allreduce every rank sends and receives 2(n-1)/n of the
buffer, so busbw = algbw x 2(n-1)/n: the figure to hold against a link's bandwidth.
A ps round trip moves the buffer up and back: busbw = 2 x algbw. A local copy reads
and writes it once: busbw = algbw.
"""

from __future__ import annotations


def algbw(nbytes: int, seconds: float) -> float:
    """Bytes per second of the operation as a whole."""
    return nbytes / seconds


def busbw(kind: str, nbytes: int, seconds: float, processes: int) -> float:
    """Bytes per second over the busiest link, by the kind of operation."""
    factor = {"allreduce": 2 * (processes - 1) / processes, "ps_roundtrip": 2.0, "copy": 1.0}[kind]
    return algbw(nbytes, seconds) * factor


FAST_SIZES = (64 * 1024, 4 * 2**20)
FULL_SIZES = tuple(4 * 1024 * 4**k for k in range(8))  # 4 KB ... 64 MB, float32
FAST_ROUNDS, FULL_ROUNDS = 3, 10
