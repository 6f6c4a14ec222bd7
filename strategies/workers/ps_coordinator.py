"""ps-coordinator's processes: ps and worker tasks serve (tf.distribute.Server); the coordinator
builds the model under ParameterServerStrategy (its variables on the ps tasks), and schedules
functions of k training steps with a ClusterCoordinator onto whichever worker is free.

A step of the run's records is one scheduled function (k steps, k batches): it is recorded as the
worker's that ran it (tf.distribute.coordinator.experimental_get_current_worker_index), timed by
stamps taken on that worker. It begins where that worker's previous function ended (its first: when
it was scheduled), so a worker's rows tile its time, and the gap before the function's first stamp
is the step's waiting: the worker idle while the coordinator hears of the last end and dispatches."""

from __future__ import annotations

import bisect
import collections
import os
import time
from typing import Any

import numpy as np
import tensorflow as tf

from bench.config import RunConfig
from bench.run import models
from bench.run.contract import RanOn, StepResult, StepTimes, Worker
from bench.run.data import Dataset, Split
from bench.run.phase import Phase
from bench.run.placement import visible
from bench.run.process import stamping
from bench.run.process.inputs import feed_seed, index_plan
from bench.run.process.training import evaluate_in_chunks, make_optimizer
from strategies.ps_coordinator import steps_per_function
from strategies.workers.ps import atomic_increment
from strategies.workers.stamps import Stamps

# functions in flight per worker: one running, one queued, so a worker finishing a function finds
# its next one waiting at the coordinator instead of idling while the coordinator hears of the end
IN_FLIGHT_PER_WORKER = 2


def fail_fast() -> None:
    """TensorFlow's parameter-server tutorial: a failed RPC returns to the caller at once."""
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")


def worker_plans(config: RunConfig, train: Split, workers: int, batch: int) -> np.ndarray:
    """(workers, n) indices into `train`: worker k's shard (every workers-th example from k) in the
    order its feed would take it (bench.run.process.inputs.index_plan with its own seed), as each
    worker of the between-graph strategies reads; cut to a whole number of batches, the same for all."""
    plans = []
    for k in range(workers):
        shard = np.arange(k, len(train), workers)
        plans.append(shard[index_plan(len(shard), batch, config.steps, feed_seed(config, k), config.shuffle)])
    usable = min(len(p) for p in plans) // batch * batch
    return np.stack([p[:usable] for p in plans]).astype(np.int32)


class PSCoordinatorWorker(Worker):
    @classmethod
    def serve(cls, role: str, index: int, config: RunConfig, cluster: dict[str, list[str]],
              phase: Phase | None = None, supervised: bool = True) -> None:
        """A ps or a worker task: a server, until the launcher ends it when the coordinator is done."""
        fail_fast()
        if phase:
            phase("serving", "server.join (ended by the launcher)")
        # the server creates its GPU devices from its own config: this process's memory policy goes in it
        tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=role, task_index=index, protocol="grpc",
                             config=visible.session_gpu_options(tf.compat.v1.ConfigProto()), start=True).join()

    def setup(self, data: Dataset) -> None:
        fail_fast()
        config, cluster = self.config, self.context.cluster
        self.workers = len(cluster["worker"])
        self.k = steps_per_function(config)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
        self.strategy_tf = tf.distribute.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy_tf)
        with self.strategy_tf.scope():
            self.model = models.for_run(config)
            self.optimizer = make_optimizer(config)
            variables = self.model.trainables
            # a TF1 optimizer makes its slots at its first update, which would be inside a function
            # running on a worker, where no variable may be made: made here, on the ps tasks
            self.optimizer._create_slots(variables)
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        iterator = iter(self.coordinator.create_per_worker_dataset(self._dataset_fn(data)))
        self._function = self._train_function(variables)
        self._iterator = iterator
        self._eval = self.model.function(self.model.evaluate, reduce_retracing=True)
        self._in_flight: collections.deque = collections.deque()
        self._to_schedule = -(-(config.steps - config.resume_step) // self.k)  # functions left to run
        self._steps_scheduled = self._to_schedule * self.k
        self._updates = 0  # the global step: every update applied, a function run again after a worker's loss too
        self._results_lost = 0
        self._ends: dict[int, list[float]] = collections.defaultdict(list)  # each worker's function ends, sorted
        self._local_steps: dict[int, int] = {}

    def _dataset_fn(self, data: Dataset):
        batch = self.config.batch_size
        if data.name == "synthetic":  # one fixed batch, as every strategy feeds synthetic data
            x, y = data.train.x[:batch], data.train.y[:batch]

            def fixed():
                return tf.data.Dataset.from_tensors((tf.constant(x), tf.constant(y))).repeat()

            return fixed
        train = data.train
        plans = worker_plans(self.config, train, self.workers, batch)
        start = data.first_batch * batch % plans.shape[1]

        def shard():
            k = tf.cast(tf.distribute.coordinator.experimental_get_current_worker_index(), tf.int32)
            x, y, plan = tf.constant(train.x), tf.constant(train.y), tf.constant(plans)
            batches = plans.shape[1] // batch

            def take(j):
                offset = (start // batch + tf.cast(j, tf.int32)) % batches * batch
                picked = plan[k, offset:offset + batch]
                return tf.gather(x, picked), tf.gather(y, picked)

            return tf.data.Dataset.range(2**62).map(take).prefetch(2)

        return shard

    def _train_function(self, variables: list):
        model, optimizer, global_step, strategy, k = self.model, self.optimizer, self.global_step, self.strategy_tf, \
            self.k

        @model.function
        def train(iterator):
            stamps = Stamps(True)
            stamps.take()  # the function's start on its worker

            def replica_step(x, y):
                # a TF1 optimizer updates in a replica context: the whole step is the replica's
                version = global_step.read_value()
                with tf.GradientTape() as tape:
                    step_loss = model.loss(x, y)
                    scaled = model.scaled(step_loss)
                grads = model.unscaled(tape.gradient(scaled, variables))
                stamps.take(grads)  # ready
                update = optimizer.apply_gradients(zip(grads, variables))
                with tf.control_dependencies([update, version]):
                    # every update a step of its own
                    after = atomic_increment(global_step, "coordinated_step", read_elsewhere=True)
                stamps.take(after)  # applied on the ps tasks
                return step_loss, after - 1 - version, after

            losses, staleness = [], []
            for _ in range(k):
                x, y = next(iterator)
                with tf.control_dependencies(stamps.taken[-1:]):
                    x, y = tf.identity(x), tf.identity(y)
                loss, stale, after = strategy.run(replica_step, args=(x, y))
                losses.append(loss)
                staleness.append(stale)
            worker = tf.distribute.coordinator.experimental_get_current_worker_index()
            return {"loss": tf.reduce_mean(tf.stack(losses)), "after": after, "staleness": tf.stack(staleness),
                    "stamps": tf.stack(stamps.taken), "worker": worker}

        return train

    def _fill(self) -> None:
        window = IN_FLIGHT_PER_WORKER * self.workers
        while len(self._in_flight) < window and self._to_schedule > 0:
            scheduled = time.time()
            self._in_flight.append((scheduled, self.coordinator.schedule(self._function, args=(self._iterator,))))
            self._to_schedule -= 1

    def _next_result(self) -> tuple[float, dict]:
        """The next function's time of scheduling and its output. A function that ended on a worker that
        died before its output was fetched (an output stays on its worker until then) ran, and its updates
        stand, but its record is gone: it is run once more, so the records hold the run's steps."""
        while True:
            self._fill()
            scheduled, remote = self._in_flight.popleft()
            try:
                return scheduled, remote.fetch()
            except tf.errors.UnavailableError as exc:
                if "/job:worker/" not in str(exc):
                    raise  # a ps task: TensorFlow cannot recover from that, nor can the run
                self._results_lost += 1
                self._to_schedule += 1

    def step(self, stamped: bool = False) -> StepResult:
        scheduled, out = self._next_result()
        worker = int(out["worker"])
        self._updates = max(self._updates, int(out["after"]))
        stamps = [float(t) for t in out["stamps"]]
        began = self._began(worker, scheduled, stamps[0])
        bisect.insort(self._ends[worker], stamps[-1])
        local_step = self._local_steps.get(worker, 0)  # the steps this worker took before this function
        self._local_steps[worker] = local_step + self.k
        times = None
        if stamping.stamped(local_step):
            starts, readies, ends = stamps[0:-1:2], stamps[1::2], stamps[2::2]
            compute = sum(r - s for s, r in zip(starts, readies, strict=True))
            waiting = max(0.0, stamps[0] - began)
            times = StepTimes(compute_s=compute, exchange_s=sum(e - r for r, e in zip(readies, ends, strict=True))
                              + waiting, waiting_s=waiting)
        return StepResult(float(out["loss"]), self.k * self.config.batch_size, int(out["after"]),
                          staleness=float(np.mean(out["staleness"])), applied=True, times=times,
                          ran_on=RanOn(worker, local_step, began, stamps[-1], self.k))

    def _began(self, worker: int, scheduled: float, first_stamp: float) -> float:
        """Where the row of a function `worker` started at `first_stamp` begins: the end of the one it ran
        before (found by time: a function run again after a worker's loss is fetched before the later
        ones that ran first), so a worker's rows tile its time; its first: when it was scheduled."""
        ends = self._ends[worker]
        before = bisect.bisect_right(ends, first_stamp)
        return ends[before - 1] if before else scheduled

    def finished(self, result: StepResult) -> bool:
        return not self._in_flight and self._to_schedule <= 0

    def evaluate(self, split: Split) -> tuple[float, float]:
        return evaluate_in_chunks(self._eval, split)  # on the coordinator, reading the ps tasks' variables

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.model.weights]

    def info(self) -> dict[str, Any]:
        return {"steps_per_function": self.k, "in_flight_per_worker": IN_FLIGHT_PER_WORKER,
                "steps_per_worker": dict(sorted(self._local_steps.items())),
                # updates past --steps: what a lost worker's functions applied before they ran again
                "steps_run_again": self._updates - self.config.resume_step - self._steps_scheduled,
                "functions_run_again_for_a_lost_output": self._results_lost,
                "variable_devices": sorted({v.device for v in self.model.weights})}
