"""CIFAR-10 from the python pickle batches (`cifar-10-batches-py`) the user already has."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from bench.data.arrays import Dataset, Split
from bench.errors import UsageError

TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCH = "test_batch"


def _folder(data_dir: str) -> Path:
    folder = Path(data_dir)
    nested = folder / "cifar-10-batches-py"
    return nested if nested.is_dir() else folder


def check(data_dir: str | None) -> None:
    if data_dir is None:
        raise UsageError("--data cifar10 needs --data-dir with cifar-10-batches-py")
    folder = _folder(data_dir)
    missing = [n for n in [*TRAIN_BATCHES, TEST_BATCH] if not (folder / n).is_file()]
    if missing:
        raise UsageError(f"--data-dir {data_dir}: missing CIFAR-10 batch file(s): {', '.join(missing)}")


def _read(path: Path) -> Split:
    with open(path, "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return Split(data.astype(np.float32) / 255.0, np.asarray(batch[b"labels"], dtype=np.int32))


def load(data_dir: str) -> Dataset:
    check(data_dir)
    folder = _folder(data_dir)
    parts = [_read(folder / n) for n in TRAIN_BATCHES]
    train = Split(np.concatenate([p.x for p in parts]), np.concatenate([p.y for p in parts]))
    return Dataset("cifar10", train, _read(folder / TEST_BATCH))
