"""The seed's MNIST model: 784 inputs, one hidden layer of 100 ReLUs, 10-way softmax."""

import tensorflow as tf

from bench.run.models.base import NUM_CLASSES, Model

DECLARES = ({"name": "mlp", "class": "MLP", "reads": "images"},)

HIDDEN = 100


class MLP(Model):
    autograph = False  # see Model.autograph
    input_shape = (28, 28, 1)

    def build(self) -> None:
        inputs = 28 * 28
        self.w1 = self.he_normal("hid_w", (inputs, HIDDEN), inputs)
        self.b1 = self.zeros("hid_b", (HIDDEN,))
        self.w2 = self.he_normal("sm_w", (HIDDEN, NUM_CLASSES), HIDDEN)
        self.b2 = self.zeros("sm_b", (NUM_CLASSES,))

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        flat = tf.reshape(x, [-1, 28 * 28])
        hidden = tf.nn.relu(tf.matmul(flat, self.w1) + self.b1)
        return tf.matmul(hidden, self.w2) + self.b2
