"""What the two in-graph workers (multi-tower, mirrored) share: device set-up, and slicing
one global batch into per-tower batches."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench.config import RunConfig
from bench.run.process import devices
from strategies.workers.eager import EagerWorker


class TowerWorker(EagerWorker):
    """One process feeding the global batch to N towers on N devices of this machine."""

    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        return devices.configure(config.workers)

    def place(self) -> tuple[int, int]:
        """Choose the tower and parameter devices; returns (towers, per-tower batch)."""
        self.towers = devices.tower_devices(self.config.workers)
        self.param_device = devices.parameter_device(self.config.option("variable_device"))
        return self.config.workers, self.config.batch_size


def tower_slice(x: tf.Tensor, index: tf.Tensor | int, per_tower: int) -> tf.Tensor:
    """Rows [index*b, (index+1)*b) of the global batch: tower i's share."""
    return x[index * per_tower : (index + 1) * per_tower]


def mean(grads: list[tf.Tensor | tf.IndexedSlices]) -> tf.Tensor | tf.IndexedSlices:
    """The towers' mean gradient of one variable. A table's gradients (IndexedSlices) stay
    sparse: their rows are concatenated, as TensorFlow aggregates IndexedSlices, and a
    row touched by several towers is summed when the update applies it."""
    if all(isinstance(g, tf.IndexedSlices) for g in grads):
        return tf.IndexedSlices(tf.concat([g.values for g in grads], 0) / len(grads),
                                tf.concat([g.indices for g in grads], 0), grads[0].dense_shape)
    return tf.add_n(grads) / len(grads)
