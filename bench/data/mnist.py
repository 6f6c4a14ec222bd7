"""MNIST from files the user already has: `mnist.npz` (Keras layout) or the four IDX files."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from bench.data.arrays import Dataset, Split
from bench.errors import UsageError

IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
        if (folder / name).is_file():
            return folder / name
    return None


def check(data_dir: str | None) -> None:
    if data_dir is None:
        raise UsageError("--data mnist needs --data-dir with mnist.npz or the four IDX files")
    folder = Path(data_dir)
    if (folder / "mnist.npz").is_file():
        return
    missing = [stem for stem in IDX_FILES.values() if _find(folder, stem) is None]
    if missing:
        raise UsageError(f"--data-dir {data_dir}: no mnist.npz and missing IDX file(s): {', '.join(missing)}")


def read_idx(path: Path) -> np.ndarray:
    """An IDX array (unsigned byte data), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise UsageError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir: str) -> Dataset:
    check(data_dir)
    folder = Path(data_dir)
    if (folder / "mnist.npz").is_file():
        with np.load(folder / "mnist.npz") as f:
            arrays = {k: f[k] for k in IDX_FILES}
    else:
        arrays = {k: read_idx(_find(folder, stem)) for k, stem in IDX_FILES.items()}

    def split(x: np.ndarray, y: np.ndarray) -> Split:
        return Split((x.astype(np.float32) / 255.0)[..., None], y.astype(np.int32))

    return Dataset("mnist", split(arrays["x_train"], arrays["y_train"]),
                   split(arrays["x_test"], arrays["y_test"]))
