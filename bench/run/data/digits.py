"""The UCI handwritten digits, 8x8 (1797 images): real data, no download.

`digits.csv.gz` is the copy scikit-learn ships as `sklearn/datasets/data/digits.csv.gz`
(the test set of E. Alpaydin and C. Kaynak's "Optical Recognition of Handwritten Digits",
UCI Machine Learning Repository, 1998, CC BY 4.0): one image per row, 64 pixel counts
0..16 then the digit. It is kept here rather than read through scikit-learn, whose import
cost every process that read it a second, and whose presence made Keras (imported by
Horovod) import it too."""

import gzip
from pathlib import Path

import numpy as np

from bench.run.data.arrays import Dataset, split_holdout

FILE = Path(__file__).with_name("digits.csv.gz")
VAL_FRACTION = 0.2
SPLIT_SEED = 1234  # fixed so every run and strategy validates on the same images


def load() -> Dataset:
    with gzip.open(FILE) as f:
        table = np.loadtxt(f, delimiter=",")
    x = (table[:, :-1].reshape(-1, 8, 8) / 16.0).astype(np.float32)[..., None]
    train, val = split_holdout(x, table[:, -1].astype(int), VAL_FRACTION, SPLIT_SEED)
    return Dataset("digits", train, val)
