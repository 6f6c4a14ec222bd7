"""single's worker: the model's training step as one tf.function, nothing around it."""

from __future__ import annotations

import tensorflow as tf

from bench import models
from bench.data import Dataset
from bench.run.training import feed_for, make_optimizer
from strategies.workers.eager import EagerWorker
from strategies.workers.stamps import Stamps


class SingleWorker(EagerWorker):
    def setup(self, data: Dataset) -> None:
        model = models.for_run(self.config)
        optimizer = make_optimizer(self.config)
        variables = model.trainables
        feed = feed_for(self.config, data, 0, 1)

        @tf.function
        def train_step(stamped: bool):
            stamps = Stamps(stamped)
            x, y = stamps.start(*feed.batch())
            with tf.GradientTape() as tape:
                loss = model.loss(x, y)
            grads = tape.gradient(loss, variables)
            stamps.take(grads)
            stamps.again()  # single: nothing to exchange, so ready = exchanged
            stamps.take(optimizer.apply_gradients(zip(grads, variables)))
            return stamps.output(loss)

        self.use(model, optimizer, train_step)

    def info(self) -> dict:
        return {"devices": ["/cpu:0" if not tf.config.list_physical_devices("GPU") else "/gpu:0"]}
