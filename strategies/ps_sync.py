"""ps-sync: parameter servers with SyncReplicasOptimizer: each global step averages
the first R gradients that arrive for it (R = --replicas-to-aggregate, default N).

R = N: every worker contributes once per step. R > N: fast workers contribute more
than once. R < N: backup workers; the N - R slowest gradients of a step arrive
stale and are dropped.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import tensorflow as tf

from bench.config import RunConfig
from bench.options import Option, positive
from bench.records import STEPS_FILE
from strategies._ps import PS_OPTIONS, ParameterServerStrategy
from strategies.base import StepResult

REPLICAS_TO_AGGREGATE = Option("replicas_to_aggregate", int, None,
                               "ps-sync: gradients averaged per global step (default: --workers)", check=positive)


def mark_aggregated(steps_csv: Path, replicas: int, last_step: int) -> dict:
    """Fill `applied`: of the gradients computed for a global step, the first `replicas`
    to arrive were averaged into it, the rest dropped; none of a step never taken."""
    steps = pd.read_csv(steps_csv)
    if steps.empty:
        return {}
    rank = steps.groupby("global_step")["arrival_order"].rank(method="first")
    steps["applied"] = ((rank <= replicas) & (steps["global_step"] <= last_step)).astype(int)
    tmp = steps_csv.with_suffix(".tmp")
    steps.to_csv(tmp, index=False)
    tmp.replace(steps_csv)
    per_step = steps[steps["applied"] == 1].groupby("global_step").size()
    return {"gradients": int(len(steps)), "gradients_applied": int(steps["applied"].sum()),
            "gradients_dropped": int(len(steps) - steps["applied"].sum()),
            "aggregated_per_step_min": int(per_step.min()), "aggregated_per_step_max": int(per_step.max())}


class PSSync(ParameterServerStrategy):
    name = "ps-sync"
    description = "parameter servers, synchronous updates with SyncReplicasOptimizer"
    options = (*PS_OPTIONS, REPLICAS_TO_AGGREGATE)

    @classmethod
    def replicas(cls, config: RunConfig) -> int:
        return config.option("replicas_to_aggregate") or config.workers

    @classmethod
    def tolerates_worker_loss(cls, config: RunConfig) -> bool:
        # with backup workers the others still supply R gradients per step
        return cls.replicas(config) < config.workers

    def build_train_op(self, feed, optimizer):
        n, r = self.context.num_workers, self.replicas(self.config)
        self.sync = tf.compat.v1.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=r,
                                                             total_num_replicas=n)
        variables = self.model.trainables
        x, y = feed.batch()
        loss = self.model.loss(x, y)
        raw = tf.gradients(loss, variables)
        # Which gradients a step averaged is the order in which they reach the accumulators, so
        # the ticket that records the order and the hand-in to every accumulator happen under
        # one lock on ps 0. The gradients are first copied to their variables' ps tasks, so
        # the lock is never held while they cross the network; taking a ticket in a separate
        # round trip before handing in let another worker slip in between.
        staged = []
        for grad, var in zip(raw, variables, strict=True):
            with tf.device(var.device):
                staged.append(tf.identity(grad))
        arrivals = tf.compat.v1.Variable(0, dtype=tf.int64, trainable=False, name="gradient_arrivals")
        with tf.device(self.global_step.device):
            mutex = tf.raw_ops.MutexV2(shared_name="distbench_gradient_hand_in")
            with tf.control_dependencies(staged):
                lock = tf.raw_ops.MutexLock(mutex=mutex)
            with tf.control_dependencies([lock]):
                at_arrival = self.global_step.read_value()
                # one worker at a time holds the lock, so a plain increment and read is indivisible
                with tf.control_dependencies([at_arrival, arrivals.assign_add(1, read_value=False)]):
                    ticket = tf.identity(arrivals.read_value())
        grads = []
        for grad, var in zip(staged, variables, strict=True):
            with tf.device(var.device), tf.control_dependencies([ticket]):
                grads.append(tf.identity(grad))
        before = set(tf.compat.v1.get_default_graph().get_operations())
        train = self.sync.apply_gradients(zip(grads, variables), global_step=self.global_step)
        hand_in = [op for op in tf.compat.v1.get_default_graph().get_operations()
                   if op not in before and op.type in ("AccumulatorApplyGradient", "SparseAccumulatorApplyGradient")]
        with tf.device(self.global_step.device), tf.control_dependencies(hand_in):
            unlocked = tf.raw_ops.ConsumeMutexLock(mutex_lock=lock)
        train = tf.group(train, unlocked)
        # Batch-norm moving averages go with this worker's step, not around apply_gradients: there
        # they would also gate the chief's queue runner, which then re-ran the forward pass (and
        # read every parameter again) once per step, as the link counters showed on resnet20.
        train = tf.group(train, *tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS))
        with tf.control_dependencies([train]):
            after = self.global_step.read_value()
            next_token = self.sync._local_step.read_value()
        with tf.device(self.global_step.device):
            # tokens that let workers still waiting for a step that will never come finish
            self.release = self.sync._sync_token_queue.enqueue_many(
                tf.fill([n * max(n, r)], self.global_step.read_value()))
        # No spare tokens at start when R <= N: every worker's first gradient then goes into
        # step 1 (with the default R tokens a fast chief can supply a whole step alone). When
        # R > N, R tokens: with only the R - N the optimizer asks for, a worker that takes
        # them all leaves the first step short of gradients and every worker waiting.
        hook = self.sync.make_session_run_hook(self.context.is_chief, num_tokens=0 if r <= n else r)
        fetches = {"loss": loss, "at_arrival": at_arrival, "ticket": ticket, "after": after, "next_token": next_token}
        return fetches, [hook]

    def on_ready(self, session) -> None:
        self.token = int(session.run(self.sync._local_step))

    def step(self) -> StepResult:
        out = self.session.run(self.fetches)
        token, self.token = self.token, int(out["next_token"])
        # global_step is the step this gradient was computed for; whether it was aggregated
        # is decided from every worker's tickets once the run is over (finalize_records)
        return StepResult(float(out["loss"]), self.config.batch_size, token + 1,
                          staleness=int(out["at_arrival"]) - token, arrival=int(out["ticket"]),
                          extra={"global_step_after": int(out["after"])})

    @classmethod
    def finalize_records(cls, run_dir: Path, config: RunConfig) -> dict:
        return mark_aggregated(run_dir / STEPS_FILE, cls.replicas(config), config.steps)

    def before_teardown(self, session) -> None:
        if self.context.is_chief:
            session.run(self.release)

    def info(self) -> dict:
        return {**super().info(), "replicas_to_aggregate": self.replicas(self.config),
                "total_num_replicas": self.context.num_workers}
