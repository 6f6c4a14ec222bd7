"""mirrored: the multi-tower job through tf.distribute.MirroredStrategy, on the same
devices and the same global batch, so the hand-built towers can be compared with
TensorFlow's own."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from bench import devices, models
from bench.config import RunConfig
from bench.data import Dataset, Split
from bench.training import evaluate_in_chunks, feed_for, make_optimizer
from strategies import _towers
from strategies.base import StepResult, Strategy


class Mirrored(Strategy):
    name = "mirrored"
    description = "tf.distribute.MirroredStrategy over the same towers"
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
        cross_device = tf.distribute.ReductionToOneDevice(reduce_to_device=self.param_device)
        self.strategy = tf.distribute.MirroredStrategy(devices=self.towers, cross_device_ops=cross_device)
        with self.strategy.scope():
            self.model = models.build(self.config.model, self.config.seed)
            optimizer = make_optimizer(self.config)
        with tf.device(self.param_device):
            feed = feed_for(self.config, data, 0, 1, batch_size=n * b)
        model, variables, strategy = self.model, self.model.trainables, self.strategy

        def replica_step(x, y):
            i = tf.distribute.get_replica_context().replica_id_in_sync_group
            with tf.GradientTape() as tape:
                loss = model.loss(_towers.tower_slice(x, i, b), _towers.tower_slice(y, i, b))
                # TF1 optimizers sum the replicas' gradients; scaling by 1/n makes that the mean
                scaled = loss / n
            optimizer.apply_gradients(list(zip(tape.gradient(scaled, variables), variables)))
            return loss

        @tf.function
        def train_step():
            x, y = feed.batch()
            losses = strategy.run(replica_step, args=(x, y))
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

        self._train_step = train_step
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

    def info(self) -> dict[str, Any]:
        return {"towers": self.towers, "parameter_device": self.param_device,
                "cross_device_ops": "ReductionToOneDevice"}
