"""allreduce's worker: hvd.allreduce averages each gradient over the ranks, one call per gradient as
Horovod's DistributedGradientTape makes them (called here directly, so that the step's stamps see both
the local and the averaged gradients)."""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from bench.config import RunConfig
from bench.errors import RunFailed
from bench.run import models
from bench.run.contract import StepResult
from bench.run.data import Dataset
from bench.run.models.base import Model
from bench.run.process.training import feed_for, make_optimizer
from strategies._compression import FP16, TOPK
from strategies.workers.compression import Compressor, Encoded
from strategies.workers.eager import EagerWorker
from strategies.workers.gradient_step import train_step
from strategies.workers.horovod_trace import TimelineSample, tensor_name


class AllreduceWorker(EagerWorker):
    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        import horovod.tensorflow as hvd

        controller = config.option("hvd_controller")
        if not (hvd.gloo_built() if controller == "gloo" else hvd.mpi_built()):
            raise RunFailed(f"this Horovod build has no {controller} support; run ./run_bench.sh setup")
        return {}

    def start_rank(self, data: Dataset) -> tuple[Any, Model, Any, Any]:
        """Horovod, the model, its optimizer and this rank's feed: each rank reads its own shard."""
        import horovod.tensorflow as hvd

        self.hvd = hvd
        # local-sgd's worker starts its ranks here too; it traces nothing (traces_exchange is False)
        self.timeline = TimelineSample(self.context.run_dir, os.environ.get("HOROVOD_TIMELINE"))
        return (hvd, models.for_run(self.config), make_optimizer(self.config),
                feed_for(self.config, data, hvd.rank(), hvd.size()))

    def setup(self, data: Dataset) -> None:
        hvd, model, optimizer, feed = self.start_rank(data)
        variables = model.trainables
        compressor = Compressor(self.config.option("compression"), variables)
        compression = hvd.Compression.fp16 if compressor.kind == FP16 else hvd.Compression.none
        as_dense = self.config.option("sparse_as_dense")

        def average(grad, var):
            # a table's gradient (IndexedSlices) is allgathered row by row, unless sent dense
            if as_dense and isinstance(grad, tf.IndexedSlices):
                grad = tf.convert_to_tensor(grad)
            if compressor.kind == TOPK and not isinstance(grad, tf.IndexedSlices):
                # top-k pairs cannot be summed on the way round a ring: every rank gathers all of
                # them and sums them itself (scatter_nd adds the values of repeated indices)
                wire = compressor.encode(grad, var)
                gathered = Encoded(values=hvd.allgather(wire.values), indices=hvd.allgather(wire.indices))
                return compressor.decode(gathered, var) / hvd.size()
            return hvd.allreduce(grad, op=hvd.Average, compression=compression, name=tensor_name(var))

        def exchange(grads):
            # allreduce: the gradients come back averaged over all ranks (ring allreduce); one
            # hvd.allreduce per gradient, as DistributedGradientTape does, so that the stamps
            # can tell the local gradients from the averaged ones
            return [average(g, v) for g, v in zip(grads, variables, strict=True)]

        @tf.function
        def step(stamped: bool):
            return train_step(stamped, feed.batch, model, variables, optimizer, exchange)

        if self.config.option("timeline") and "HOROVOD_TIMELINE" not in os.environ and self.context.run_dir:
            # started by the user's mpirun (our launcher sets HOROVOD_TIMELINE for its ranks)
            hvd.start_timeline(self.timeline.path_for_user_launch())
        # allreduce: every rank starts from rank 0's weights (they are seeded alike; this makes it so)
        hvd.broadcast_variables(model.weights, root_rank=0)
        self.use(model, optimizer, step, collective=True)

    def step(self, stamped: bool = False) -> StepResult:
        result = self.timeline.timed(lambda: super(AllreduceWorker, self).step(stamped))
        if result.global_step == 1 and self.optimizer.variables():
            # allreduce: optimizer slots exist only after the first step: make them rank 0's too
            self.hvd.broadcast_variables(self.optimizer.variables(), root_rank=0)
        return result

    def trace_exchange(self, steps: range | None) -> None:
        self.timeline.trace(steps)

    def info(self) -> dict[str, Any]:
        self.timeline.write(self.hvd.rank())
        # the controller Horovod runs with, asked of Horovod rather than read back from the flag
        controller = "gloo" if self.hvd.gloo_enabled() else "mpi" if self.hvd.mpi_enabled() else "none"
        return {"ranks": self.hvd.size(), "controller": controller,
                "horovod_environment": {k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")}}
