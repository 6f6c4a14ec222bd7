"""Categorical data for the embedding model: each example is one row id per feature of a
shared embedding table, with a click-style label (0/1).

`synthetic-ids`: deterministic from the seed, offline. Feature f of an example draws a
rank k in 1..rows with probability proportional to k^-s (a Zipf law bounded at the
table's size; s = --zipf-exponent, 1.05 by default: a few rows are hot, most are rarely
seen) and maps it to a row through a permutation of its own, so the features' hot rows
differ. The label comes from a fixed random teacher: every row has a score drawn from
N(0, 1); an example clicks when the sum of its rows' scores, scaled by TEACHER_GAIN /
sqrt(features), plus logistic noise is positive. Rows seen often are learnt early, the
long tail late.

`criteo`: the Criteo display-ads TSV a user brings (`train.txt` or `*.tsv` in --data-dir:
label, 13 integer features, 26 hashed categorical features, tab-separated, empty when
missing), at most MAX_FILE_EXAMPLES lines. Integers are bucketed by floor(log2(v + 1));
every (feature, value) pair is hashed into the table's rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.errors import UsageError
from bench.run.data.arrays import Dataset, Split, split_holdout

TRAIN_EXAMPLES = 1 << 17
VAL_EXAMPLES = 1 << 13
TEACHER_GAIN = 3.0
INTEGER_FEATURES, CATEGORICAL_FEATURES = 13, 26
CRITEO_FEATURES = INTEGER_FEATURES + CATEGORICAL_FEATURES
MAX_FILE_EXAMPLES = 1 << 21
VAL_FRACTION = 0.1
SPLIT_SEED = 1234


def zipf_ranks(rng: np.random.Generator, rows: int, exponent: float, size: tuple[int, ...]) -> np.ndarray:
    """Ranks 0..rows-1 with P(k) proportional to (k + 1)^-exponent (inverse of the bounded CDF)."""
    weights = np.arange(1, rows + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size)), rows - 1)


def synthetic(rows: int, features: int, exponent: float, seed: int,
              train: int = TRAIN_EXAMPLES, val: int = VAL_EXAMPLES) -> Dataset:
    rng = np.random.default_rng((seed, rows, features))
    ranks = zipf_ranks(rng, rows, exponent, (train + val, features))
    permutations = np.stack([rng.permutation(rows) for _ in range(features)])
    ids = permutations[np.arange(features)[None, :], ranks].astype(np.int32)
    scores = rng.standard_normal(rows)
    logits = TEACHER_GAIN * scores[ids].sum(axis=1) / np.sqrt(features)
    noise = rng.logistic(size=len(ids))
    labels = (logits + noise > 0).astype(np.int32)
    return Dataset("synthetic-ids", Split(ids[:train], labels[:train]), Split(ids[train:], labels[train:]))


def _file(data_dir: str | None) -> Path:
    if data_dir is None:
        raise UsageError("--data criteo needs --data-dir with train.txt or a .tsv file (Criteo's layout)")
    folder = Path(data_dir)
    found = [folder / "train.txt"] if (folder / "train.txt").is_file() else sorted(folder.glob("*.tsv"))
    if not found:
        raise UsageError(f"--data-dir {data_dir}: no train.txt or .tsv file (Criteo's layout) in it")
    return found[0]


def _read(path: Path, limit: int | None):
    import pandas as pd

    try:
        frame = pd.read_csv(path, sep="\t", header=None, dtype=str, nrows=limit, keep_default_na=False,
                            quoting=3, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UsageError(f"--data criteo: {path.name} is not a Criteo TSV ({str(exc).splitlines()[0]})") from None
    if frame.shape[1] != 1 + CRITEO_FEATURES:
        raise UsageError(f"--data criteo: {path.name} has {frame.shape[1]} columns; Criteo's layout has "
                         f"{1 + CRITEO_FEATURES} (label, {INTEGER_FEATURES} integers, "
                         f"{CATEGORICAL_FEATURES} categories)")
    if not frame[0].isin(["0", "1"]).all():
        raise UsageError(f"--data criteo: {path.name}: the first column (the label) must be 0 or 1")
    return frame


def check_criteo(data_dir: str | None) -> None:
    _read(_file(data_dir), 100)


def _bucket(column) -> np.ndarray:
    """floor(log2(v + 1)) of an integer column; -1 for a negative value, -2 for a missing one."""
    import pandas as pd

    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
    out = np.full(len(values), -2, dtype=np.int64)
    present = ~np.isnan(values)
    out[present] = np.where(values[present] >= 0, np.floor(np.log2(np.maximum(values[present], 0) + 1)), -1)
    return out


def criteo(data_dir: str | None, rows: int) -> Dataset:
    import pandas as pd

    frame = _read(_file(data_dir), MAX_FILE_EXAMPLES)
    ids = np.empty((len(frame), CRITEO_FEATURES), dtype=np.int32)
    for j in range(CRITEO_FEATURES):
        column = frame[j + 1]
        values = _bucket(column) if j < INTEGER_FEATURES else column.to_numpy(dtype=object)
        hashed = pd.util.hash_array(np.asarray(values), categorize=False)
        # the feature's index is mixed in, so equal values of two features land on different rows
        ids[:, j] = ((hashed ^ np.uint64(0x9E3779B97F4A7C15 * (j + 1) % 2**64)) % np.uint64(rows)).astype(np.int32)
    labels = frame[0].to_numpy(dtype=np.int32)
    train, val = split_holdout(ids, labels, VAL_FRACTION, SPLIT_SEED)
    return Dataset("criteo", train, val)


def rows_touched(split: Split, batch_size: int, plan: np.ndarray, batches: int = 50) -> float:
    """Mean distinct ids in the first `batches` batches of `plan` (example indices, in feed order)."""
    counts = [len(np.unique(split.x[plan[i * batch_size:(i + 1) * batch_size]]))
              for i in range(min(batches, len(plan) // batch_size))]
    return float(np.mean(counts)) if counts else 0.0
