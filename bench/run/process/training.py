"""Pieces every strategy trains with, so that all of them do the same arithmetic:
the optimizer, the input pipeline of one worker, and chunked evaluation."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from bench.config import RunConfig
from bench.run.data import Dataset, Split
from bench.run.process.feed import DeviceFeed
from bench.run.process.inputs import feed_seed, worker_split

MOMENTUM = 0.9
EVAL_CHUNK = 1000


def make_optimizer(config: RunConfig) -> tf.compat.v1.train.Optimizer:
    """TF1 optimizers: they run in v1 graphs (where SyncReplicasOptimizer wraps
    them) and in tf.function alike, so every strategy applies identical updates."""
    if config.optimizer == "sgd":
        return tf.compat.v1.train.GradientDescentOptimizer(config.lr)
    if config.optimizer == "momentum":
        return tf.compat.v1.train.MomentumOptimizer(config.lr, MOMENTUM)
    if config.optimizer == "adam":
        return tf.compat.v1.train.AdamOptimizer(config.lr)
    raise ValueError(f"unknown optimizer {config.optimizer}")


def feed_for(config: RunConfig, data: Dataset, rank: int, num_workers: int,
             batch_size: int | None = None, local_variable: bool = False) -> DeviceFeed:
    """This worker's input: its shard, shuffled by a seed of its own; synthetic data is one fixed batch.
    A resumed run's feed starts past the batches its workers took before the checkpoint."""
    synthetic = data.name == "synthetic"
    return DeviceFeed(worker_split(data, rank, num_workers), batch_size or config.batch_size, config.steps,
                      seed=feed_seed(config, rank), shuffle=config.shuffle and not synthetic,
                      fixed=synthetic, local_variable=local_variable, start_batch=data.first_batch)


def evaluate_in_chunks(batch_eval: Callable[[np.ndarray, np.ndarray], tuple[float, float]],
                       split: Split) -> tuple[float, float]:
    """Mean loss and accuracy over `split`, from a function giving (summed loss, correct)."""
    total_loss = total_correct = 0.0
    for start in range(0, len(split), EVAL_CHUNK):
        loss, correct = batch_eval(split.x[start:start + EVAL_CHUNK], split.y[start:start + EVAL_CHUNK])
        total_loss += float(loss)
        total_correct += float(correct)
    return total_loss / len(split), total_correct / len(split)
