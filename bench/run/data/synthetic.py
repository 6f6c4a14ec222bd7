"""Random inputs and labels, made once: the standard input for throughput runs."""

from __future__ import annotations

import numpy as np

from bench.run.data.arrays import Dataset, Split


def load(shape: tuple[int, int, int], batch_size: int, seed: int) -> Dataset:
    """Images of `shape` and labels of 10 classes."""
    return for_signature(shape, np.dtype(np.float32), 10, None, batch_size, seed)


def for_signature(shape: tuple[int, ...], dtype: np.dtype, classes: int, high: int | None, batch_size: int,
                  seed: int) -> Dataset:
    """One batch of what a model's input signature says: floats in [0, 1), or integer ids below
    `high`; labels of its `classes`."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        if high is None:
            raise ValueError("integer inputs need the model's input_high (ids below it) to be made at random")
        x = rng.integers(0, high, size=(batch_size, *shape)).astype(dtype)
    else:
        x = rng.random((batch_size, *shape), dtype=np.float32).astype(dtype, copy=False)
    y = rng.integers(0, classes, size=batch_size).astype(np.int32)
    return Dataset("synthetic", Split(x, y), None)
