"""A small convolutional net for 28x28 images: two conv+pool layers, two dense layers."""

import tensorflow as tf

from bench.run.models.base import NUM_CLASSES, Model

DECLARES = ({"name": "cnn", "class": "CNN", "reads": "images"},)


class CNN(Model):
    autograph = False  # see Model.autograph
    input_shape = (28, 28, 1)

    def build(self) -> None:
        self.c1 = self.he_normal("conv1_w", (5, 5, 1, 32), 5 * 5 * 1)
        self.c1b = self.zeros("conv1_b", (32,))
        self.c2 = self.he_normal("conv2_w", (5, 5, 32, 64), 5 * 5 * 32)
        self.c2b = self.zeros("conv2_b", (64,))
        flat = 7 * 7 * 64
        self.f1 = self.he_normal("fc1_w", (flat, 256), flat)
        self.f1b = self.zeros("fc1_b", (256,))
        self.f2 = self.he_normal("fc2_w", (256, NUM_CLASSES), 256)
        self.f2b = self.zeros("fc2_b", (NUM_CLASSES,))

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        h = tf.nn.relu(tf.nn.conv2d(x, self.c1, 1, "SAME") + self.c1b)
        h = tf.nn.max_pool2d(h, 2, 2, "SAME")
        h = tf.nn.relu(tf.nn.conv2d(h, self.c2, 1, "SAME") + self.c2b)
        h = tf.nn.max_pool2d(h, 2, 2, "SAME")
        h = tf.reshape(h, [-1, 7 * 7 * 64])
        h = tf.nn.relu(tf.matmul(h, self.f1) + self.f1b)
        return tf.matmul(h, self.f2) + self.f2b
