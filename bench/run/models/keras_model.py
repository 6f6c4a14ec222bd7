"""A compiled Keras 3 classifier seen through the suite's model protocol (bench.run.models.base.Model),
so every strategy that runs eager TensorFlow trains it with its own optimizer and exchange.

Keras 3 wraps each variable; the TensorFlow backend holds the `tf.Variable` at `.value`
(keras/src/backend/tensorflow/core.py), which is what GradientTape, Horovod and the checkpoints
are given. The model's compiled loss is its loss; the suite's flags choose the optimizer."""

from __future__ import annotations

import keras
import tensorflow as tf

from bench.errors import UsageError
from bench.run.models.base import Model

# the losses of the classifiers the suite can report accuracy for, {name: their per-example function}
CLASSIFIER_LOSSES = {"sparse_categorical_crossentropy": keras.losses.sparse_categorical_crossentropy,
                     "binary_crossentropy": keras.losses.binary_crossentropy}
# what of a compiled Loss's configuration its per-example function takes
LOSS_ARGUMENTS = ("from_logits", "label_smoothing", "ignore_class", "axis")


def compiled_loss(loss: object) -> tuple[str, dict]:
    """(name, arguments of its per-example function) of a compiled loss: a string, a Loss or a function."""
    if isinstance(loss, str):
        return loss, {}
    if isinstance(loss, keras.losses.Loss):
        config = loss.get_config()
        return config.get("name", type(loss).__name__), {k: config[k] for k in LOSS_ARGUMENTS if k in config}
    return getattr(loss, "__name__", type(loss).__name__), {}


class KerasModel(Model):
    """A functional (or Sequential with an Input) Keras 3 model of one input and one output,
    compiled with a classifier's loss (CLASSIFIER_LOSSES)."""

    def __init__(self, model: keras.Model, label: str) -> None:
        tf.Module.__init__(self, name="keras_model")
        self.keras = model
        self.sizes = {}
        self._partition = None
        self._check(model, label)
        [inputs], [outputs] = model.inputs, model.outputs
        self.input_shape = tuple(inputs.shape[1:])
        self.input_dtype = tf.as_dtype(inputs.dtype)
        name, arguments = compiled_loss(model.loss)
        self._binary = name == "binary_crossentropy"
        self._from_logits = bool(arguments.get("from_logits"))
        self.num_classes = 2 if self._binary else int(outputs.shape[-1])
        per_example = CLASSIFIER_LOSSES[name]
        self._losses = lambda y, outputs: per_example(y, outputs, **arguments)
        self._ordered = [v.value for v in model.weights]
        # an integer input's ids index its embedding tables (one row of each per id): the harness counts the
        # distinct ids of a batch as the rows its sparse gradient carries
        tables = [layer.embeddings for layer in model.layers if isinstance(layer, keras.layers.Embedding)]
        self._tables = [v.value for v in tables] if self.input_dtype.is_integer else []
        # synthetic ids stay inside every table an input indexes
        self.input_high = min((int(t.shape[0]) for t in tables), default=None) if self.input_dtype.is_integer else None

    @staticmethod
    def _check(model: keras.Model, label: str) -> None:
        try:
            inputs, outputs = model.inputs, model.outputs
        except (AttributeError, ValueError):
            inputs = outputs = None
        if not inputs or len(inputs) != 1 or len(outputs) != 1:
            raise UsageError(f"--model {label}: a Keras model must have one keras.Input and one output (build it "
                             "with keras.Model(inputs, outputs) or a Sequential that starts with keras.Input)")
        if None in tuple(inputs[0].shape[1:]):
            raise UsageError(f"--model {label}: its input's shape {tuple(inputs[0].shape)} must be fixed "
                             "but for the batch")
        if getattr(model, "loss", None) is None:
            raise UsageError(f"--model {label}: compile the Keras model with its loss (model.compile(loss=...)); "
                             "the optimizer is the suite's --optimizer and --lr")
        name, _ = compiled_loss(model.loss)
        if name not in CLASSIFIER_LOSSES:
            raise UsageError(f"--model {label}: its loss {name!r} is not a classifier's; the suite reports accuracy, "
                             f"so compile with one of {', '.join(CLASSIFIER_LOSSES)}")

    def build(self) -> None:  # built by the user's function
        pass

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        return self.keras(x, training=training)

    def outputs(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        """The model's output in float32 (its last layer computes in its policy's dtype: the loss does not)."""
        return tf.cast(self.keras(x, training=training), tf.float32)

    @property
    def dtype_policies(self) -> dict[str, int]:
        """{dtype policy: how many of its layers hold it}: what the run computed in, a layer that pins its own dtype
        included."""
        held: dict[str, int] = {}
        for layer in self.keras.layers:
            name = getattr(getattr(layer, "dtype_policy", None), "name", None)
            if name and layer.weights:
                held[name] = held.get(name, 0) + 1
        return held

    def _labels(self, y: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
        if self._binary:
            return tf.reshape(tf.cast(y, outputs.dtype), tf.shape(outputs))
        return y

    def loss(self, x: tf.Tensor, y: tf.Tensor, training: bool = True) -> tf.Tensor:
        outputs = self.outputs(x, training)
        loss = tf.reduce_mean(self._losses(self._labels(y, outputs), outputs))
        extra = self.keras.losses  # its layers' add_loss and weight regularizers, as fit() adds them
        return loss + tf.add_n(extra) if extra else loss

    def evaluate(self, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        outputs = self.outputs(x, False)
        losses = self._losses(self._labels(y, outputs), outputs)
        if self._binary:
            threshold = 0.0 if self._from_logits else 0.5
            predicted = tf.cast(tf.reshape(outputs, [-1]) > threshold, y.dtype)
        else:
            predicted = tf.argmax(outputs, axis=-1, output_type=y.dtype)
        correct = tf.cast(tf.equal(predicted, y), tf.float32)
        return tf.reduce_sum(losses), tf.reduce_sum(correct)

    @property
    def trainables(self) -> list[tf.Variable]:
        # Keras' own list: a layer set trainable=False keeps its variables' tf.Variable trainable
        return [v.value for v in self.keras.trainable_weights]

    @property
    def tables(self) -> list[tf.Variable]:
        return list(self._tables)

    @property
    def row_bytes(self) -> int:
        return sum(4 * int(t.shape[1]) for t in self._tables)
