"""Layers for the ImageNet models, so that each architecture is written once.

An architecture is a function `net(ops, x)` over the operations below. It is called twice:
with `Create`, where `x` is a channel count and each layer creates its variables (in the
order the forward pass uses them, which is also the order gradients are produced in, last
first); and with `Apply`, where `x` is a tensor and each layer takes the next variables
created. Keras' applications build the same layers, so parameter counts can be compared
with theirs: a convolution has a bias unless told otherwise, and batch normalisation keeps
a moving mean and variance (non-trainable) beside its beta and, unless `scale=False`, gamma.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

BN_MOMENTUM = 0.99


def update_average(average: tf.Variable, value: tf.Tensor, momentum: float) -> None:
    """Moving average for inference; in a v1 graph its op joins UPDATE_OPS, as TF1 code expects."""
    op = average.assign(momentum * average + (1.0 - momentum) * value)
    if not tf.executing_eagerly():
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, op)


def batch_norm(y: tf.Tensor, p: dict, training: bool, momentum: float, epsilon: float) -> tf.Tensor:
    """Batch normalization of `y` by `p`'s gamma (optional), beta and moving averages, computed in float32 whatever
    `y`'s dtype and given back in it (as Keras's BatchNormalization does under a mixed policy: a half-precision
    batch's variance loses what it is for)."""
    x = tf.cast(y, tf.float32)
    if training:
        mean, var = tf.nn.moments(x, axes=[0, 1, 2])
        update_average(p["mean"], mean, momentum)
        update_average(p["var"], var, momentum)
    else:
        mean, var = p["mean"], p["var"]
    gamma = tf.cast(p["gamma"], tf.float32) if p.get("gamma") is not None else None
    return tf.cast(tf.nn.batch_normalization(x, mean, var, tf.cast(p["beta"], tf.float32), gamma, epsilon), y.dtype)


class Create:
    """The creating pass: `x` is the number of channels; each layer makes its variables."""

    def __init__(self, model, bn_epsilon: float) -> None:
        self.model = model
        self.bn_epsilon = bn_epsilon
        self.params: list[dict] = []

    def _normal(self, name: str, shape: tuple[int, ...], fan_in: int) -> tf.Variable:
        rng = self.model._rng  # one stream per model: every process draws the same weights
        value = rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        return self.model.variable(name, value)

    def conv(self, x: int, filters: int, kh: int, kw: int | None = None, stride: int = 1, padding: str = "SAME",
             bias: bool = True, scale: bool = True, relu: bool = True, bn: bool = True) -> int:
        kw = kh if kw is None else kw
        name = f"conv{len(self.params)}"
        p = {"w": self._normal(f"{name}_w", (kh, kw, x, filters), kh * kw * x)}
        if bias:
            p["b"] = self.model.zeros(f"{name}_b", (filters,))
        if bn:
            self._batch_norm(p, name, filters, scale)
        self.params.append(p)
        return filters

    def _batch_norm(self, p: dict, name: str, filters: int, scale: bool) -> None:
        if scale:
            p["gamma"] = self.model.ones(f"{name}_gamma", (filters,))
        p["beta"] = self.model.zeros(f"{name}_beta", (filters,))
        p["mean"] = self.model.zeros(f"{name}_mean", (filters,), trainable=False)
        p["var"] = self.model.ones(f"{name}_var", (filters,), trainable=False)

    def dense(self, x: int, units: int, relu: bool = True) -> int:
        name = f"dense{len(self.params)}"
        weights = self._normal(f"{name}_w", (x, units), x)
        self.params.append({"w": weights, "b": self.model.zeros(f"{name}_b", (units,))})
        return units

    def max_pool(self, x: int, k: int, stride: int, padding: str = "VALID") -> int:
        return x

    def avg_pool(self, x: int, k: int, stride: int, padding: str = "SAME") -> int:
        return x

    def pad(self, x: int, amount: int) -> int:
        return x

    def concat(self, *xs: int) -> int:
        return sum(xs)

    def add_relu(self, x: int, shortcut: int) -> int:
        return x

    def global_pool(self, x: int) -> int:
        return x

    def flatten_at(self, x: int, side: int) -> int:
        return side * side * x


class Apply:
    """The applying pass: `x` is a tensor (NHWC); each layer takes the next variables created."""

    def __init__(self, params: list[dict], training: bool, bn_epsilon: float) -> None:
        self._params = iter(params)
        self.training = training
        self.bn_epsilon = bn_epsilon

    def conv(self, x: tf.Tensor, filters: int, kh: int, kw: int | None = None, stride: int = 1,
             padding: str = "SAME", bias: bool = True, scale: bool = True, relu: bool = True,
             bn: bool = True) -> tf.Tensor:
        p = next(self._params)
        y = tf.nn.conv2d(x, p["w"], stride, padding)
        if bias:
            y = y + p["b"]
        if bn:
            y = self._batch_norm(y, p)
        return tf.nn.relu(y) if relu else y

    def _batch_norm(self, y: tf.Tensor, p: dict) -> tf.Tensor:
        return batch_norm(y, p, self.training, BN_MOMENTUM, self.bn_epsilon)

    def dense(self, x: tf.Tensor, units: int, relu: bool = True) -> tf.Tensor:
        p = next(self._params)
        y = tf.matmul(x, p["w"]) + p["b"]
        return tf.nn.relu(y) if relu else y

    def max_pool(self, x: tf.Tensor, k: int, stride: int, padding: str = "VALID") -> tf.Tensor:
        return tf.nn.max_pool2d(x, k, stride, padding)

    def avg_pool(self, x: tf.Tensor, k: int, stride: int, padding: str = "SAME") -> tf.Tensor:
        return tf.nn.avg_pool2d(x, k, stride, padding)

    def pad(self, x: tf.Tensor, amount: int) -> tf.Tensor:
        return tf.pad(x, [[0, 0], [amount, amount], [amount, amount], [0, 0]])

    def concat(self, *xs: tf.Tensor) -> tf.Tensor:
        return tf.concat(xs, axis=3)

    def add_relu(self, x: tf.Tensor, shortcut: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(x + shortcut)

    def global_pool(self, x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(x, axis=[1, 2])

    def flatten_at(self, x: tf.Tensor, side: int) -> tf.Tensor:
        """Flattened at side x side, whatever the input's size (a smaller --image-size is resized up,
        as torchvision's adaptive pooling does), so the dense layers keep their published size."""
        if x.shape[1] != side or x.shape[2] != side:
            x = tf.image.resize(x, (side, side), method="nearest")
        return tf.reshape(x, [-1, side * side * x.shape[3]])
