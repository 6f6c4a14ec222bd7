"""Helpers to check that a strategy computes what it claims: run k steps in this
process from the seeded initial weights and compare the weights."""

from __future__ import annotations

import numpy as np

from bench.config import RunConfig
from bench.run import models
from bench.run.contract import WorkerContext, worker_class
from bench.run.process.inputs import load_data, worker_split
from bench.run.validation import validate
from strategies import registry

BASE = dict(model="mlp", data="digits", optimizer="sgd", lr=0.1, steps=5, warmup_steps=0, shuffle=False)


def config_for(strategy: str, **changes) -> RunConfig:
    """A validated config: the strategy's options not given take their defaults."""
    config = RunConfig(strategy=strategy, **{**BASE, **changes})
    return validate(config, registry.get(strategy), registry.all_strategies())


def train_in_process(config: RunConfig, steps: int) -> list[np.ndarray]:
    chosen = registry.get(config.strategy)
    strategy = worker_class(chosen)(config, WorkerContext(), chosen)
    batch = registry.get(config.strategy).worker_batch(config)
    strategy.setup(load_data(config, batch))
    for _ in range(steps):
        strategy.step()
    weights = strategy.weights()
    strategy.teardown()
    return weights


def initial_weights(config: RunConfig) -> list[np.ndarray]:
    return [v.numpy() for v in models.for_run(config).weights]


def assert_weights_close(actual: list[np.ndarray], expected: list[np.ndarray], rtol: float = 1e-5) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        scale = max(np.abs(e).max(), 1e-12)
        assert np.abs(a - e).max() <= rtol * scale, f"max relative difference {np.abs(a - e).max() / scale:.2e}"


def load_weights(path) -> list[np.ndarray]:
    """The arrays of a weights.npz written by --save-weights, in variable order."""
    with np.load(path) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


def sgd_step_on(config: RunConfig, x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """The weights after one plain SGD step, from the seeded initial weights, on exactly (x, y)."""
    import tensorflow as tf

    model = models.for_run(config)
    with tf.GradientTape() as tape:
        loss = model.loss(tf.constant(x), tf.constant(y))
    grads = tape.gradient(loss, model.trainables)
    for var, grad in zip(model.trainables, grads, strict=True):
        var.assign_sub(config.lr * tf.convert_to_tensor(grad))
    return [v.numpy() for v in model.weights]


def batches_of(config: RunConfig, picks: list[tuple[int, int]], count: int) -> tuple[np.ndarray, np.ndarray]:
    """Unshuffled batches, concatenated: pick (k, j) is worker k's (of `count`) batch j, from 0."""
    data = load_data(config, config.batch_size)
    b, xs, ys = config.batch_size, [], []
    for worker, j in picks:
        split = worker_split(data, worker, count)
        xs.append(split.x[j * b:(j + 1) * b])
        ys.append(split.y[j * b:(j + 1) * b])
    return np.concatenate(xs), np.concatenate(ys)
