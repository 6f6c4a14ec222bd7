"""single: one process, one device, a tf.function training step. The baseline of
every scaling-efficiency figure, so it adds nothing to a bare training loop."""

from __future__ import annotations

import tensorflow as tf

from bench import models
from bench.data import Dataset
from bench.training import feed_for, make_optimizer
from strategies._eager import EagerStrategy


class Single(EagerStrategy):
    name = "single"
    description = "one process, one device: the baseline"
    worker_range = (1, 1)

    def setup(self, data: Dataset) -> None:
        model = models.build(self.config.model, self.config.seed)
        optimizer = make_optimizer(self.config)
        variables = model.trainables
        feed = feed_for(self.config, data, 0, 1)

        @tf.function
        def train_step():
            x, y = feed.batch()
            with tf.GradientTape() as tape:
                loss = model.loss(x, y)
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        self.use(model, train_step)

    def info(self) -> dict:
        return {"devices": ["/cpu:0" if not tf.config.list_physical_devices("GPU") else "/gpu:0"]}
