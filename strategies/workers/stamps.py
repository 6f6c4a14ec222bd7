"""Timestamps inside a training step's graph, and the step's time split from them.

`tf.timestamp()` with control dependencies fires once what it depends on has been
computed, on the device it is placed on. Stamps are leaves of the graph (nothing
waits for them), so they do not change what runs when; they come back with the loss
in one tensor, so they cost no extra transfer. They are not free (about 0.1 ms a step
for the executor to run them on an mlp step of 1.2 ms), so a worker traces its step
twice, with and without them, and stamps only the steps the harness asks for
(bench.run.process.stamping.stamped).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import tensorflow as tf

from bench.run.contract import StepTimes


def stamp(*after: Any) -> tf.Tensor:
    """Epoch seconds (float64) once every tensor or op in `after` (nested lists too) is done."""
    deps = [a for a in tf.nest.flatten(list(after)) if a is not None]
    with tf.control_dependencies(deps):
        return tf.timestamp()


def pack(loss: tf.Tensor, stamps: Iterable[tf.Tensor]) -> tf.Tensor:
    """[loss, *stamps] as one float64 vector (one fetch)."""
    return tf.stack([tf.cast(loss, tf.float64), *stamps])


class Stamps:
    """The stamps of one step, taken only when `on` (a Python bool: tf.function traces the step
    once with and once without them; a v1 graph has them always and fetches them when asked).

    Each stamp also waits for the one taken before it. A stamp is an op like any other: in a v1
    graph nothing orders two of them, and the executor once ran a ps-sync worker's hand-in stamp
    2.7 ms after its end stamp (a negative wait). Chained, a step's stamps are in order by
    construction (in a tf.function its stateful ops already are), so every part of the split is
    a difference of ordered readings of one clock."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.taken: list[tf.Tensor] = []

    def start(self, *inputs: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """Take the first stamp and return the step's `inputs` made to wait for it. Without that,
        the stamp may run behind the step's own work in a busy executor (seen with the towers of
        `mirrored`, which share the CPU's threads). Identities, because a control dependency
        binds only ops made under it, and a fixed batch is a captured tensor."""
        self.take()
        if not self.on:
            return inputs
        with tf.control_dependencies(self.taken[-1:]):
            return tuple(tf.identity(t) for t in inputs)

    def take(self, *after: Any) -> None:
        """A stamp once `after` and the stamp before it are done."""
        if self.on:
            self.taken.append(stamp(*after, self.taken[-1:]))

    def again(self) -> None:
        """The last stamp once more (a point the step has nothing between)."""
        if self.on:
            self.taken.append(self.taken[-1])

    def output(self, loss: tf.Tensor) -> tf.Tensor:
        """What the step returns: pack(loss, stamps), or the loss alone when off."""
        return pack(loss, self.taken) if self.on else loss


def exchange_times(start: float, ready: np.ndarray, exchanged: float, end: float,
                   collective: bool) -> StepTimes:
    """A step that computes gradients on one or more replicas (each ready at `ready[i]`),
    exchanges them until `exchanged`, then updates until `end`.

    Compute: a replica's forward+backward, averaged over replicas, plus the update.
    Exchange: from a replica's gradients ready to the exchange done (averaged); its waiting
    is the replicas' idling until the last one is ready. With `collective`, the exchange
    also waits for other processes; that part is told later from `ready_at`.
    """
    last = float(np.max(ready))
    idle = float(np.mean(last - ready))
    return StepTimes(compute_s=float(np.mean(ready - start)) + (end - exchanged),
                     exchange_s=exchanged - last + idle,
                     waiting_s=None if collective else idle,
                     ready_at=last if collective else None)
