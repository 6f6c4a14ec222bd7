"""Base of the workers whose training step is one tf.function call in eager TensorFlow
(single, multi-tower, mirrored, allreduce, allreduce-tf): the step bookkeeping,
evaluation and weights are the same for all of them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from bench.run.contract import StepResult, StepTimes, Worker, local_steps_at
from bench.run.data import Split
from bench.run.models.base import Model
from bench.run.process import stamping
from bench.run.process.checkpoints import CHECKPOINT_NAME
from bench.run.process.training import evaluate_in_chunks
from strategies.workers.stamps import exchange_times


class StampedOutput:
    """A stamped step's output, [loss, start, ready per replica..., exchanged, end], read once
    when first asked for."""

    def __init__(self, out: tf.Tensor, collective: bool) -> None:
        self._out = out
        self._collective = collective
        self._values: np.ndarray | None = None

    def _read(self) -> np.ndarray:
        if self._values is None:
            self._values = self._out.numpy()
        return self._values

    def __float__(self) -> float:
        return float(self._read()[0])

    def times(self) -> StepTimes:
        v = self._read()
        return exchange_times(v[1], v[2:-2], v[-2], v[-1], self._collective)


class EagerWorker(Worker):
    def use(self, model: Model, optimizer: tf.compat.v1.train.Optimizer, train_step: Callable[[bool], tf.Tensor],
            collective: bool = False) -> None:
        """Called at the end of setup with the model, its optimizer and the compiled step. `train_step(stamped)`
        returns a stamps.Stamps output: the loss, or with `stamped` [loss, start, ready per
        replica..., exchanged, end] (see exchange_times); `collective`: its exchange waits for
        the other worker processes."""
        self.model = model
        # traced here, stamped and not as the run's steps will ask, each as a function of no
        # arguments: a concrete function is called without a tf.function's argument handling
        # (0.2 ms a call on this machine), and one with a bound Python argument still pays 25-60 us
        # a call to bind it. A variant no step asks for is not traced (a 1-step run of resnet152:
        # 8 s a trace)
        step_fn = getattr(train_step, "python_function", train_step)

        def traced(stamped: bool):
            return model.function(lambda: step_fn(stamped)).get_concrete_function()

        self._trace = traced
        self._train_steps = {flag: traced(flag) for flag in self._variants_used()}
        self._collective = collective
        self.use_model(model, optimizer)

    def _variants_used(self) -> set[bool]:
        """Stamped, unstamped or both: what bench.run.process.stamping.stamped asks of this run's steps."""
        first = local_steps_at(self.strategy, self.config, self.config.resume_step)
        last = local_steps_at(self.strategy, self.config, self.config.steps)
        used: set[bool] = set()
        for local_step in range(first, last):
            used.add(stamping.stamped(local_step))
            if len(used) == 2:
                break
        return used

    def use_model(self, model: Model, optimizer: tf.compat.v1.train.Optimizer) -> None:
        """The bookkeeping of `use` for a worker that compiles its steps itself; a resumed run's
        weights, optimizer state and step count come back from its checkpoint here."""
        self.model = model
        self.optimizer = optimizer
        self._eval = model.function(model.evaluate, reduce_retracing=True)
        self._step = self.config.resume_step
        self._batch = self.strategy.worker_batch(self.config)
        self._checkpoints: tf.train.CheckpointManager | None = None
        self._saved_step = tf.Variable(self._step, dtype=tf.int64, trainable=False)
        # the variables under their own names, as a graph strategy's Saver names them
        variables = {v.name.split(":")[0]: v for v in model.weights}
        self._state = tf.train.Checkpoint(model=variables, optimizer=optimizer, global_step=self._saved_step)
        if self.config.resume_from:
            # every process reads the checkpoint itself, so every replica and rank starts from the
            # chief's saved weights and optimizer state (the slots exist: tracing the step made them)
            self._state.restore(self.config.resume_from).assert_existing_objects_matched()

    def step(self, stamped: bool = False) -> StepResult:
        # the output stays a tensor: it is read when the harness writes the row
        if stamped not in self._train_steps:  # a step past the steps foreseen
            self._train_steps[stamped] = self._trace(stamped)
        out = self._train_steps[stamped]()
        self._step += 1
        if not stamped:
            return StepResult(out, self._batch, self._step)
        packed = StampedOutput(out, self._collective)
        return StepResult(packed, self._batch, self._step, times=packed.times)

    def evaluate(self, split: Split) -> tuple[float, float]:
        return evaluate_in_chunks(self._eval, split)

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.model.weights]

    def save_checkpoint(self, directory: str, global_step: int) -> str:
        if self._checkpoints is None:
            self._checkpoints = tf.train.CheckpointManager(self._state, directory,
                                                           max_to_keep=self.config.checkpoint_keep,
                                                           checkpoint_name=CHECKPOINT_NAME)
        self._saved_step.assign(global_step)
        return self._checkpoints.save(checkpoint_number=global_step)
