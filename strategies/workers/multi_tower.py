"""multi-tower's worker: N towers built by hand, gradients averaged on the parameter device."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import tensorflow as tf

from bench import models
from bench.data import Dataset
from bench.run.training import feed_for, make_optimizer
from strategies.workers import towers as _towers
from strategies.workers.stamps import Stamps

TOWER_PROBE_STEPS = 20


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
                with tf.GradientTape() as tape:
                    loss = model.loss(_towers.tower_slice(x, i, b), _towers.tower_slice(y, i, b))
                return loss, tape.gradient(loss, variables)

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

        self._tower_gradients = tower_gradients
        self._probe_batch = (data.train.x[: n * b], data.train.y[: n * b])
        self.use(model, optimizer, train_step)

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
