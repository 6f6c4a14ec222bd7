"""mirrored's worker: tf.distribute.MirroredStrategy over the same towers as multi-tower."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench import models
from bench.data import Dataset
from bench.run.training import feed_for, make_optimizer
from strategies.mirrored import Mirrored
from strategies.workers import towers as _towers
from strategies.workers.stamps import pack, stamp


class MirroredWorker(_towers.TowerWorker):
    strategy = Mirrored

    def setup(self, data: Dataset) -> None:
        n, b = self.place()
        cross_device = tf.distribute.ReductionToOneDevice(reduce_to_device=self.param_device)
        # mirrored: the same towers, reduced to the same parameter device, by TensorFlow
        strategy = tf.distribute.MirroredStrategy(devices=self.towers, cross_device_ops=cross_device)
        with strategy.scope():
            model = models.build(self.config.model, self.config.seed)
            optimizer = make_optimizer(self.config)
        with tf.device(self.param_device):
            feed = feed_for(self.config, data, 0, 1, batch_size=n * b)
        variables = model.trainables

        def replica_step(x, y):
            i = tf.distribute.get_replica_context().replica_id_in_sync_group
            with tf.GradientTape() as tape:
                loss = model.loss(_towers.tower_slice(x, i, b), _towers.tower_slice(y, i, b))
                # mirrored: the optimizer sums the replicas' gradients; scaling by 1/n makes that the mean
                scaled = loss / n
            grads = tape.gradient(scaled, variables)
            ready = stamp(grads)
            update = optimizer.apply_gradients(list(zip(grads, variables)))
            return loss, ready, stamp(update)

        @tf.function
        def train_step():
            with tf.device(self.param_device):
                start = stamp()
                x, y = feed.batch()
            losses, ready, ends = strategy.run(replica_step, args=(x, y))
            loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)
            # the reduction and the update are one call here: the update counts as exchange
            end = tf.reduce_max(tf.stack(strategy.experimental_local_results(ends)))
            return pack(loss, [start, *strategy.experimental_local_results(ready), end, end])

        self.use(model, train_step)

    def info(self) -> dict[str, Any]:
        return {"towers": self.towers, "parameter_device": self.param_device,
                "cross_device_ops": "ReductionToOneDevice"}
