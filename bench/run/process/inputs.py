"""What a worker is fed, decided without TensorFlow: its data set, its shard, the order of
its examples, and how many table rows its batches touch."""

from __future__ import annotations

import dataclasses

import numpy as np

from bench.config import RunConfig
from bench.run import models
from bench.run.data import IDS, KIND, SIGNATURE, Dataset, Split, ids, load, npz, synthetic

MAX_PLAN_EXAMPLES = 1 << 24


def load_data(config: RunConfig, batch_size: int, rank: int = 0, first_batch: int = 0) -> Dataset:
    """The data set of a run's worker `rank`: random images are made per worker; every other
    source is the same for all workers (each trains on its shard). A resumed run's feed starts
    at `first_batch`, past the batches its workers took before the checkpoint."""
    return dataclasses.replace(_load(config, batch_size, rank), first_batch=first_batch)


def _load(config: RunConfig, batch_size: int, rank: int) -> Dataset:
    if npz.is_file_name(config.data):
        return npz.load(config.data, models.input_dtype(config.model))
    if models.reads(config.model) == SIGNATURE:
        model = models.signature(config.model)
        return synthetic.for_signature(model.input_shape, np.dtype(model.input_dtype), model.num_classes,
                                       model.input_high, batch_size, config.seed + rank)
    if KIND.get(config.data) == IDS:
        if config.data == "criteo":
            return ids.criteo(config.data_dir, config.embedding_rows)
        return ids.synthetic(config.embedding_rows, config.id_features, config.zipf_exponent, config.seed)
    return load(config.data, models.input_shape(config.model, config.image_size), batch_size, config.seed + rank,
                config.data_dir, config.teacher_factors, config.teacher_examples)


def worker_split(data: Dataset, rank: int, num_workers: int) -> Split:
    """This worker's shard of the training data (synthetic data is made per worker)."""
    if data.name == "synthetic":
        return data.train
    return data.train.shard(rank, num_workers)


def feed_seed(config: RunConfig, rank: int) -> int:
    return config.seed * 7919 + rank


def index_plan(size: int, batch_size: int, steps: int, seed: int, shuffle: bool) -> np.ndarray:
    """Example order for `steps` batches: one seeded permutation per epoch, concatenated."""
    needed = min(max(steps * batch_size, size), max(MAX_PLAN_EXAMPLES, size))
    epochs = -(-needed // size)
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(size) if shuffle else np.arange(size) for _ in range(epochs)]
    return np.concatenate(orders).astype(np.int32)


def rows_touched(config: RunConfig, data: Dataset, rank: int, num_workers: int, batches: int = 50) -> float:
    """Distinct table rows worker `rank`'s batches read, on average: counted on the first
    `batches` batches it is fed (the same plan as its feed)."""
    split = worker_split(data, rank, num_workers)
    plan = index_plan(len(split), config.batch_size, batches, feed_seed(config, rank), config.shuffle)
    return ids.rows_touched(split, config.batch_size, plan, batches)
