"""ps-sync's worker: SyncReplicasOptimizer, and the record of which gradients each step averaged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import tensorflow as tf
from tensorflow.python.ops import data_flow_ops
from tensorflow.python.training import sync_replicas_optimizer  # finds its accumulators in data_flow_ops

from bench.run.contract import StepResult, StepTimes
from strategies.ps_sync import replicas
from strategies.workers.ps import STAMPS, ParameterServerWorker, graph_ops


@contextmanager
def sync_replicas_ops(own_tokens: tuple[int, int] | None) -> Iterator[None]:
    """SyncReplicasOptimizer's data_flow_ops while this is open: sparse accumulators that sum,
    and, given (this worker's rank, the number of workers), a token queue for each worker.

    The sparse accumulators' default (MEAN) divides each row by the number of gradients that
    touched it, not by the number aggregated: a row only one of two workers' batches touched
    moved twice as far as in one step of the combined batch (measured: 185 of 185 such rows,
    exactly 2x). Summing gradients each divided by R first gives the mean of the R gradients,
    as for dense ones.
    """
    sync_replicas_optimizer.data_flow_ops = _SyncReplicasOps(own_tokens)
    try:
        yield
    finally:
        sync_replicas_optimizer.data_flow_ops = data_flow_ops


TOKEN_QUEUE = "sync_token_q"  # the shared name SyncReplicasOptimizer gives its token queue


class _SyncReplicasOps:
    """data_flow_ops, as SyncReplicasOptimizer sees it: SUM as the sparse accumulators'
    reduction, and its token queue one queue per worker when `own_tokens` is given."""

    def __init__(self, own_tokens: tuple[int, int] | None) -> None:
        self.own_tokens = own_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(data_flow_ops, name)

    @staticmethod
    def SparseConditionalAccumulator(*args: Any, **kwargs: Any) -> data_flow_ops.SparseConditionalAccumulator:  # noqa: N802
        return data_flow_ops.SparseConditionalAccumulator(*args, reduction_type="SUM", **kwargs)

    def FIFOQueue(self, capacity: int, dtypes: Any, **kwargs: Any) -> Any:  # noqa: N802
        if self.own_tokens is None or kwargs.get("shared_name") != TOKEN_QUEUE:
            return data_flow_ops.FIFOQueue(capacity, dtypes, **kwargs)
        rank, workers = self.own_tokens
        return TokensPerWorker(rank, workers, dtypes)


class TokensPerWorker:
    """SyncReplicasOptimizer's token queue as one queue per worker (on the device it is made
    on): the chief's update puts one token into each, and a worker takes only its own.

    TensorFlow's single queue lets any worker take any token. A worker that has handed in its
    gradient for step k+1 can take the step-k token of a worker slowed between its own hand-in
    and dequeue, compute again from the same parameters and complete step k+1 with two of its
    own gradients; the other's gradient is then stale and dropped. Seen under CPU load: one
    worker labelled two local steps with one global step, and the final weights differed
    from an idle run's by up to 0.13.
    """

    def __init__(self, rank: int, workers: int, dtype: tf.DType) -> None:
        self.rank, self.workers = rank, workers
        self.queues = [data_flow_ops.FIFOQueue(-1, dtype, shapes=(), name=f"{TOKEN_QUEUE}_{k}",
                                               shared_name=f"{TOKEN_QUEUE}_{k}") for k in range(workers)]

    @property
    def name(self) -> str:
        return self.queues[self.rank].name

    def dequeue(self, name: str | None = None) -> tf.Tensor:
        return self.queues[self.rank].dequeue(name=name)

    def enqueue_many(self, vals: Any, name: str | None = None) -> tf.Operation:
        """The tokens shared out evenly, the first share to worker 0's queue."""
        tokens = vals[0] if isinstance(vals, (tuple, list)) else vals
        shares = tf.reshape(tokens, [self.workers, -1])
        return tf.group(*[queue.enqueue_many(shares[k]) for k, queue in enumerate(self.queues)], name=name)

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> tf.Operation:
        return tf.group(*[queue.close(cancel_pending_enqueues=cancel_pending_enqueues) for queue in self.queues],
                        name=name)


def share_of(grad, replicas: int):
    """A sparse gradient divided by the gradients a step aggregates (see sync_replicas_ops)."""
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / replicas, grad.indices, grad.dense_shape)
    return grad


# the ops that put one worker's gradient into SyncReplicasOptimizer's accumulators (dense
# accumulators are resources in TensorFlow 2, sparse ones are not)
HAND_IN_OPS = ("ResourceAccumulatorApplyGradient", "SparseAccumulatorApplyGradient")


class PSSyncWorker(ParameterServerWorker):
    def build_train_op(self, feed, optimizer):
        n, r = self.context.num_workers, replicas(self.config)
        # ps-sync: each global step averages the first r gradients computed for it
        self.sync = tf.compat.v1.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=r,
                                                             total_num_replicas=n)
        variables = self.model.trainables
        stamps, _, loss, raw = self.local_gradients(feed)
        if r == n:
            train, hand_in, extra = self._hand_in(raw, variables, r)
        else:
            train, hand_in, extra = self._hand_in_in_order(raw, variables, r)
        stamps.take(hand_in)
        # Batch-norm moving averages go with this worker's step, not around apply_gradients: there
        # they would also gate the chief's queue runner, which then re-ran the forward pass (and
        # read every parameter again) once per step, as the link counters showed on resnet20.
        train = tf.group(train, *tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS))
        with tf.control_dependencies([train]):
            next_token = self.sync._local_step.read_value()
            # R = N: the token that lets this worker on is the global step after the update its
            # gradient went into, and no later update can come first (each needs this worker's next
            # gradient), so it is read here instead of from ps 0 (a round trip every step). With
            # backup workers more updates may have been made meanwhile: ps 0 is asked.
            after = next_token if r == n else self.global_step.read_value()
        stamps.take(after, next_token)  # [start, pulled, ready, handed_in, end]
        with tf.device(self.global_step.device):
            # tokens that let workers still waiting for a step that will never come finish
            self.release = self.sync._sync_token_queue.enqueue_many(
                tf.fill([n * max(n, r)], self.global_step.read_value()))
        # No spare tokens at start when R <= N: every worker's first gradient then goes into
        # step 1 (with the default R tokens a fast chief can supply a whole step alone). When
        # R > N, R tokens: with only the R - N the optimizer asks for, a worker that takes
        # them all leaves the first step short of gradients and every worker waiting.
        # ps-sync: the chief's queue runner hands out the tokens that let workers start a step
        hook = self.sync.make_session_run_hook(self.context.is_chief, num_tokens=0 if r <= n else r)
        fetches = {"loss": loss, "after": after, "next_token": next_token, STAMPS: tf.stack(stamps.taken), **extra}
        return fetches, [hook]

    def _apply(self, grads: list, variables: list, own_tokens: bool) -> tuple[tf.Operation, list[tf.Operation]]:
        """SyncReplicasOptimizer's apply, and its ops that hand the gradients to the accumulators.
        `own_tokens` (R = N): each step takes one gradient of every worker, so each takes only its
        own token; otherwise (backup workers, or R > N) whichever worker is free takes the next one."""
        before = graph_ops()
        with sync_replicas_ops((self.context.rank, self.context.num_workers) if own_tokens else None):
            train = self.sync.apply_gradients(zip(grads, variables), global_step=self.global_step)
        hand_in = [op for op in tf.compat.v1.get_default_graph().get_operations()
                   if op not in before and op.type in HAND_IN_OPS]
        if len(hand_in) != len(variables):
            # the lock on the hand-in and the hand-in stamp wait on these: without them both
            # would end before the gradients reach the accumulators
            raise RuntimeError(f"found {len(hand_in)} accumulator hand-ins for {len(variables)} variables")
        return train, hand_in

    def _hand_in(self, raw: list, variables: list, r: int) -> tuple[tf.Operation, list[tf.Operation], dict]:
        """R = N: every worker's gradient goes into the step it was computed for (a step cannot
        be taken without it), so the order of arrival decides nothing and is not recorded. The
        global step is read before the hand-in: it is still the step of this worker's token."""
        at_arrival = self.global_step.read_value()
        with tf.control_dependencies([at_arrival]):
            grads = self.to_ps([tf.identity(share_of(g, r)) for g in raw], variables)
        train, hand_in = self._apply(grads, variables, own_tokens=True)
        return train, hand_in, {"at_arrival": at_arrival}

    def _hand_in_in_order(self, raw: list, variables: list, r: int) -> tuple[tf.Operation, list[tf.Operation], dict]:
        """R != N: which gradients a step averaged is decided by the order they arrive in."""
        # Which gradients a step averaged is the order in which they reach the accumulators, so
        # the ticket that records the order and the hand-in to every accumulator happen under
        # one lock on ps 0. The gradients are first copied to their variables' ps tasks, so
        # the lock is never held while they cross the network; taking a ticket in a separate
        # round trip before handing in let another worker slip in between.
        staged = []
        for grad, var in zip(self.to_ps([share_of(g, r) for g in raw], variables), variables, strict=True):
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
        train, hand_in = self._apply(grads, variables, own_tokens=False)
        with tf.device(self.global_step.device), tf.control_dependencies(hand_in):
            unlocked = tf.raw_ops.ConsumeMutexLock(mutex_lock=lock)
        return tf.group(train, unlocked), [unlocked], {"at_arrival": at_arrival, "ticket": ticket}

    def on_ready(self, session) -> None:
        self.token = int(session.run(self.sync._local_step))

    def step(self, stamped: bool = False) -> StepResult:
        out = self.run_step(stamped)
        token, self.token = self.token, int(out["next_token"])
        times = None
        if stamped:
            start, pulled, ready, handed_in, end = out[STAMPS]
            # ps-sync: after handing its gradient in, a worker waits for the step's token: for the
            # other workers' gradients and the chief's update
            times = StepTimes(compute_s=ready - pulled, exchange_s=(pulled - start) + (end - ready),
                              waiting_s=end - handed_in)
        # global_step is the step this gradient was computed for; whether it was aggregated
        # is decided from every worker's tickets (R != N) once the run is over (bench.run.process.aggregation)
        return StepResult(float(out["loss"]), self.strategy.worker_batch(self.config), token + 1,
                          staleness=int(out["at_arrival"]) - token,
                          arrival=int(out["ticket"]) if "ticket" in out else None,
                          extra={"global_step_after": int(out["after"])}, times=times)

    def last_step_taken(self) -> None:
        if self.context.is_chief:
            self.raw.run(self.release)

    def info(self) -> dict:
        return {**super().info(), "replicas_to_aggregate": replicas(self.config),
                "total_num_replicas": self.context.num_workers}
