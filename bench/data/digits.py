"""scikit-learn's bundled 8x8 handwritten digits (1797 images): real data, no download."""

import numpy as np

from bench.data.arrays import Dataset, split_holdout

VAL_FRACTION = 0.2
SPLIT_SEED = 1234  # fixed so every run and strategy validates on the same images


def load() -> Dataset:
    from sklearn.datasets import load_digits  # a second's import, only where the data is read

    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[..., None]
    train, val = split_holdout(x, bunch.target, VAL_FRACTION, SPLIT_SEED)
    return Dataset("digits", train, val)
