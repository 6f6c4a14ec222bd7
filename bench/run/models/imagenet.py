"""Base of the ImageNet models (1000 classes, 224x224x3 or 299x299x3 by default): the
architecture is one function run by the two passes of bench.run.models.layers. `--image-size`
shrinks the input for CPU runs; the parameters stay those of the published architecture."""

from __future__ import annotations

from typing import ClassVar

import tensorflow as tf

from bench.run.models.base import Model
from bench.run.models.layers import Apply, Create


class ImageNetModel(Model):
    autograph = False  # see Model.autograph
    input_shape = (224, 224, 3)
    num_classes = 1000
    bn_epsilon: ClassVar[float] = 1.001e-5

    def __init__(self, seed: int = 0, partition: tuple[int, int] | None = None, image_size: int | None = None,
                 **sizes: int) -> None:
        if image_size:
            self.input_shape = (image_size, image_size, type(self).input_shape[2])
        super().__init__(seed, partition, **sizes)

    def build(self) -> None:
        create = Create(self, self.bn_epsilon)
        self.net(create, self.input_shape[2])
        self.params = create.params

    def net(self, ops, x):
        raise NotImplementedError(f"{type(self).__name__} must write its architecture in net(ops, x)")

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        # plain Python over layers, no control flow on tensors: AutoGraph has nothing to convert,
        # and converting hundreds of layer calls while towers trace at once once lost an argument
        net = tf.autograph.experimental.do_not_convert(self.net)
        return net(Apply(self.params, training, self.bn_epsilon), x)
