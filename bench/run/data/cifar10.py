"""CIFAR-10 from the python pickle batches (`cifar-10-batches-py`) the user already has.

The format is a pickle, and `pickle.load` runs whatever a crafted file asks for; the
batches are read with an unpickler that admits only what a real batch holds.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import UsageError
from bench.run.data.arrays import Dataset, Split

TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCH = "test_batch"
IMAGE_BYTES = 3 * 32 * 32
# What numpy needs to rebuild the uint8 array of a batch's b"data" (and nothing that runs code).
ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
}


class BatchUnpickler(pickle.Unpickler):
    """Admits dict, list, bytes, str, int and numpy arrays; refuses every other global."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused to load {module}.{name} (not part of a CIFAR-10 batch)")


def _folder(data_dir: str) -> Path:
    folder = Path(data_dir)
    nested = folder / "cifar-10-batches-py"
    return nested if nested.is_dir() else folder


def _files(data_dir: str | None) -> list[Path]:
    if data_dir is None:
        raise UsageError("--data cifar10 needs --data-dir with cifar-10-batches-py")
    folder = _folder(data_dir)
    missing = [n for n in [*TRAIN_BATCHES, TEST_BATCH] if not (folder / n).is_file()]
    if missing:
        raise UsageError(f"--data-dir {data_dir}: missing CIFAR-10 batch file(s): {', '.join(missing)}")
    return [folder / n for n in [*TRAIN_BATCHES, TEST_BATCH]]


def read_batch(path: Path) -> Split:
    """One batch file, validated; UsageError naming the file and the problem."""
    try:
        batch = BatchUnpickler(io.BytesIO(path.read_bytes()), encoding="bytes").load()
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not a CIFAR-10 batch"
        raise UsageError(f"{path}: not a CIFAR-10 batch ({type(exc).__name__}: {exc})") from None
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise UsageError(f"{path}: not a CIFAR-10 batch (no b'data' and b'labels')")
    data = np.asarray(batch[b"data"])
    labels = np.asarray(batch[b"labels"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != IMAGE_BYTES:
        raise UsageError(f"{path}: data must be uint8 rows of {IMAGE_BYTES} bytes, got {data.dtype} {data.shape}")
    if labels.ndim != 1 or len(labels) != len(data) or not np.issubdtype(labels.dtype, np.integer):
        raise UsageError(f"{path}: labels must be {len(data)} integers, got {labels.dtype} {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() > 9):
        raise UsageError(f"{path}: labels outside 0..9 ({labels.min()}..{labels.max()})")
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return Split(images.astype(np.float32) / 255.0, labels.astype(np.int32))


def check(data_dir: str | None) -> None:
    """Raise UsageError unless every batch file is there and holds a CIFAR-10 batch."""
    for path in _files(data_dir):
        read_batch(path)


def load(data_dir: str) -> Dataset:
    *train_files, test_file = _files(data_dir)
    parts = [read_batch(p) for p in train_files]
    train = Split(np.concatenate([p.x for p in parts]), np.concatenate([p.y for p in parts]))
    return Dataset("cifar10", train, read_batch(test_file))
