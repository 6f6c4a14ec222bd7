"""multi-tower: in-graph replication built by hand, as the seed's CIFAR-10 multi-GPU example.

One process, one graph, N towers on N devices (GPUs, or logical CPU devices).
Variables live on one parameter device; each tower computes gradients on its
slice of the global batch; the gradients are averaged on the parameter device
and applied once.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import tensorflow as tf

from bench import devices, models
from bench.config import RunConfig
from bench.data import Dataset, Split
from bench.training import evaluate_in_chunks, feed_for, make_optimizer
from strategies import _towers
from strategies.base import StepResult, Strategy

TOWER_PROBE_STEPS = 20


class MultiTower(Strategy):
    name = "multi-tower"
    description = "in-graph replication by hand: N towers, gradients averaged on one parameter device"
    options = _towers.TOWER_OPTIONS

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        _towers.validate_towers(config)

    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        return _towers.configure(config)

    @classmethod
    def worker_batch(cls, config: RunConfig) -> int:
        return config.batch_size * config.workers

    def setup(self, data: Dataset) -> None:
        n, b = self.config.workers, self.config.batch_size
        self.towers = devices.tower_devices(n)
        self.param_device = devices.parameter_device(self.config.option("variable_device"))
        with tf.device(self.param_device):
            self.model = models.build(self.config.model, self.config.seed)
            feed = feed_for(self.config, data, 0, 1, batch_size=n * b)
        optimizer = make_optimizer(self.config)
        model, variables = self.model, self.model.trainables

        def tower_gradients(x, y, i):
            with tf.device(self.towers[i]):
                with tf.GradientTape() as tape:
                    loss = model.loss(_towers.tower_slice(x, i, b), _towers.tower_slice(y, i, b))
                return loss, tape.gradient(loss, variables)

        @tf.function
        def train_step():
            with tf.device(self.param_device):
                x, y = feed.batch()
            results = [tower_gradients(x, y, i) for i in range(n)]
            with tf.device(self.param_device):
                # the seed's average_gradients: mean of each variable's tower gradients
                averaged = [tf.add_n(list(g)) / n for g in zip(*(grads for _, grads in results))]
                optimizer.apply_gradients(zip(averaged, variables))
                return tf.add_n([loss for loss, _ in results]) / n

        self._train_step = train_step
        self._tower_gradients = tower_gradients
        self._probe_batch = (data.train.x[: n * b], data.train.y[: n * b])
        self._eval = tf.function(model.evaluate, reduce_retracing=True)
        self._step = 0

    def step(self) -> StepResult:
        loss = self._train_step()
        self._step += 1
        return StepResult(float(loss), self.config.batch_size * self.config.workers, self._step)

    def evaluate(self, split: Split) -> tuple[float, float]:
        return evaluate_in_chunks(self._eval, split)

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.model.weights]

    def tower_compute_s(self) -> list[float]:
        """Median forward+backward time of each tower run alone (a probe after training:
        inside the training graph the towers' times cannot be told apart)."""
        x, y = (tf.constant(a) for a in self._probe_batch)
        out = []
        for i in range(len(self.towers)):
            probe = tf.function(lambda i=i: self._tower_gradients(x, y, i))
            probe()
            times = []
            for _ in range(TOWER_PROBE_STEPS):
                start = time.perf_counter()
                loss, _ = probe()
                float(loss)
                times.append(time.perf_counter() - start)
            out.append(float(np.median(times)))
        return out

    def info(self) -> dict[str, Any]:
        return {"towers": self.towers, "parameter_device": self.param_device,
                "tower_compute_s": self.tower_compute_s()}
