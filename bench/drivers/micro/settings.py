"""What a micro-benchmark run measures, passed to its processes through the environment."""

from __future__ import annotations

import os
from collections.abc import Callable

# buffer sizes and timed rounds (the bandwidth definitions are in bench.metrics)
FAST_SIZES = (64 * 1024, 4 * 2**20)
FULL_SIZES = tuple(4 * 1024 * 4**k for k in range(8))  # 4 KB ... 64 MB, float32
FAST_ROUNDS, FULL_ROUNDS = 3, 10
# A ps round trip of the per-tensor fit's bytes lasts 1-15 ms, about one time slice of the kernel's
# scheduler: beside a busy process a preempted round reads several ms long, and 2 preempted rounds of 3
# moved a median enough to give the fit's cost per message a negative sign (-27 us, where 57-104 us is
# measured beside the same busy process). ps round trips take this many times the rounds.
PS_ROUNDS_FACTOR = 5
# a ps round trip of these bytes (a size of both sweeps) split into more variables per task: with
# the sweep's one-tensor round trip of the same bytes, the cost per tensor
PS_TENSORS, PS_TENSORS_BYTES = (16, 64), 64 * 1024
# empty functions a ClusterCoordinator schedules at once to time its dispatch (a round lasts ~1 s here)
COORDINATOR_FUNCTIONS = 200
# a CPU worker's compute beside an exchange: matmuls of this side. 48 of them in TensorFlow (1.6 GFLOP) took
# 25 ms on a 2-core machine (24 took 11-18 ms, 2026-11-29), so that on a host of 0.33 cores (`cluster up
# --host-cores`) a step's compute spans many of the CPU budget's 10 ms periods, as a training step's does
COMPUTE_SIDE = 256


def numpy_compute() -> Callable[[], object]:
    """One numpy matmul and tanh of COMPUTE_SIDE (in BLAS's threads, which release the GIL): a
    busy CPU's unit of work, looped beside what is measured."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((COMPUTE_SIDE, COMPUTE_SIDE)).astype(np.float32)
    return lambda: np.tanh(a @ a)


def fast() -> bool:
    return os.environ.get("DISTBENCH_MICRO_MODE", "fast") == "fast"


def sizes() -> tuple[int, ...]:
    """The buffer sizes of the run: the mode's, or those DISTBENCH_MICRO_SIZES lists (bytes, commas)."""
    asked = os.environ.get("DISTBENCH_MICRO_SIZES")
    if asked:
        return tuple(int(v) for v in asked.split(","))
    return FAST_SIZES if fast() else FULL_SIZES


def rounds() -> int:
    asked = os.environ.get("DISTBENCH_MICRO_ROUNDS")
    return int(asked) if asked else FAST_ROUNDS if fast() else FULL_ROUNDS


def compute_rounds() -> int:
    """Rounds of the compute timed beside Horovod's loop and then alone (0: not timed; the profile asks for it)."""
    return int(os.environ.get("DISTBENCH_MICRO_COMPUTE_ROUNDS") or 0)


def transport() -> str:
    return os.environ.get("DISTBENCH_MICRO_TRANSPORT", "")


def label(nbytes: int) -> str:
    return f"{nbytes // 2**20}MB" if nbytes >= 2**20 else f"{nbytes // 1024}KB"


def label_of(transport: str) -> str:
    """The name a transport's rows go under: a sweep's setting labels its own."""
    return os.environ.get("DISTBENCH_MICRO_LABEL") or transport
