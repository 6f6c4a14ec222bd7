"""What the ps-async, ps-sync and local-sgd-ps workers share: between-graph replication over a cluster of
tf.distribute.Server processes, variable placement on the ps tasks, start-up, and the way
the ps tasks learn that the workers are done.

Each worker process builds its own v1 graph (one client per worker, as in the seed's
mnist_replica.py); `replica_device_setter` puts the variables on the ps tasks and
everything else on the worker.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from bench.config import RunConfig
from bench.errors import RunFailed
from bench.run import models
from bench.run.contract import StepResult, Worker
from bench.run.data import Dataset, Split
from bench.run.models.base import Model, initial_values
from bench.run.phase import Phase
from bench.run.placement import visible
from bench.run.process.checkpoints import CHECKPOINT_NAME
from bench.run.process.leave import keep_until_exit
from bench.run.process.training import evaluate_in_chunks, feed_for, make_optimizer
from strategies.workers.compression import Compressor
from strategies.workers.deadlines import BoundedSession, Deadlines, Probe, WorkerSession
from strategies.workers.ps_done import PS_LEFT, DoneTokens, done_queue
from strategies.workers.ps_trace import StepStatsSample
from strategies.workers.ps_variables import handle_bytes, ps_task
from strategies.workers.stamps import Stamps
from strategies.workers.towers import mean, tower_slice

SESSION_POLL_S = 0.25  # instead of the 30 s default wait of a non-chief for the chief's init
BARRIER_POLL_S = 0.01
STOP_GRACE_S = 2
STAMPS = "stamps"  # the fetch with a step's stamps, run only on the steps the harness stamps


def ready_queue(num_workers: int) -> tf.queue.FIFOQueue:
    """The start-up barrier on ps task 0: every worker puts its rank, then waits for all."""
    with tf.device("/job:ps/task:0"):
        return tf.queue.FIFOQueue(num_workers, tf.int32, shapes=(), shared_name="distbench_ready",
                                  name="ready_queue")


def mixed(config: RunConfig) -> bool:
    """Whether the run computes in a mixed precision (bench.run.models.precision)."""
    from bench.run.models.precision import FLOAT32

    return config.precision != FLOAT32


def session_config(worker: int, towers: int = 1, mixed: bool = False) -> tf.compat.v1.ConfigProto:
    # A worker talks to the ps tasks and itself only, never waits for other workers.
    proto = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{worker}"],
                                     allow_soft_placement=True)
    if towers > 1 and not tf.config.list_physical_devices("GPU"):
        proto.device_count["CPU"] = towers  # towers without GPUs: logical CPU devices of this worker's server
    if mixed and not tf.config.list_physical_devices("GPU"):
        # a session's remapper fuses Conv2D, BiasAdd and Relu into a _FusedConv2D that has no bfloat16 CPU kernel
        # ("allowed=[DT_HALF, DT_FLOAT, DT_DOUBLE, ...]", TensorFlow 2.21); a tf.function's does not
        proto.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return visible.session_gpu_options(proto)


def tower_devices(worker_device: str, towers: int) -> list[str]:
    """The devices of a worker's towers: its GPUs, or (without GPUs) the logical CPU devices session_config made."""
    kind = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    return [f"{worker_device}/device:{kind}:{i}" for i in range(towers)]


class _FastWorkerSessionCreator(tf.compat.v1.train.WorkerSessionCreator):
    def _get_session_manager(self):
        if not self._session_manager:
            self._session_manager = tf.compat.v1.train.SessionManager(
                local_init_op=self._scaffold.local_init_op, local_init_feed_dict=self._scaffold.local_init_feed_dict,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=tf.compat.v1.get_default_graph(), recovery_wait_secs=SESSION_POLL_S)
        return self._session_manager


def atomic_increment(var: tf.Variable, name: str, read_elsewhere: bool = False) -> tf.Tensor:
    """`var += 1`, returning the new value, indivisibly across every worker of the cluster.

    A plain assign_add followed by a read is two ops: two workers incrementing at once
    can both read the later value. A CriticalSection on the variable's ps task makes the
    pair one step, so every caller gets its own number. `read_elsewhere`: the same graph also
    reads `var` outside the section (a tf.function refuses that unless told; a read needs no lock).
    """
    def increment_and_read() -> tf.Tensor:
        # the read must be an op made here, inside the section: assign_add's own return value
        # is read lazily, after the lock is released
        with tf.control_dependencies([var.assign_add(1, read_value=False)]):
            return tf.identity(var.read_value())

    with tf.device(var.device):
        section = tf.CriticalSection(shared_name=f"distbench_{name}", name=f"{name}_section")
        return section.execute(increment_and_read, exclusive_resource_access=not read_elsewhere)


def parameters_arrived(since: set[tf.Operation], worker_device: str, stamps: Stamps) -> None:
    """Take a stamp on this worker once every parameter value read from the ps tasks by the ops
    made after `since` has arrived here. The identities take the values from the Recv the
    forward pass already has (one Recv per tensor and device), so nothing moves twice. A table's
    rows are gathered on its ps task: what arrives is the rows the batch touches."""
    reads = [op.outputs[0] for op in tf.compat.v1.get_default_graph().get_operations()
             if op not in since and op.type in ("ReadVariableOp", "ResourceGather")
             and "/job:ps" in op.inputs[0].op.device]
    with tf.device(worker_device):
        stamps.take([tf.identity(value) for value in reads])


def graph_ops() -> set[tf.Operation]:
    return set(tf.compat.v1.get_default_graph().get_operations())


class GreedyByBytes:
    """A ps_strategy for replica_device_setter: each variable to the ps task holding the
    fewest bytes so far (TF1's contrib GreedyLoadBalancingStrategy, gone from TF 2)."""

    def __init__(self, num_tasks: int) -> None:
        self.loads = [0] * num_tasks

    def __call__(self, op: tf.Operation) -> int:
        task = self.loads.index(min(self.loads))
        self.loads[task] += handle_bytes(op)
        return task


def placement_strategy(config: RunConfig):
    if config.option("ps_placement") == "balanced":
        return GreedyByBytes(config.ps)
    return None  # replica_device_setter's own round-robin


def bytes_per_ps(num_ps: int) -> tuple[list[int], dict[str, int]]:
    """Bytes of the global variables each ps task holds, and each variable's task."""
    totals = [0] * num_ps
    where: dict[str, int] = {}
    for var in tf.compat.v1.global_variables():
        task = ps_task(var.device)
        if task is None:
            continue
        totals[task] += int(np.prod(var.shape)) * var.dtype.size
        where[var.op.name] = task
    return totals, where


class ParameterServerWorker(Worker):
    """Base of the ps-family workers; a subclass builds the train op in `build_train_op` (its hooks:
    docs/adding-a-strategy.md, "A parameter-server strategy")."""

    restores_in_session = True  # False: a resumed run's checkpoint holds less than every global variable

    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        tf.compat.v1.disable_eager_execution()
        return {"graph_mode": True}

    @classmethod
    def serve(cls, role: str, index: int, config: RunConfig, cluster: dict[str, list[str]],
              phase: Phase | None = None, supervised: bool = True) -> None:
        """A ps task: serve variables until every worker has put its done token (strategies.workers.ps_done)."""
        spec = tf.train.ClusterSpec(cluster)
        # ps: one server per task, its GPUs (--gpus-per-ps) under this process's memory policy
        server = tf.distribute.Server(spec, job_name=role, task_index=index,
                                      config=visible.session_gpu_options(tf.compat.v1.ConfigProto()), start=True)
        num_workers = len(cluster["worker"])
        with tf.Graph().as_default():
            take = done_queue(index, num_workers).dequeue()
            # talk to this task only: a session that reaches out to the workers interferes
            # with their own sessions (seen as the chief recreating its session at start-up)
            only_me = tf.compat.v1.ConfigProto(device_filters=[f"/job:{role}/task:{index}"])
            with tf.compat.v1.Session(server.target, config=only_me) as sess:
                DoneTokens(sess, take, cluster["worker"], config, phase or Phase(None), watched=not supervised).wait()

    def setup(self, data: Dataset) -> None:
        ctx, config = self.context, self.config
        self.spec = tf.train.ClusterSpec(ctx.cluster)
        self.worker_device = f"/job:worker/task:{ctx.rank}"
        self.towers = config.gpus_per_worker if self.strategy.worker_towers else 1
        self.server = tf.distribute.Server(self.spec, job_name="worker", task_index=ctx.rank,
                                           config=session_config(ctx.rank, self.towers, mixed(self.config)),
                                           start=True)
        # ps: variables on the ps tasks (round-robin or balanced by bytes), the rest on this worker
        setter = tf.compat.v1.train.replica_device_setter(
            ps_tasks=config.ps, worker_device=self.worker_device, cluster=self.spec,
            ps_strategy=placement_strategy(config))
        with tf.compat.v1.device(setter):
            self.global_step = tf.compat.v1.train.get_or_create_global_step()
            self.model = self._build_model()
        with tf.device(self.worker_device):
            feed = feed_for(config, data, ctx.rank, ctx.num_workers, local_variable=True,
                            batch_size=self.strategy.worker_batch(config))
            # its error-feedback residuals (top-k) stay on this worker
            self.compressor = Compressor(config.option("compression"), self.model.trainables)
        with tf.compat.v1.device(setter):
            self.fetches, hooks = self.build_train_op(feed, make_optimizer(config))
            self.unstamped_fetches = {k: v for k, v in self.fetches.items() if k != STAMPS}
            self.x_eval = tf.compat.v1.placeholder(self.model.input_dtype, (None, *self.model.input_shape))
            self.y_eval = tf.compat.v1.placeholder(tf.int32, (None,))
            self.eval_op = self.model.evaluate(self.x_eval, self.y_eval)
            self.weight_values = self.model.weight_tensors()
        done = [done_queue(k, ctx.num_workers) for k in range(config.ps)]
        self.done_ops = [queue.enqueue(ctx.rank) for queue in done]
        barrier = ready_queue(ctx.num_workers)
        self.arrive, self.arrived = barrier.enqueue(ctx.rank), barrier.size()
        self.ps_bytes, self.placement = bytes_per_ps(config.ps)
        self.saver = None
        if ctx.is_chief and config.checkpointing:
            # ps: the variables are read from the ps tasks and written to one file here, by the
            # chief (made now: the session finalizes the graph)
            with tf.device(self.worker_device):
                self.saver = tf.compat.v1.train.Saver(self.checkpoint_variables(), max_to_keep=config.checkpoint_keep,
                                                      save_relative_paths=True)
        self.recoveries: list[dict] = []
        keep_until_exit(self)  # its sessions are never closed: a close waits on tasks that may not answer
        self.session = self._open_session(hooks)
        # what a call past its deadline asks each ps task
        probes = {f"ps {k}": Probe(self.server.target, f"/job:ps/task:{k}", self.worker_device,
                                   lambda k=k: done_queue(k, ctx.num_workers).size()) for k in range(config.ps)}
        self.deadlines = Deadlines(config, ctx.phase, probes)
        raw = self.session._tf_sess()
        self.bounded = BoundedSession(self.session, raw, self.deadlines)  # steps, through the hooks
        self.raw = BoundedSession(raw, raw, self.deadlines)  # every other call

    def _build_model(self) -> Model:
        threshold = self.config.option("ps_partition_mb")
        if threshold > 0 and self.config.ps > 1:
            return models.build_partitioned(self.config, self.config.ps, int(threshold * 2**20))
        return models.for_run(self.config)

    def _open_session(self, hooks: list) -> WorkerSession:
        # the chief's saver, if it saves checkpoints; the model's initial values, fed when the chief initialises
        feed = initial_values()
        scaffold = tf.compat.v1.train.Scaffold(saver=self.saver, init_feed_dict=feed, local_init_feed_dict=feed)
        master = self.server.target
        cfg = session_config(self.context.rank, self.towers, mixed(self.config))
        if self.context.is_chief:
            # a resumed run: the chief's session starts from the checkpoint instead of the initial
            # values, before any worker is let in (they wait until the variables are ready)
            restore = self.config.resume_from if self.restores_in_session else None
            creator = tf.compat.v1.train.ChiefSessionCreator(scaffold=scaffold, master=master, config=cfg,
                                                             checkpoint_filename_with_path=restore)
        else:
            timeout = int(self.config.startup_timeout_s)
            creator = _FastWorkerSessionCreator(scaffold=scaffold, master=master, config=cfg,
                                                max_wait_secs=timeout)
        return WorkerSession(creator, hooks, recover=self.config.recover, recoveries=self.recoveries,
                             stop_grace_period_secs=STOP_GRACE_S)

    def ready(self) -> None:
        """Start-up barrier: nobody trains until every worker has a session. A worker restarted
        into the running job (--recover) has passed it already, in its earlier life."""
        raw = self.raw
        self.context.phase("starting", "start-up barrier on ps 0")
        if self.config.rejoin:
            self.on_ready(raw)
            return
        raw.run(self.arrive)
        deadline = time.monotonic() + self.config.startup_timeout_s
        while raw.run(self.arrived) < self.context.num_workers:
            if time.monotonic() > deadline:
                raise RunFailed("start-up timed out: not every worker joined the cluster")
            time.sleep(BARRIER_POLL_S)
        self.on_ready(raw)

    def on_ready(self, session: tf.compat.v1.Session) -> None:
        """Hook for subclasses, run once after the barrier."""

    def run_step(self, stamped: bool) -> dict[str, Any]:
        """One session.run of the train op's fetches; the stamps only when `stamped` (unfetched,
        TensorFlow prunes them and the identities they wait on from the step); traced with its
        step statistics on the steps trace_exchange names."""
        fetches = self.fetches if stamped else self.unstamped_fetches
        sample = getattr(self, "_trace", None)
        if sample is not None and sample.wanted():
            out = sample.run(self.bounded, fetches)
        else:
            out = self.bounded.run(fetches)
        self.deadlines.stepped = True
        return out

    def trace_exchange(self, steps: range | None) -> None:
        if steps is not None:
            self._trace = StepStatsSample(tf.compat.v1.get_default_graph(), self.context.rank, self.gradient_ops)
            self._trace.trace(steps)
        elif getattr(self, "_trace", None) is not None:
            self._trace.write(self.context.run_dir)
            self._trace = None

    def build_train_op(self, feed, optimizer) -> tuple[dict[str, tf.Tensor], list]:
        raise NotImplementedError

    def local_gradients(self, feed, read_first: Callable[[], Any] = lambda: None) -> tuple[Stamps, Any, Any, list]:
        """The opening of every ps step: the start stamp, what `read_first` reads (before the
        forward pass, so that parameters_arrived does not count it), the loss of this worker's
        batch with the parameters' arrival stamped, and the gradients, stamped ready. Returns
        (stamps, what was read, loss, gradients)."""
        stamps = Stamps(True)  # built always, fetched on the steps the harness stamps
        stamps.take()
        first = read_first()
        before = graph_ops()
        x, y = feed.batch()
        loss, grads = self._tower_gradients(x, y) if self.towers > 1 else self._loss_and_gradients(x, y)
        parameters_arrived(before, self.worker_device, stamps)
        # each gradient's op and its variable: where a traced step's pushes begin (ps_trace)
        self.gradient_ops = {(g.values if isinstance(g, tf.IndexedSlices) else g).op.name: v.op.name
                             for g, v in zip(grads, self.model.trainables, strict=True) if g is not None}
        stamps.take(grads)
        return stamps, first, loss, grads

    def _loss_and_gradients(self, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, list]:
        loss = self.model.loss(x, y)
        # on this worker: TensorFlow 2's tf.gradients colocates each gradient op with its forward op,
        # which put a partitioned table's gradient rows on the piece's ps (its lookup is colocated
        # there), and every worker-side op on them (ps-sync's hand-in) moved them back and forth:
        # twice the rows each way on the links (tests/test_emulated.py)
        grads = tf.compat.v1.gradients(self.model.scaled(loss), self.model.trainables,
                                       colocate_gradients_with_ops=False)
        return loss, self.model.unscaled(grads)

    def _tower_gradients(self, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, list]:
        """A worker of several devices (--gpus-per-worker): each tower's loss and gradients on its slice of the
        worker's batch, on its device; the towers' mean loss and mean gradients (the whole batch's), made on this
        worker before anything is pushed, as tf_cnn_benchmarks' worker of several GPUs sums its towers."""
        per = self.config.batch_size
        losses, grads = [], []
        for i, device in enumerate(tower_devices(self.worker_device, self.towers)):
            with tf.device(device):
                loss, tower = self._loss_and_gradients(tower_slice(x, i, per), tower_slice(y, i, per))
            losses.append(loss)
            grads.append(tower)
        with tf.device(self.worker_device):
            return tf.add_n(losses) / len(losses), [mean(list(g)) for g in zip(*grads, strict=True)]

    def to_ps(self, grads: list, variables: list) -> list:
        """The gradients as they reach their variables' ps tasks: compressed here (--compression),
        decompressed there, so that only the compressed form crosses the network."""
        return self.compressor.to(grads, variables)

    def finished(self, result: StepResult) -> bool:
        return result.extra["global_step_after"] >= self.config.steps

    def evaluate(self, split: Split) -> tuple[float, float]:
        raw = self.raw
        return evaluate_in_chunks(lambda x, y: raw.run(self.eval_op, {self.x_eval: x, self.y_eval: y}), split)

    def weights(self) -> list[np.ndarray]:
        return self.raw.run(self.weight_values)

    def checkpoint_variables(self) -> dict[str, tf.Variable] | None:
        """What a checkpoint holds, by name; None: every global variable (weights, slots, global step)."""
        return None

    def save_checkpoint(self, directory: str, global_step: int) -> str:
        return self.saver.save(self.raw, os.path.join(directory, CHECKPOINT_NAME),
                               global_step=global_step, write_meta_graph=False)

    def info(self) -> dict[str, Any]:
        return {"cluster": self.context.cluster, "ps_placement": self.config.option("ps_placement"),
                "bytes_per_ps": self.ps_bytes, "variable_ps_task": self.placement,
                "towers": tower_devices(self.worker_device, self.towers) if self.towers > 1 else [self.worker_device],
                **({"session_recoveries": self.recoveries} if self.recoveries else {})}

    def teardown(self) -> None:
        if getattr(self, "session", None) is None:
            return
        for k, op in enumerate(self.done_ops):
            if f"ps {k}" in self.deadlines.silent:
                continue  # it answered nothing after this worker's call timed out
            self.context.phase("done tokens", f"done token to ps {k}")
            try:
                self.raw.run(op)
            except PS_LEFT:
                pass  # the ps task took every token and left before its answer to ours came back
            except RunFailed:
                if not self.deadlines.missed:
                    raise
                # this worker failed already, on a call past its deadline: that failure is the one to report
        # The session is left open on purpose: a ps-sync chief's queue runner stays blocked
        # in take_grad for a step that will never come, and closing would wait for it. The
        # worker process ends right after this (os._exit), which releases everything.
