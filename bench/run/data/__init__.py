"""Data sources by name, converted to a model's input and sharded by worker.

Two kinds of input: IMAGES (N, H, W, C) float32 for the image classifiers, and IDS
(N, features) int32 row ids for the embedding model; a model reads one kind. A user's model
reads SIGNATURE: what its input says, random ("synthetic") or the user's arrays (`file.npz`).
Any model may read a `.npz` file of `x` and `y` of its input's shape (bench.run.data.npz)."""

from __future__ import annotations

from pathlib import Path

from bench.errors import UsageError
from bench.run.data import cifar10, digits, ids, mnist, npz, synthetic, teacher
from bench.run.data.arrays import Dataset, Split, to_shape

IMAGES, IDS, SIGNATURE = "images", "ids", "signature"
KIND = {"synthetic": IMAGES, "digits": IMAGES, "teacher": IMAGES, "mnist": IMAGES, "cifar10": IMAGES,
        "synthetic-ids": IDS, "criteo": IDS}
SOURCES = tuple(KIND)
SYNTHETIC = {IMAGES: "synthetic", IDS: "synthetic-ids", SIGNATURE: "synthetic"}  # what throughput runs read
_NEEDS_DIR = {"mnist": mnist.check, "cifar10": cifar10.check, "criteo": ids.check_criteo}


def sources_of(kind: str) -> str:
    """The sources of one kind, for a message."""
    return ", ".join(s for s, k in KIND.items() if k == kind)


def label(name: str) -> str:
    """The data's name in run folders: a user's file by its stem."""
    return Path(name).stem if npz.is_file_name(name) else name


def resolve(name: str) -> str:
    """The name every process of a run can read the data by: a user's file made absolute."""
    return str(Path(name).expanduser().resolve()) if npz.is_file_name(name) else name


def check(name: str, data_dir: str | None, kind: str | None = None) -> None:
    """Raise UsageError if `name` is unknown, not of the `kind` a model reads, or its files are missing."""
    if npz.is_file_name(name):
        npz.check(name)
        return
    if kind == SIGNATURE:
        if name != "synthetic":
            raise UsageError(f"--data {name}: a model of your own reads synthetic (inputs as its signature says) "
                             "or your arrays as a file.npz of x and y")
        return
    if name not in SOURCES:
        raise UsageError(f"--data: unknown data {name!r}; choose from {', '.join(SOURCES)}")
    if kind is not None and KIND[name] != kind:
        raise UsageError(f"--data {name}: this model reads {kind}; choose from {sources_of(kind)}")
    if name in _NEEDS_DIR:
        _NEEDS_DIR[name](data_dir)


def load(name: str, shape: tuple[int, int, int], batch_size: int, seed: int,
         data_dir: str | None = None, teacher_factors: int = teacher.DEFAULT_FACTORS,
         teacher_examples: int = teacher.DEFAULT_EXAMPLES) -> Dataset:
    """The whole image data set, images converted to `shape` (its files are validated as they are read)."""
    if KIND.get(name) != IMAGES:
        raise UsageError(f"--data: {name!r} is not an image source; choose from {sources_of(IMAGES)}")
    if name == "synthetic":
        return synthetic.load(shape, batch_size, seed)
    if name == "teacher":
        return teacher.load(shape, teacher_factors, teacher_examples)
    raw = {"digits": digits.load, "mnist": lambda: mnist.load(data_dir),
           "cifar10": lambda: cifar10.load(data_dir)}[name]()

    def convert(split: Split | None) -> Split | None:
        return None if split is None else Split(to_shape(split.x, shape), split.y)

    return Dataset(raw.name, convert(raw.train), convert(raw.val))


__all__ = ["Dataset", "Split", "check", "load", "SOURCES", "KIND", "IMAGES", "IDS", "SIGNATURE", "SYNTHETIC"]
