"""mirrored's worker: tf.distribute.MirroredStrategy over the same towers as multi-tower."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench.run import models
from bench.run.data import Dataset
from bench.run.process.training import feed_for, make_optimizer
from strategies.workers import towers as _towers
from strategies.workers.gradient_step import IN_THE_UPDATE, exchange_and_update, gradients
from strategies.workers.stamps import Stamps


class MirroredWorker(_towers.TowerWorker):

    def setup(self, data: Dataset) -> None:
        n, b = self.place()
        self.reduction = self.config.option("reduction")
        if self.reduction == "nccl":
            if not all("GPU" in tower.upper() for tower in self.towers):
                raise RuntimeError(f"--reduction nccl needs GPU towers; TensorFlow gave {self.towers} (its CPU build "
                                   "computes on the CPU wherever it runs)")
            cross_device = tf.distribute.NcclAllReduce()
        else:
            cross_device = tf.distribute.ReductionToOneDevice(reduce_to_device=self.param_device)
        # mirrored: the same towers, reduced by TensorFlow (by default to the same parameter device)
        strategy = tf.distribute.MirroredStrategy(devices=self.towers, cross_device_ops=cross_device)
        with strategy.scope():
            model = models.for_run(self.config)
            optimizer = make_optimizer(self.config)
        with tf.device(self.param_device):
            feed = feed_for(self.config, data, 0, 1, batch_size=n * b)
        variables = model.trainables

        def replica_step(x, y, stamped: bool):
            i = tf.distribute.get_replica_context().replica_id_in_sync_group
            # mirrored: the optimizer sums the replicas' gradients (of loss / n: the mean)
            loss, grads = gradients(model, variables, _towers.tower_slice(x, i, b), _towers.tower_slice(y, i, b),
                                    replicas=n)
            stamps = Stamps(stamped)
            exchange_and_update(stamps, grads, variables, optimizer, IN_THE_UPDATE)
            return loss, stamps.taken  # ready, end, end

        @tf.function
        def train_step(stamped: bool):
            stamps = Stamps(stamped)
            with tf.device(self.param_device):
                x, y = stamps.start(*feed.batch())
            losses, replica_stamps = strategy.run(lambda: replica_step(x, y, stamped))
            loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)
            if stamped:
                ready, ends, _ = (strategy.experimental_local_results(s) for s in replica_stamps)
                stamps.taken += ready
                # the reduction and the update are one call here: the update counts as exchange
                stamps.taken += [tf.reduce_max(tf.stack(ends))] * 2
            return stamps.output(loss)

        self.use(model, optimizer, train_step)

    def info(self) -> dict[str, Any]:
        return {"towers": self.towers, "parameter_device": self.param_device,
                "cross_device_ops": "NcclAllReduce" if self.reduction == "nccl" else "ReductionToOneDevice"}
