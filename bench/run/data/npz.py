"""Arrays from a `.npz` file: the reading every such file gets (Keras' mnist.npz, a user's
`--data file.npz` of `x` and `y`), and a user's arrays as a run's data set."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.errors import UsageError
from bench.run.data.arrays import Dataset, split_holdout

KEYS = ("x", "y")
# a user's arrays: this fraction, fixed by seed 0, is held out for the validation the run reports
VAL_FRACTION, VAL_SEED = 0.1, 0


def is_file_name(name: str) -> bool:
    return name.endswith(".npz")


def read(path: Path | str, keys: tuple[str, ...], layout: str) -> dict[str, np.ndarray]:
    """The named arrays of an .npz (no pickles); UsageError naming the file and what is wrong."""
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in keys if k not in f.files]
            if missing:
                raise UsageError(f"{path}: no array(s) {', '.join(missing)} (expected {layout})")
            return {k: f[k] for k in keys}
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - numpy raises several kinds for a file that is not an npz
        raise UsageError(f"{path}: not a readable .npz of arrays ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})") from None


def read_user_arrays(path: str) -> tuple[np.ndarray, np.ndarray]:
    """A user's x (N, ...) of numbers and y (N,) of integer labels, checked."""
    if not Path(path).is_file():
        raise UsageError(f"--data {path}: no such file")
    arrays = read(path, KEYS, "x (N, ...) inputs and y (N,) integer labels")
    x, y = arrays["x"], arrays["y"]
    if x.ndim < 2 or not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise UsageError(f"{path}: x must be numbers, one example per row (N, ...), got {x.dtype} {x.shape}")
    if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
        raise UsageError(f"{path}: y must be {len(x)} integer labels, got {y.dtype} {y.shape}")
    if len(y) < 2 or y.min() < 0:
        raise UsageError(f"{path}: y must hold at least 2 labels, none below 0 (got {len(y)}, min {y.min(initial=0)})")
    return x, y


def check(path: str, input_shape: tuple | None = None, classes: int | None = None) -> None:
    """Raise UsageError unless `path` holds arrays a model of `input_shape` and `classes` can train on."""
    x, y = read_user_arrays(path)
    if input_shape is not None and tuple(x.shape[1:]) != tuple(input_shape):
        raise UsageError(f"{path}: x's examples are {tuple(x.shape[1:])}, the model's input is {tuple(input_shape)}")
    if classes is not None and y.max() >= classes:
        raise UsageError(f"{path}: y has label {y.max()}, the model has {classes} classes (0..{classes - 1})")


def load(path: str, dtype: np.dtype) -> Dataset:
    """A user's arrays as a data set: x as the model's input dtype, VAL_FRACTION held out."""
    x, y = read_user_arrays(path)
    train, val = split_holdout(np.ascontiguousarray(x, dtype=dtype), y, VAL_FRACTION, VAL_SEED)
    return Dataset(Path(path).name, train, val)
