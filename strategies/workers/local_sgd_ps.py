"""local-sgd-ps's worker: its own copy of the model on this worker, trained for H steps; then
its change since the last average, divided by N, is added to the global parameters on the ps
tasks; once all N have added theirs (a counter on ps 0), the copy is set to the global
parameters, which are now the average of the N copies."""

from __future__ import annotations

import time
from typing import Any

import tensorflow as tf

from bench.errors import RunFailed
from bench.run import models
from bench.run.contract import StepResult, StepTimes
from bench.run.models.base import Model
from strategies.workers.ps import BARRIER_POLL_S, ParameterServerWorker

AVERAGE_POLL_S = BARRIER_POLL_S / 20  # an average waits for the slowest worker; checked every 0.5 ms


def make_local(graph: tf.Graph, device: str) -> None:
    """Every global variable placed on `device` becomes a local one: this worker initialises it
    (from the model's seeded values, the same as the global ones) and the chief never sees it."""
    globals_ = graph.get_collection_ref(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    trainables = graph.get_collection_ref(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
    for var in [v for v in globals_ if v.device == device]:
        globals_.remove(var)
        if var in trainables:
            trainables.remove(var)
        graph.add_to_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES, var)


class LocalSgdPSWorker(ParameterServerWorker):
    restores_in_session = False  # its checkpoint has the averaged parameters, not its counters

    def ready(self) -> None:
        """A resumed run: the chief restores its copy (and its slots) and makes it the global
        parameters before the start-up barrier lets anyone read them; after it, every worker
        takes them as its copy."""
        resume = self.config.resume_from
        if resume and self.context.is_chief:
            self.saver.restore(self.raw, resume)
            self.raw.run(self.publish)
        super().ready()
        if resume:
            self.raw.run(self.copy_global)

    def _build_model(self) -> Model:
        return models.for_run(self.config)  # the global parameters, never partitioned

    def build_train_op(self, feed, optimizer):
        n, graph = self.context.num_workers, tf.compat.v1.get_default_graph()
        with tf.device(self.worker_device):
            # local-sgd-ps: this worker's own copy, and the global parameters as it last pulled them
            self.local = models.for_run(self.config)
            anchors = [tf.compat.v1.Variable(v.initial_value, trainable=False, name=f"anchor_{i}")
                       for i, v in enumerate(self.local.weights)]
            x, y = feed.batch()
            loss = self.local.loss(x, y)
            grads = self.local.unscaled(tf.gradients(self.local.scaled(loss), self.local.trainables))
            train = optimizer.apply_gradients(zip(grads, self.local.trainables))
        # the average: each worker adds (copy - anchor) / N to the global parameters on the ps ...
        pushes = [g.assign_add((v.read_value() - a.read_value()) / n, read_value=False)
                  for g, v, a in zip(self.model.weights, self.local.weights, anchors, strict=True)]
        with tf.device("/job:ps/task:0"):
            self.rounds = tf.compat.v1.Variable(0, dtype=tf.int64, trainable=False, name="averages_pushed")
            pulls = tf.compat.v1.Variable(0, dtype=tf.int64, trainable=False, name="averages_pulled")
        with tf.control_dependencies(pushes):
            self.push = self.rounds.assign_add(1, read_value=False)
        self.pushed = self.rounds.read_value()
        # ... and once all N have, pulls the global parameters into its copy and its anchor
        with tf.device(self.worker_device):
            values = [tf.identity(g.read_value()) for g in self.model.weights]
            pulled = tf.group(*[v.assign(value, read_value=False) for v, value in zip(self.local.weights, values)],
                              *[a.assign(value, read_value=False) for a, value in zip(anchors, values)])
        self.copy_global = pulled
        self.publish = tf.group(*[g.assign(v.read_value(), read_value=False)
                                  for g, v in zip(self.model.weights, self.local.weights, strict=True)])
        with tf.control_dependencies([pulled]):
            self.pull = pulls.assign_add(1, read_value=False)
        self.pulled = pulls.read_value()
        self.optimizer = optimizer
        # a checkpoint's global step: this worker's step count, set before it saves (no step counts
        # on the ps: local steps move nothing)
        self.step_value = tf.compat.v1.placeholder(tf.int64, ())
        self.set_global_step = self.global_step.assign(self.step_value, read_value=False)
        make_local(graph, self.worker_device)
        self._averages = 0
        self._step = self.config.resume_step
        return {"loss": loss, "train": train}, []

    def run_step(self, stamped: bool) -> dict[str, Any]:
        out = self.bounded.run({"loss": self.fetches["loss"], "train": self.fetches["train"]})
        self.deadlines.stepped = True
        return out

    def step(self, stamped: bool = False) -> StepResult:
        started = time.perf_counter()
        out = self.run_step(stamped)
        self._step += 1
        computed = time.perf_counter()
        period = self.config.option("sync_period")
        waited = 0.0
        if self._step % period == 0 or self._step == self.config.steps:  # the last step averages too
            waited = self._average()
        ended = time.perf_counter()
        times = None
        if stamped:
            times = StepTimes(compute_s=computed - started, exchange_s=ended - computed, waiting_s=waited)
        return StepResult(float(out["loss"]), self.config.batch_size, self._step, times=times,
                          extra={"global_step_after": self._step})

    def _average(self) -> float:
        """Push this worker's change, wait until all N have pushed theirs, pull; the waits, in seconds.
        A push waits until every worker has pulled the last average: else it would change the
        global parameters under a slower worker that has not pulled them yet."""
        raw, n = self.raw, self.context.num_workers
        began = time.perf_counter()
        self._wait_for(raw, self.pulled, self._averages * n)
        raw.run(self.push)
        self._averages += 1
        self._wait_for(raw, self.pushed, self._averages * n)
        waited = time.perf_counter() - began
        raw.run(self.pull)
        return waited

    def checkpoint_variables(self) -> dict[str, tf.Variable]:
        """This worker's copy (right after an average, the average), the global step, and its
        optimizer slots (its own: they are not averaged), under the global parameters' names.
        Not the global parameters themselves: a faster worker may already have pushed its next
        change into them while the chief saves."""
        out = {g.op.name: own for g, own in zip(self.model.weights, self.local.weights, strict=True)}
        out[self.global_step.op.name] = self.global_step
        for shared, own in zip(self.model.weights, self.local.weights, strict=True):
            for name in self.optimizer.get_slot_names():
                slot = self.optimizer.get_slot(own, name)
                if slot is not None:
                    out[f"{shared.op.name}/{slot.op.name.rsplit('/', 1)[-1]}"] = slot
        return out

    def save_checkpoint(self, directory: str, global_step: int) -> str:
        self.raw.run(self.set_global_step, {self.step_value: global_step})
        return super().save_checkpoint(directory, global_step)

    def _wait_for(self, session, counter: tf.Tensor, wanted: int) -> None:
        """Poll `counter` on ps 0 until it reaches `wanted`, within the run's limit."""
        limit = self.deadlines.limit_s()
        deadline = time.monotonic() + limit
        while session.run(counter) < wanted:
            if time.monotonic() > deadline:
                raise RunFailed(f"step (averaging): waited {limit:.0f} s for the other workers to reach {wanted}")
            time.sleep(AVERAGE_POLL_S)

    def info(self) -> dict[str, Any]:
        return {**super().info(), "sync_period": self.config.option("sync_period"), "averages": self._averages}
