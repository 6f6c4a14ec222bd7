"""multi-tower's worker: N towers built by hand, gradients averaged on the parameter device."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench.run import models
from bench.run.data import Dataset
from bench.run.process.training import feed_for, make_optimizer
from strategies.workers import towers as _towers
from strategies.workers.gradient_step import gradients
from strategies.workers.stamps import Stamps


class MultiTowerWorker(_towers.TowerWorker):
    def setup(self, data: Dataset) -> None:
        n, b = self.place()
        with tf.device(self.param_device):  # multi-tower: variables on the parameter device
            model = models.for_run(self.config)
            feed = feed_for(self.config, data, 0, 1, batch_size=n * b)
        optimizer = make_optimizer(self.config)
        variables = model.trainables

        def tower_gradients(x, y, i):
            with tf.device(self.towers[i]):  # multi-tower: tower i's slice of the global batch
                return gradients(model, variables, _towers.tower_slice(x, i, b), _towers.tower_slice(y, i, b))

        @tf.function
        def train_step(stamped: bool):
            stamps = Stamps(stamped)
            with tf.device(self.param_device):
                x, y = stamps.start(*feed.batch())
            results = [tower_gradients(x, y, i) for i in range(n)]
            for i, (_, grads) in enumerate(results):
                with tf.device(self.towers[i]):
                    stamps.take(grads)
            with tf.device(self.param_device):
                # multi-tower: the seed's average_gradients, mean of each variable's tower gradients
                averaged = [_towers.mean(list(g)) for g in zip(*(grads for _, grads in results))]
                stamps.take(averaged)
                stamps.take(optimizer.apply_gradients(zip(averaged, variables)))
                return stamps.output(tf.add_n([loss for loss, _ in results]) / n)

        self.use(model, optimizer, train_step)

    def info(self) -> dict[str, Any]:
        return {"towers": self.towers, "parameter_device": self.param_device}
