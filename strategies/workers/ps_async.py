"""ps-async's worker: its gradients applied to the ps tasks' variables the moment they arrive."""

from __future__ import annotations

import tensorflow as tf

from bench.run.contract import StepResult, StepTimes
from strategies.workers.ps import STAMPS, ParameterServerWorker, atomic_increment


class PSAsyncWorker(ParameterServerWorker):
    def build_train_op(self, feed, optimizer):
        variables = self.model.trainables
        # the global step when this worker reads the parameters: read on the ps alongside them,
        # not before them (a control dependency made the pull wait a round trip for this read:
        # 0.7 ms of a 5 ms mlp step, 6% of ps-async's throughput) ...
        stamps, params_version, loss, grads = self.local_gradients(feed, self.global_step.read_value)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            # ps-async: applied on the ps tasks at once, whatever the other workers are doing
            train = optimizer.apply_gradients(zip(self.to_ps(grads, variables), variables))
        # ... and the step its update became: the difference, less one, is how many other
        # updates came in between (the increment is atomic, so every update has its own step;
        # it waits for the version read, so the difference is never negative)
        with tf.control_dependencies([train, params_version]):
            applied_at = atomic_increment(self.global_step, "global_step")
        stamps.take(applied_at)  # [start, pulled, ready, end]
        return {"loss": loss, "read_at": params_version, "applied_at": applied_at, STAMPS: tf.stack(stamps.taken)}, []

    def step(self, stamped: bool = False) -> StepResult:
        out = self.run_step(stamped)
        after = int(out["applied_at"])
        times = None
        if stamped:
            start, pulled, ready, end = out[STAMPS]
            # ps-async: nobody waits for another worker; the pull, the push and the update on the
            # ps (queued behind other workers' updates there) are communication
            times = StepTimes(compute_s=ready - pulled, exchange_s=(pulled - start) + (end - ready), waiting_s=0.0)
        return StepResult(float(out["loss"]), self.strategy.worker_batch(self.config), after,
                          staleness=after - 1 - int(out["read_at"]), applied=True,
                          extra={"global_step_after": after}, times=times)
