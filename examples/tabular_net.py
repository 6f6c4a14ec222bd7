"""A tabular classifier written in the suite's own model protocol (bench.run.models.base.Model):
low-level TensorFlow that runs under every strategy, the TensorFlow 1 graph of the parameter
servers included. FEATURES numeric columns, two residual blocks of WIDTH units with layer
normalisation, CLASSES classes.

    python -m bench --model examples/tabular_net.py:TabularNet --strategy ps-sync --workers 2
"""

import numpy as np
import tensorflow as tf

from bench.run.models.base import Model

FEATURES, WIDTH, CLASSES = 32, 64, 5


class TabularNet(Model):
    input_shape = (FEATURES,)
    num_classes = CLASSES

    def build(self) -> None:
        self.w_in = self.he_normal("w_in", (FEATURES, WIDTH), FEATURES)
        self.b_in = self.zeros("b_in", (WIDTH,))
        self.blocks = []
        for i in range(2):
            self.blocks.append((self.ones(f"ln{i}_scale", (WIDTH,)), self.zeros(f"ln{i}_shift", (WIDTH,)),
                                self.he_normal(f"w{i}", (WIDTH, WIDTH), WIDTH), self.zeros(f"b{i}", (WIDTH,))))
        self.w_out = self.variable("w_out", self._rng.normal(0.0, 0.01, size=(WIDTH, CLASSES)))
        self.b_out = self.zeros("b_out", (CLASSES,))

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        h = tf.nn.relu(tf.matmul(x, self.w_in) + self.b_in)
        for scale, shift, w, b in self.blocks:
            mean, variance = tf.nn.moments(h, axes=[1], keepdims=True)
            normed = (h - mean) * tf.math.rsqrt(variance + 1e-5) * scale + shift
            h = h + tf.nn.relu(tf.matmul(normed, w) + b)
        return tf.matmul(h, self.w_out) + self.b_out


def build(seed: int) -> Model:
    return TabularNet(seed)


def example_arrays(n: int = 2048, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Arrays of its kind to try `--data file.npz` with: labels from a fixed random linear rule."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    y = np.argmax(x @ np.random.default_rng(1).normal(size=(FEATURES, CLASSES)), axis=1).astype(np.int32)
    return x, y
