"""A float16 step's dynamic loss scale, as Keras's LossScaleOptimizer keeps one (keras/src/optimizers/
loss_scale_optimizer.py: initial_scale 2**15, dynamic_growth_steps 2000): the loss is multiplied by the scale before
the backward pass and each gradient divided by it after; a step whose gradients are not all finite applies none
(they are zeroed, so an overflow never reaches the weights) and halves the scale; 2000 finite steps in a row double
it. Each training process keeps its own (a Horovod rank, a ps worker: its state is no model variable, never
exchanged), created where the model is built; in a TensorFlow 1 graph its variables are the worker's local ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

INITIAL_SCALE = 2.0 ** 15  # Keras's initial_scale
GROWTH_STEPS = 2000  # Keras's dynamic_growth_steps


class DynamicLossScale:
    def __init__(self, initial: float = INITIAL_SCALE, growth_steps: int = GROWTH_STEPS) -> None:
        self.growth_steps = growth_steps
        with tf.init_scope():
            self.scale = self._variable("loss_scale", tf.constant(initial, tf.float32))
            self.finite_steps = self._variable("loss_scale_finite_steps", tf.constant(0, tf.int64))

    @staticmethod
    def _variable(name: str, value: tf.Tensor) -> tf.Variable:
        if tf.executing_eagerly():
            # under a tf.distribute scope: one value for every replica of the process, the first replica's update
            return tf.Variable(value, name=name, trainable=False,
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        with tf.compat.v1.device(None):  # the worker's own, not a ps task's (a device setter would put it there)
            return tf.compat.v1.Variable(value, name=name, trainable=False, use_resource=True,
                                         collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])

    def scaled(self, loss: tf.Tensor) -> tf.Tensor:
        return loss * tf.cast(self.scale, loss.dtype)

    def unscaled(self, grads: Sequence[Any]) -> list[Any]:
        """The gradients divided by the scale, all zero where any is not finite; the scale's update runs before
        they are read (a control dependency: in a TensorFlow 1 graph nothing else would run it)."""
        present = [g for g in grads if g is not None]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(values(g))) for g in present])
        inverse = tf.where(finite, 1.0 / self.scale, 0.0)  # the scale this step's loss was multiplied by:
        with tf.control_dependencies([inverse]):  # read before the update changes it (a TF1 graph orders nothing)
            update = self._update(finite)
        with tf.control_dependencies([update]):
            return [None if g is None else self._one(g, finite, inverse) for g in grads]

    @staticmethod
    def _one(g: Any, finite: tf.Tensor, inverse: tf.Tensor) -> Any:
        if isinstance(g, tf.IndexedSlices):
            return tf.IndexedSlices(tf.where(finite, g.values * inverse, 0.0), g.indices, g.dense_shape)
        return tf.where(finite, g * inverse, tf.zeros_like(g))

    def _update(self, finite: tf.Tensor) -> tf.Operation:
        count = tf.where(finite, self.finite_steps + 1, 0)
        grow = count >= self.growth_steps
        scale = tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale), self.scale / 2.0)
        return tf.group(self.scale.assign(scale), self.finite_steps.assign(tf.where(grow, tf.zeros_like(count),
                                                                                    count)))


def values(g: Any) -> tf.Tensor:
    return g.values if isinstance(g, tf.IndexedSlices) else g
