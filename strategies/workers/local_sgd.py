"""local-sgd's worker: local optimizer steps on the rank's shard; every H steps the weights
(and, when asked, the optimizer's slots) are replaced by their average over the ranks."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench.run.contract import StepResult
from bench.run.data import Dataset
from strategies._compression import FP16, parse
from strategies.local_sgd import AVERAGE, LOCAL, SYNC, step_kind
from strategies.workers import gradient_step
from strategies.workers.allreduce import AllreduceWorker
from strategies.workers.eager import StampedOutput
from strategies.workers.stamps import Stamps


class Averaging:
    """Parameter averaging: the ranks' weights (and slots) replaced by their mean. Under fp16 what
    is averaged is each rank's change since the last average (its anchor), so float16 rounds the
    small change, not the weights themselves."""

    def __init__(self, hvd, fp16: bool) -> None:
        self.hvd = hvd
        self.fp16 = fp16
        self.compression = hvd.Compression.fp16 if fp16 else hvd.Compression.none
        self.state: list[tf.Variable] = []  # filled once the optimizer's slots exist
        self.anchors: list[tf.Variable] = []

    def hold(self, variables: list[tf.Variable]) -> None:
        """What is averaged, complete: its anchors start as its values."""
        self.state = list(variables)
        if self.fp16:
            self.anchors = [tf.Variable(v.read_value(), trainable=False) for v in self.state]

    def restart_anchors(self) -> None:
        for anchor, v in zip(self.anchors, self.state, strict=False):
            anchor.assign(v)

    def average(self) -> list:
        hvd = self.hvd
        if not self.fp16:
            return [v.assign(hvd.allreduce(v, op=hvd.Average, name=f"average_{i}"), read_value=False)
                    for i, v in enumerate(self.state)]
        done = []
        for i, (v, anchor) in enumerate(zip(self.state, self.anchors, strict=True)):
            change = hvd.allreduce(v - anchor, op=hvd.Average, compression=self.compression, name=f"average_{i}")
            new = anchor + change
            done += [v.assign(new, read_value=False), anchor.assign(new, read_value=False)]
        return done

    def allreduce(self, grads: list) -> list:
        """Post-local SGD's first phase: the allreduce strategy's exchange."""
        return [self.hvd.allreduce(g, op=self.hvd.Average, compression=self.compression) for g in grads]


def averaging_step(stamped: bool, feed, model, variables, optimizer, averaging: Averaging):
    """A local update (compute), then the average that follows it (the exchange)."""
    stamps = Stamps(stamped)
    x, y = stamps.start(*feed.batch())
    loss, grads = gradient_step.gradients(model, variables, x, y)
    update = optimizer.apply_gradients(zip(grads, variables))
    stamps.take(update)
    with tf.control_dependencies([update]):
        averaged = averaging.average()
    stamps.take(averaged)
    stamps.again()
    with tf.control_dependencies(averaged):
        loss = tf.identity(loss)
    return stamps.output(loss)


class LocalSgdWorker(AllreduceWorker):
    def setup(self, data: Dataset) -> None:
        hvd, model, optimizer, feed = self.start_rank(data)
        variables = model.trainables
        averaging = Averaging(hvd, parse(self.config.option("compression"))[0] == FP16)

        def train_step(kind: str, stamped: bool):
            if kind == AVERAGE:
                return averaging_step(stamped, feed, model, variables, optimizer, averaging)
            # a local step exchanges nothing
            return gradient_step.train_step(stamped, feed.batch, model, variables, optimizer,
                                            averaging.allreduce if kind == SYNC else None)

        def traced(kind: str, stamped: bool):
            return model.function(lambda: train_step(kind, stamped)).get_concrete_function()

        # the local step first: tracing it creates the optimizer's slots the average may include
        self._steps = {(LOCAL, flag): traced(LOCAL, flag) for flag in (False, True)}
        extra = optimizer.variables() if self.config.option("average_optimizer_state") else []
        averaging.hold([*model.weights, *extra])
        kinds = {step_kind(self.config, k) for k in range(1, self.config.steps + 1)}
        self._steps.update({(kind, flag): traced(kind, flag) for kind in kinds - {LOCAL} for flag in (False, True)})
        # every rank starts from rank 0's weights (they are seeded alike; this makes it so)
        hvd.broadcast_variables(model.weights, root_rank=0)
        self.use_model(model, optimizer)  # a resumed run's checkpoint is restored here
        averaging.restart_anchors()
        self._averaged = len(averaging.state)

    def step(self, stamped: bool = False) -> StepResult:
        kind = step_kind(self.config, self._step + 1)
        out = self._steps[(kind, stamped)]()
        self._step += 1
        if not stamped:
            return StepResult(out, self._batch, self._step)
        # a local step waits for no other rank: its stamps are not a collective's
        packed = StampedOutput(out, collective=kind != LOCAL)
        return StepResult(packed, self._batch, self._step, times=packed.times)

    def info(self) -> dict[str, Any]:
        return {**super().info(), "averaged_variables": self._averaged,
                "sync_period": self.config.option("sync_period"),
                "local_sgd_start": self.config.option("local_sgd_start")}
