"""ps-async's worker: its gradients applied to the ps tasks' variables the moment they arrive."""

from __future__ import annotations

import tensorflow as tf

from strategies.base import StepResult
from strategies.ps_async import PSAsync
from strategies.workers.ps import ParameterServerWorker, atomic_increment


class PSAsyncWorker(ParameterServerWorker):
    strategy = PSAsync

    def build_train_op(self, feed, optimizer):
        variables = self.model.trainables
        # the global step when this worker reads the parameters ...
        params_version = self.global_step.read_value()
        with tf.control_dependencies([params_version]):
            x, y = feed.batch()
            loss = self.model.loss(x, y)
        grads = tf.gradients(loss, variables)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            # ps-async: applied on the ps tasks at once, whatever the other workers are doing
            train = optimizer.apply_gradients(zip(grads, variables))
        # ... and the step its update became: the difference, less one, is how many other
        # updates came in between (the increment is atomic, so every update has its own step)
        with tf.control_dependencies([train]):
            applied_at = atomic_increment(self.global_step, "global_step")
        return {"loss": loss, "read_at": params_version, "applied_at": applied_at}, []

    def step(self) -> StepResult:
        out = self.session.run(self.fetches)
        after = int(out["applied_at"])
        return StepResult(float(out["loss"]), self.config.batch_size, after,
                          staleness=after - 1 - int(out["read_at"]), applied=True,
                          extra={"global_step_after": after})
