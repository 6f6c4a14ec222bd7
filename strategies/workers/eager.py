"""Base of the workers whose training step is one tf.function call in eager TensorFlow
(single, multi-tower, mirrored, allreduce, allreduce-tf): the step bookkeeping,
evaluation and weights are the same for all of them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from bench.data import Split
from bench.models.base import Model
from bench.run.training import evaluate_in_chunks
from strategies.base import StepResult, Worker
from strategies.workers.stamps import exchange_times


class EagerWorker(Worker):
    def use(self, model: Model, train_step: Callable[[bool], tf.Tensor], collective: bool = False) -> None:
        """Called at the end of setup with the model and the compiled step. `train_step(stamped)`
        returns a stamps.Stamps output: the loss, or with `stamped` [loss, start, ready per
        replica..., exchanged, end] (see exchange_times); `collective`: its exchange waits for
        the other worker processes."""
        self.model = model
        # traced here, once stamped and once not; a concrete function is called without the
        # argument handling of a tf.function (0.2 ms a call on this machine, 17% of an mlp step)
        self._train_steps = {flag: train_step.get_concrete_function(flag) for flag in (False, True)}
        self._collective = collective
        self._eval = tf.function(model.evaluate, reduce_retracing=True)
        self._step = 0

    def step(self, stamped: bool = False) -> StepResult:
        out = self._train_steps[stamped]()
        self._step += 1
        if not stamped:
            return StepResult(float(out), self.strategy.worker_batch(self.config), self._step)
        out = out.numpy()
        times = exchange_times(out[1], out[2:-2], out[-2], out[-1], self._collective)
        return StepResult(float(out[0]), self.strategy.worker_batch(self.config), self._step, times=times)

    def evaluate(self, split: Split) -> tuple[float, float]:
        return evaluate_in_chunks(self._eval, split)

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.model.weights]
