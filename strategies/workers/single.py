"""single's worker: the model's training step as one tf.function, nothing around it."""

from __future__ import annotations

import tensorflow as tf

from bench.run import models
from bench.run.data import Dataset
from bench.run.process.training import feed_for, make_optimizer
from strategies.workers.eager import EagerWorker
from strategies.workers.gradient_step import train_step


class SingleWorker(EagerWorker):
    def setup(self, data: Dataset) -> None:
        model = models.for_run(self.config)
        optimizer = make_optimizer(self.config)
        variables = model.trainables
        feed = feed_for(self.config, data, 0, 1)

        @tf.function
        def step(stamped: bool):  # single: nothing to exchange, so ready = exchanged
            return train_step(stamped, feed.batch, model, variables, optimizer)

        self.use(model, optimizer, step)

    def info(self) -> dict:
        return {"devices": ["/cpu:0" if not tf.config.list_physical_devices("GPU") else "/gpu:0"]}
