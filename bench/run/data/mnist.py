"""MNIST from files the user already has: `mnist.npz` (Keras layout) or the four IDX files."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from bench.errors import UsageError
from bench.run.data import npz
from bench.run.data.arrays import Dataset, Split

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
    """Raise UsageError unless the files are there and hold MNIST (shapes, dtypes, labels)."""
    read_arrays(data_dir)


def _files(data_dir: str | None) -> dict[str, Path] | Path:
    if data_dir is None:
        raise UsageError("--data mnist needs --data-dir with mnist.npz or the four IDX files")
    folder = Path(data_dir)
    if (folder / "mnist.npz").is_file():
        return folder / "mnist.npz"
    found = {key: _find(folder, stem) for key, stem in IDX_FILES.items()}
    missing = [IDX_FILES[k] for k, path in found.items() if path is None]
    if missing:
        raise UsageError(f"--data-dir {data_dir}: no mnist.npz and missing IDX file(s): {', '.join(missing)}")
    return found


def read_idx(path: Path) -> np.ndarray:
    """An IDX array (unsigned byte data), gzipped or not; UsageError naming the file if it is not one."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:
        raise UsageError(f"{path}: cannot be read ({exc})") from None
    if len(raw) < 4:
        raise UsageError(f"{path}: not an IDX file (only {len(raw)} bytes)")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08 or ndim not in (1, 3):
        raise UsageError(f"{path}: not an unsigned-byte IDX file of labels or images")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise UsageError(f"{path}: IDX header cut short")
    dims = struct.unpack(">" + "I" * ndim, raw[4:header])
    if len(raw) - header != int(np.prod(dims)):
        raise UsageError(f"{path}: header says {'x'.join(map(str, dims))} bytes of data, "
                         f"the file holds {len(raw) - header}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    return npz.read(path, tuple(IDX_FILES), "Keras' mnist.npz layout")


def _check_arrays(arrays: dict[str, np.ndarray], where: Path | str) -> None:
    for part in ("train", "test"):
        x, y = arrays[f"x_{part}"], arrays[f"y_{part}"]
        if x.ndim != 3 or x.shape[1:] != (28, 28) or x.dtype != np.uint8:
            raise UsageError(f"{where}: x_{part} must be uint8 images of 28x28, got {x.dtype} {x.shape}")
        if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
            raise UsageError(f"{where}: y_{part} must be {len(x)} integer labels, got {y.dtype} {y.shape}")
        if len(y) and (y.min() < 0 or y.max() > 9):
            raise UsageError(f"{where}: y_{part} has labels outside 0..9 ({y.min()}..{y.max()})")


def read_arrays(data_dir: str | None) -> dict[str, np.ndarray]:
    """The four MNIST arrays, validated; UsageError naming the file and the problem."""
    files = _files(data_dir)
    if isinstance(files, Path):
        arrays = _read_npz(files)
        _check_arrays(arrays, files)
    else:
        arrays = {k: read_idx(path) for k, path in files.items()}
        _check_arrays(arrays, data_dir)
    return arrays


def load(data_dir: str) -> Dataset:
    arrays = read_arrays(data_dir)

    def split(x: np.ndarray, y: np.ndarray) -> Split:
        return Split((x.astype(np.float32) / 255.0)[..., None], y.astype(np.int32))

    return Dataset("mnist", split(arrays["x_train"], arrays["y_train"]),
                   split(arrays["x_test"], arrays["y_test"]))
