"""single: one process, one device, a tf.function training step. The baseline of
every scaling-efficiency figure, so it adds nothing to a bare training loop."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bench import models
from bench.data import Dataset, Split
from bench.training import evaluate_in_chunks, feed_for, make_optimizer
from strategies.base import StepResult, Strategy


class Single(Strategy):
    name = "single"
    description = "one process, one device: the baseline"

    def setup(self, data: Dataset) -> None:
        self.model = models.build(self.config.model, self.config.seed)
        optimizer = make_optimizer(self.config)
        variables = self.model.trainables
        model = self.model
        feed = feed_for(self.config, data, 0, 1)
        self._step = 0

        @tf.function
        def train_step():
            x, y = feed.batch()
            with tf.GradientTape() as tape:
                loss = model.loss(x, y)
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        self._train_step = train_step
        self._eval = tf.function(model.evaluate, reduce_retracing=True)

    def step(self) -> StepResult:
        loss = self._train_step()
        self._step += 1
        return StepResult(float(loss), self.config.batch_size, self._step)

    def evaluate(self, split: Split) -> tuple[float, float]:
        return evaluate_in_chunks(self._eval, split)

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.model.weights]

    def info(self) -> dict:
        return {"devices": ["/cpu:0" if not tf.config.list_physical_devices("GPU") else "/gpu:0"]}
