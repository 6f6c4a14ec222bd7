"""Base class of the models: low-level TensorFlow that runs in a v1 graph and in tf.function.

Initial values come from NumPy with a fixed seed, so every process of a run and
every strategy starts from bit-identical weights whatever TF mode it is in.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import tensorflow as tf
from tensorflow.python.ops.variables import PartitionedVariable  # what get_variable returns when split

if TYPE_CHECKING:
    from bench.run.models.loss_scale import DynamicLossScale

NUM_CLASSES = 10


# v1 graphs: the initial value of each model variable, by its placeholder (Model.variable)
_INITIAL_VALUES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def initial_values(graph: tf.Graph | None = None) -> dict[tf.Tensor, np.ndarray]:
    """What to feed when the variables of the models built in a v1 graph (the default one) are
    initialised, by init_op or local_init_op alike: {placeholder: value}."""
    return _INITIAL_VALUES.get(graph or tf.compat.v1.get_default_graph(), {})


class Model(tf.Module):
    """A classifier of inputs of `input_shape` (per example) into `num_classes` classes: by
    default images (H, W, C) into 10."""

    input_shape: ClassVar[tuple[int | None, ...]]
    input_dtype: ClassVar[tf.DType] = tf.float32
    num_classes: ClassVar[int] = NUM_CLASSES
    input_high: ClassVar[int | None] = None  # integer inputs: ids below this (synthetic data draws them so)
    # Whether a tf.function of this model's step needs AutoGraph to convert Python control flow on
    # tensors: a user's model may rely on it. The suite's own models have none, and converting a
    # step's code cost 0.3-0.4 CPU-s of every training process's start-up (a 20-step mlp run under
    # single: 2.9 CPU-s instead of 3.3); the graph is the same either way.
    autograph: ClassVar[bool] = True
    # A run's precision (bench.run.models.precision), set by models.for_run: the dtype its forward and backward
    # passes compute in (its variables stay float32, cast where they are read: only a model whose logits read
    # its variables as attributes declares `mixed_precision` in DECLARES), the loss scale, and whether its
    # gradients are compiled by XLA (--xla)
    compute_dtype: tf.DType = tf.float32
    loss_scale: DynamicLossScale | None = None  # float16's; None: the loss as it is
    jit_compile: bool = False

    def __init__(self, seed: int = 0, partition: tuple[int, int] | None = None, **sizes: int) -> None:
        """`partition` = (shards, min_bytes): variables of at least min_bytes are split
        along their first axis into `shards` pieces (for spreading over ps tasks); `sizes`:
        what a model of adjustable size is built with."""
        super().__init__(name=type(self).__name__.lower())
        self._rng = np.random.default_rng(seed)
        self._partition = partition
        self._ordered: list[tf.Variable] = []
        self.sizes = sizes
        self.build()

    def build(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must create its variables in build()")

    def function(self, fn, **options):
        """`tf.function(fn)` of a step or evaluation of this model, with AutoGraph only where it needs it."""
        return tf.function(fn, autograph=self.autograph, **options)

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement logits(x, training)")

    def variable(self, name: str, value: np.ndarray, trainable: bool = True) -> tf.Variable:
        value = value.astype(np.float32)
        if self._partition and value.nbytes >= self._partition[1] and value.shape[0] >= self._partition[0]:
            var = self._partitioned(name, value, trainable)
        else:
            var = tf.Variable(self._initial(value, name), name=name, trainable=trainable)
        self._ordered.append(var)
        return var

    @staticmethod
    def _initial(value: np.ndarray, name: str) -> np.ndarray | tf.Tensor:
        """`value` itself, or in a v1 graph a placeholder fed with it when the variables are initialised
        (initial_values): a constant would go into the graph, which a distributed session ships to every
        task holding the variable (VGG-16 under ps-sync: 553 MB, 52 s of start-up)."""
        if tf.compat.v1.executing_eagerly_outside_functions():
            return value
        initial = tf.compat.v1.placeholder(tf.float32, value.shape, name=f"{name}_initial_value")
        _INITIAL_VALUES.setdefault(initial.graph, {})[initial] = value
        return initial

    def _partitioned(self, name: str, value: np.ndarray, trainable: bool):
        def initial(shape, dtype=None, partition_info=None):
            start = partition_info.var_offset[0] if partition_info else 0
            return self._initial(value[start : start + shape[0]], f"{name}_{start}")

        return tf.compat.v1.get_variable(
            name, shape=value.shape, dtype=tf.float32, initializer=initial, trainable=trainable,
            partitioner=tf.compat.v1.fixed_size_partitioner(self._partition[0]), use_resource=True)

    def he_normal(self, name: str, shape: tuple[int, ...], fan_in: int) -> tf.Variable:
        return self.variable(name, self._rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape))

    def zeros(self, name: str, shape: tuple[int, ...], trainable: bool = True) -> tf.Variable:
        return self.variable(name, np.zeros(shape), trainable)

    def ones(self, name: str, shape: tuple[int, ...], trainable: bool = True) -> tf.Variable:
        return self.variable(name, np.ones(shape), trainable)

    @property
    def weights(self) -> list[tf.Variable]:
        """Every variable, trainable or not, in creation order (a partitioned one whole)."""
        return list(self._ordered)

    def weight_tensors(self) -> list[tf.Tensor]:
        """The values of `weights`, partitioned variables joined again."""
        return [v.as_tensor() if isinstance(v, PartitionedVariable) else v.read_value() for v in self._ordered]

    @property
    def trainables(self) -> list[tf.Variable]:
        """Trainable variables in creation order (the order gradients come in); a
        partitioned variable contributes its pieces."""
        out: list[tf.Variable] = []
        for v in self._ordered:
            if isinstance(v, PartitionedVariable):
                out.extend(p for p in v if p.trainable)
            elif v.trainable:
                out.append(v)
        return out

    @contextlib.contextmanager
    def _computing(self) -> Iterator[None]:
        """Inside: the model's float32 variable attributes read as `compute_dtype` (cast where read, so that the
        gradients reach the float32 variables); nothing changes at float32."""
        if self.compute_dtype == tf.float32:
            yield
            return
        tables = {id(t) for t in self.tables}
        held = {name: value for name, value in vars(self).items() if not name.startswith("_")}
        for name, value in held.items():
            object.__setattr__(self, name, self._read_as(value, tables))
        try:
            yield
        finally:
            for name, value in held.items():
                object.__setattr__(self, name, value)

    def _read_as(self, value: Any, tables: set[int]) -> Any:
        """`value` with each trainable float32 variable in it (as an attribute, or in its lists and dicts) cast to
        the compute dtype; tables (their rows cast where a model reads them) and non-trainable variables (batch
        norm's moving averages, assigned in the step) kept."""
        if isinstance(value, PartitionedVariable):
            if any(id(piece) in tables for piece in value) or value.dtype != tf.float32:
                return value
            return tf.cast(value.as_tensor(), self.compute_dtype)
        if isinstance(value, tf.Variable):
            if id(value) in tables or not value.trainable or value.dtype != tf.float32:
                return value
            return tf.cast(value, self.compute_dtype)
        if isinstance(value, dict):
            return {k: self._read_as(v, tables) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._read_as(v, tables) for v in value]
        return value

    def precise_logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        """The logits in float32, computed in `compute_dtype`."""
        if self.compute_dtype == tf.float32:
            return self.logits(x, training)
        with self._computing():
            inputs = tf.cast(x, self.compute_dtype) if x.dtype.is_floating else x
            return tf.cast(self.logits(inputs, training), tf.float32)

    def loss(self, x: tf.Tensor, y: tf.Tensor, training: bool = True) -> tf.Tensor:
        """Mean softmax cross-entropy of the batch (in float32 whatever the compute dtype)."""
        return tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=self.precise_logits(x, training))
        )

    def scaled(self, loss: tf.Tensor) -> tf.Tensor:
        """The loss the backward pass starts from: times the loss scale (float16), else itself."""
        return loss if self.loss_scale is None else self.loss_scale.scaled(loss)

    def unscaled(self, grads: Sequence[Any]) -> list[Any]:
        """Gradients of `scaled(loss)` divided by the loss scale (a table's IndexedSlices alike); the dynamic scale
        zeroes a step's gradients where any is not finite (bench.run.models.loss_scale)."""
        return list(grads) if self.loss_scale is None else self.loss_scale.unscaled(grads)

    def evaluate(self, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(summed loss, number correct) over a batch, in inference mode."""
        logits = self.precise_logits(x, training=False)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        correct = tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), y)
        return tf.reduce_sum(losses), tf.reduce_sum(tf.cast(correct, tf.float32))

    @property
    def num_params(self) -> int:
        """Number of trainable scalars."""
        return int(sum(np.prod(v.shape) for v in self.trainables))

    @property
    def gradient_bytes(self) -> int:
        """Bytes of float32 gradient one worker produces per step, were it dense."""
        return 4 * self.num_params

    @property
    def tables(self) -> list[tf.Variable]:
        """Embedding tables: variables a step reads a few rows of, whose gradients are sparse."""
        return []

    @property
    def table_bytes(self) -> int:
        """Bytes of the tables (float32)."""
        return sum(4 * int(np.prod(t.shape)) for t in self.tables)

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of the tables (0 without tables)."""
        return 0
