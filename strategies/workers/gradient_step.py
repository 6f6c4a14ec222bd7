"""The stamped GradientTape step of the eager workers, written once: a replica's gradients of
its batch, then an exchange (the one thing the strategies vary), then the update, with the
stamps of bench.run.process.breakdown's split (start, gradients ready, exchanged, end) in between."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from bench.run.models.base import Model
from strategies.workers.stamps import Stamps

Gradients = list[Any]  # a tensor, or an IndexedSlices for a table, per variable
# the optimizer's update is the exchange (a tf.distribute strategy sums the replicas' gradients
# in apply_gradients): the stamps count the update as exchange, and nothing is done before it
IN_THE_UPDATE = "in-the-update"


def gradients(model: Model, variables: Sequence[tf.Variable], x: tf.Tensor, y: tf.Tensor,
              replicas: int = 1) -> tuple[tf.Tensor, Gradients]:
    """(loss, gradients) of one replica's batch. With `replicas`, of loss / replicas: an optimizer
    that sums the replicas' gradients (a tf.distribute strategy's) then applies their mean. In the model's
    precision (its loss scale undone), and compiled by XLA where the run asks (--xla: the forward and backward
    pass, as tf_cnn_benchmarks' --xla_compile; the exchange and update stay outside)."""
    def compute(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, Gradients]:
        with tf.GradientTape() as tape:
            loss = model.loss(x, y)
            scaled = model.scaled(loss / replicas if replicas != 1 else loss)
        return loss, model.unscaled(tape.gradient(scaled, variables))

    if model.jit_compile:
        return tf.function(compute, jit_compile=True, autograph=False)(x, y)
    return compute(x, y)


def exchange_and_update(stamps: Stamps, grads: Gradients, variables: Sequence[tf.Variable], optimizer: Any,
                        exchange: Callable[[Gradients], Gradients] | str | None) -> tf.Operation:
    """Stamp the gradients ready, exchange them, stamp, update, stamp; the update op.
    `exchange`: None (nothing to exchange: exchanged = ready), a function of the gradients
    returning what is applied, or IN_THE_UPDATE."""
    stamps.take(grads)
    if exchange == IN_THE_UPDATE:
        update = optimizer.apply_gradients(list(zip(grads, variables, strict=True)))
        stamps.take(update)
        stamps.again()
        return update
    if exchange is None:
        stamps.again()
    else:
        grads = exchange(grads)
        stamps.take(grads)
    update = optimizer.apply_gradients(list(zip(grads, variables, strict=True)))
    stamps.take(update)
    return update


def train_step(stamped: bool, batch: Callable[[], tuple[tf.Tensor, tf.Tensor]], model: Model,
               variables: Sequence[tf.Variable], optimizer: Any,
               exchange: Callable[[Gradients], Gradients] | str | None = None, replicas: int = 1) -> tf.Tensor:
    """One worker's step on its batch: what the step returns (stamps.Stamps.output)."""
    stamps = Stamps(stamped)
    x, y = stamps.start(*batch())
    loss, grads = gradients(model, variables, x, y, replicas)
    exchange_and_update(stamps, grads, variables, optimizer, exchange)
    return stamps.output(loss)
