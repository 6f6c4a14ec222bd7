"""Data sources by name, converted to a model's input shape and sharded by worker."""

from __future__ import annotations

from bench.data import cifar10, digits, mnist, synthetic
from bench.data.arrays import Dataset, Split, to_shape
from bench.errors import UsageError

SOURCES = ("synthetic", "digits", "mnist", "cifar10")
_NEEDS_DIR = {"mnist": mnist.check, "cifar10": cifar10.check}


def check(name: str, data_dir: str | None) -> None:
    """Raise UsageError if `name` is unknown or its files are missing."""
    if name not in SOURCES:
        raise UsageError(f"--data: unknown data {name!r}; choose from {', '.join(SOURCES)}")
    if name in _NEEDS_DIR:
        _NEEDS_DIR[name](data_dir)


def load(name: str, shape: tuple[int, int, int], batch_size: int, seed: int,
         data_dir: str | None = None) -> Dataset:
    """The whole data set, images converted to `shape` (its files are validated as they are read)."""
    if name not in SOURCES:
        raise UsageError(f"--data: unknown data {name!r}; choose from {', '.join(SOURCES)}")
    if name == "synthetic":
        return synthetic.load(shape, batch_size, seed)
    raw = {"digits": digits.load, "mnist": lambda: mnist.load(data_dir),
           "cifar10": lambda: cifar10.load(data_dir)}[name]()

    def convert(split: Split | None) -> Split | None:
        return None if split is None else Split(to_shape(split.x, shape), split.y)

    return Dataset(raw.name, convert(raw.train), convert(raw.val))


__all__ = ["Dataset", "Split", "check", "load", "SOURCES"]
