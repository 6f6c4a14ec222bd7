"""Gradient compression in TensorFlow (strategies/_compression.py says what each setting is).

A `Compressor` is made for a worker's variables before its step is traced (top-k keeps one
error-feedback residual per dense variable, on this worker). `encode` runs where the gradient
was computed and gives what goes on the wire; `decode` runs where it is applied (a ps task:
place it there with tf.device) and gives a float32 gradient again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from strategies._compression import FP16, NONE, TOPK, parse


@dataclass
class Encoded:
    """A gradient as it crosses the wire: a tensor (float32 or float16), IndexedSlices, or
    top-k (values, int32 indices into the flattened variable)."""

    tensor: tf.Tensor | tf.IndexedSlices | None = None
    values: tf.Tensor | None = None
    indices: tf.Tensor | None = None


class Compressor:
    def __init__(self, setting: str, variables: list[tf.Variable]) -> None:
        self.kind, self.ratio = parse(setting)
        self.residuals: dict[int, tf.Variable] = {}
        if self.kind == TOPK:
            for i, var in enumerate(variables):
                # error feedback: what a step did not send, added to the next gradient; local to
                # this worker (in a ps graph, out of the global variables the ps tasks hold)
                self.residuals[id(var)] = tf.compat.v1.Variable(
                    np.zeros(var.shape, np.float32), trainable=False, name=f"topk_residual_{i}",
                    collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])

    def k_of(self, var: tf.Variable) -> int:
        return max(1, int(round(self.ratio * int(np.prod(var.shape)))))

    def encode(self, grad, var: tf.Variable) -> Encoded:
        if self.kind == NONE or grad is None:
            return Encoded(tensor=grad)
        if isinstance(grad, tf.IndexedSlices):
            if self.kind == FP16:
                return Encoded(tensor=tf.IndexedSlices(tf.cast(grad.values, tf.float16), grad.indices,
                                                       grad.dense_shape))
            return Encoded(tensor=grad)  # a table's touched rows go as they are
        if self.kind == FP16:
            return Encoded(tensor=tf.cast(grad, tf.float16))
        residual = self.residuals[id(var)]
        flat = tf.reshape(grad + residual, [-1])
        _, indices = tf.math.top_k(tf.abs(flat), k=self.k_of(var), sorted=False)
        values = tf.gather(flat, indices)
        # what is sent leaves the residual; the rest stays for the next step
        kept = tf.tensor_scatter_nd_update(flat, indices[:, None], tf.zeros_like(values))
        with tf.control_dependencies([residual.assign(tf.reshape(kept, var.shape), read_value=False)]):
            return Encoded(values=tf.identity(values), indices=tf.identity(indices))

    def decode(self, wire: Encoded, var: tf.Variable):
        if self.kind == TOPK and wire.values is not None:
            size = int(np.prod(var.shape))
            return tf.reshape(tf.scatter_nd(wire.indices[:, None], wire.values, [size]), var.shape)
        return cast_back(wire.tensor)

    def to(self, grads: list, variables: list[tf.Variable], where=lambda var: var.device) -> list:
        """Each gradient encoded here and decoded on `where(var)` (its variable's device); as they
        are without compression."""
        if self.kind == NONE:
            return list(grads)
        out = []
        for grad, var in zip(grads, variables, strict=True):
            wire = self.encode(grad, var)
            with tf.device(where(var)):
                out.append(self.decode(wire, var))
        return out


def cast_back(tensor):
    """float16 on the wire back to float32 (IndexedSlices too); anything else as it is."""
    if isinstance(tensor, tf.IndexedSlices):
        return tf.IndexedSlices(cast_back(tensor.values), tensor.indices, tensor.dense_shape)
    if tensor is not None and tensor.dtype == tf.float16:
        return tf.cast(tensor, tf.float32)
    return tensor
