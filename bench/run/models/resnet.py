"""ResNet-20 for 32x32 images (He et al. 2016, CIFAR variant): 3 stages of 3 basic blocks.

Batch normalisation keeps moving averages for inference. Their update ops run by
themselves in eager and tf.function code; in a v1 graph they are put in the
UPDATE_OPS collection, as TF1 code expects, and the train op must depend on them.
"""

import tensorflow as tf

from bench.run.models.base import NUM_CLASSES, Model
from bench.run.models.layers import batch_norm

DECLARES = ({"name": "resnet20", "class": "ResNet20", "reads": "images"},)

STAGES = ((16, 1), (32, 2), (64, 2))
BLOCKS_PER_STAGE = 3
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5


class ResNet20(Model):
    autograph = False  # see Model.autograph
    input_shape = (32, 32, 3)

    def build(self) -> None:
        self.layers: list[dict] = []
        self.stem = self._conv("stem", 3, 3, 16)
        in_ch = 16
        for s, (ch, stride) in enumerate(STAGES):
            for b in range(BLOCKS_PER_STAGE):
                first_stride = stride if b == 0 else 1
                name = f"s{s}b{b}"
                block = {
                    "stride": first_stride,
                    "a": self._conv(f"{name}_a", 3, in_ch, ch),
                    "b": self._conv(f"{name}_b", 3, ch, ch),
                }
                if first_stride != 1 or in_ch != ch:
                    block["proj"] = self._conv(f"{name}_proj", 1, in_ch, ch)
                self.layers.append(block)
                in_ch = ch
        self.fc_w = self.he_normal("fc_w", (in_ch, NUM_CLASSES), in_ch)
        self.fc_b = self.zeros("fc_b", (NUM_CLASSES,))

    def _conv(self, name: str, k: int, cin: int, cout: int) -> dict:
        return {
            "w": self.he_normal(f"{name}_w", (k, k, cin, cout), k * k * cin),
            "gamma": self.ones(f"{name}_gamma", (cout,)),
            "beta": self.zeros(f"{name}_beta", (cout,)),
            "mean": self.zeros(f"{name}_mean", (cout,), trainable=False),
            "var": self.ones(f"{name}_var", (cout,), trainable=False),
        }

    def _conv_bn(self, x: tf.Tensor, p: dict, stride: int, training: bool) -> tf.Tensor:
        return batch_norm(tf.nn.conv2d(x, p["w"], stride, "SAME"), p, training, BN_MOMENTUM, BN_EPSILON)

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        h = tf.nn.relu(self._conv_bn(x, self.stem, 1, training))
        for block in self.layers:
            out = tf.nn.relu(self._conv_bn(h, block["a"], block["stride"], training))
            out = self._conv_bn(out, block["b"], 1, training)
            shortcut = self._conv_bn(h, block["proj"], block["stride"], training) if "proj" in block else h
            h = tf.nn.relu(out + shortcut)
        h = tf.reduce_mean(h, axis=[1, 2])
        return tf.matmul(h, self.fc_w) + self.fc_b
