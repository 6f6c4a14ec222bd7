"""allreduce-tf's worker: MultiWorkerMirroredStrategy with ring collectives over gRPC."""

from __future__ import annotations

from typing import Any, ClassVar

import tensorflow as tf

from bench.config import RunConfig
from bench.run import models
from bench.run.data import Dataset
from bench.run.process.training import feed_for, make_optimizer
from strategies.workers.eager import EagerWorker
from strategies.workers.gradient_step import IN_THE_UPDATE, train_step


class AllreduceTFWorker(EagerWorker):
    _tf_strategy: ClassVar[tf.distribute.Strategy | None] = None

    _communication: ClassVar[str] = "RING"

    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        # allreduce-tf: must exist before TensorFlow starts its runtime (it sets up the collectives); among GPUs
        # NCCL, as GPU users run it, else the ring over gRPC (its collectives between CPUs)
        implementation = tf.distribute.experimental.CommunicationImplementation
        cls._communication = "NCCL" if tf.config.list_physical_devices("GPU") else "RING"
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=getattr(implementation, cls._communication))
        cls._tf_strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        return {"communication": cls._communication}

    def setup(self, data: Dataset) -> None:
        strategy = self._tf_strategy
        if strategy is None:
            raise RuntimeError("configure_runtime() was not called before setup()")
        rank, workers = self.context.rank, self.context.num_workers
        with strategy.scope():  # allreduce-tf: mirrored variables, one copy per worker
            model = models.for_run(self.config)
            optimizer = make_optimizer(self.config)
        feed = feed_for(self.config, data, rank, workers)
        variables = model.trainables

        def replica_step(stamped: bool):
            # allreduce-tf: the optimizer sums the replicas' gradients (the allreduce), each of
            # loss / replicas: the mean; the allreduce and the update are one call
            return train_step(stamped, feed.batch, model, variables, optimizer, IN_THE_UPDATE,
                              replicas=strategy.num_replicas_in_sync)

        @tf.function
        def step(stamped: bool):
            return strategy.experimental_local_results(strategy.run(lambda: replica_step(stamped)))[0]

        self.use(model, optimizer, step, collective=True)

    def info(self) -> dict[str, Any]:
        return {"workers": self.context.num_workers, "communication": self._communication}
