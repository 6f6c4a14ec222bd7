"""In-memory image arrays, their conversion to a model's input shape, and sharding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Split:
    """Images (N, H, W, C) float32 in [0, 1] and labels (N,) int32."""

    x: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def shard(self, index: int, count: int) -> Split:
        """Every `count`-th example from `index`: shard k of N gets k, k+N, k+2N, ...

        So without shuffling, the first batches of all N shards together are
        exactly the first N*b examples: a synchronous step over N workers sees
        the same examples as one step of the whole batch.
        """
        return Split(self.x[index::count], self.y[index::count])


@dataclass(frozen=True)
class Dataset:
    name: str
    train: Split
    val: Split | None
    first_batch: int = 0  # batches of a worker's feed a resumed run took before its checkpoint


def to_shape(x: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Resize (nearest neighbour) and match channels of (N, H, W, C) images."""
    height, width, channels = shape
    n, h, w, c = x.shape
    if (h, w) != (height, width):
        rows = (np.arange(height) * h // height).astype(np.int64)
        cols = (np.arange(width) * w // width).astype(np.int64)
        x = x[:, rows[:, None], cols[None, :], :]
    if c != channels:
        if channels == 1:
            x = x.mean(axis=3, keepdims=True)
        elif c == 1:
            x = np.repeat(x, channels, axis=3)
        else:
            raise ValueError(f"cannot convert {c} channels to {channels}")
    return np.ascontiguousarray(x, dtype=np.float32)


def split_holdout(x: np.ndarray, y: np.ndarray, fraction: float, seed: int) -> tuple[Split, Split]:
    """A fixed, seeded train/validation split of one array pair."""
    order = np.random.default_rng(seed).permutation(len(y))
    n_val = int(round(len(y) * fraction))
    val, train = order[:n_val], order[n_val:]
    return Split(x[train], y[train].astype(np.int32)), Split(x[val], y[val].astype(np.int32))
