"""Random images and labels, made once: the standard input for throughput runs."""

import numpy as np

from bench.data.arrays import Dataset, Split


def load(shape: tuple[int, int, int], batch_size: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    x = rng.random((batch_size, *shape), dtype=np.float32)
    y = rng.integers(0, 10, size=batch_size).astype(np.int32)
    return Dataset("synthetic", Split(x, y), None)
