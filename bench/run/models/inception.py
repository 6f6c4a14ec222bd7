"""Inception V3 (Szegedy et al. 2016) without the auxiliary head, as tf_cnn_benchmarks and
Keras' applications build it: every convolution without bias, batch normalisation without
gamma (scale=False), 299x299 input."""

from bench.run.models.imagenet import ImageNetModel

# 75: the smallest input its valid paddings leave room for
DECLARES = ({"name": "inception3", "class": "InceptionV3", "reads": "images", "imagenet": True,
             "min_image_size": 75},)


class InceptionV3(ImageNetModel):
    input_shape = (299, 299, 3)
    bn_epsilon = 1e-3

    def net(self, ops, x):
        conv = self._conv_bn(ops)
        x = conv(x, 32, 3, 3, stride=2, padding="VALID")
        x = conv(x, 32, 3, 3, padding="VALID")
        x = ops.max_pool(conv(x, 64, 3, 3), 3, 2)
        x = conv(x, 80, 1, 1, padding="VALID")
        x = ops.max_pool(conv(x, 192, 3, 3, padding="VALID"), 3, 2)
        for pool_filters in (32, 64, 64):
            x = self._block_35(ops, conv, x, pool_filters)
        x = self._reduce_17(ops, conv, x)
        for width in (128, 160, 160, 192):
            x = self._block_17(ops, conv, x, width)
        x = self._reduce_8(ops, conv, x)
        for _ in range(2):
            x = self._block_8(ops, conv, x)
        return ops.dense(ops.global_pool(x), self.num_classes, relu=False)

    @staticmethod
    def _conv_bn(ops):
        def conv(x, filters, kh, kw, stride=1, padding="SAME"):
            return ops.conv(x, filters, kh, kw, stride=stride, padding=padding, bias=False, scale=False)
        return conv

    @staticmethod
    def _block_35(ops, conv, x, pool_filters):
        b1 = conv(x, 64, 1, 1)
        b5 = conv(conv(x, 48, 1, 1), 64, 5, 5)
        b3 = conv(conv(conv(x, 64, 1, 1), 96, 3, 3), 96, 3, 3)
        bp = conv(ops.avg_pool(x, 3, 1), pool_filters, 1, 1)
        return ops.concat(b1, b5, b3, bp)

    @staticmethod
    def _reduce_17(ops, conv, x):
        b3 = conv(x, 384, 3, 3, stride=2, padding="VALID")
        bd = conv(conv(conv(x, 64, 1, 1), 96, 3, 3), 96, 3, 3, stride=2, padding="VALID")
        return ops.concat(b3, bd, ops.max_pool(x, 3, 2))

    @staticmethod
    def _block_17(ops, conv, x, width):
        b1 = conv(x, 192, 1, 1)
        b7 = conv(conv(conv(x, width, 1, 1), width, 1, 7), 192, 7, 1)
        bd = conv(x, width, 1, 1)
        for filters, (kh, kw) in ((width, (7, 1)), (width, (1, 7)), (width, (7, 1)), (192, (1, 7))):
            bd = conv(bd, filters, kh, kw)
        bp = conv(ops.avg_pool(x, 3, 1), 192, 1, 1)
        return ops.concat(b1, b7, bd, bp)

    @staticmethod
    def _reduce_8(ops, conv, x):
        b3 = conv(conv(x, 192, 1, 1), 320, 3, 3, stride=2, padding="VALID")
        b7 = conv(conv(conv(x, 192, 1, 1), 192, 1, 7), 192, 7, 1)
        b7 = conv(b7, 192, 3, 3, stride=2, padding="VALID")
        return ops.concat(b3, b7, ops.max_pool(x, 3, 2))

    @staticmethod
    def _block_8(ops, conv, x):
        b1 = conv(x, 320, 1, 1)
        b3 = conv(x, 384, 1, 1)
        b3 = ops.concat(conv(b3, 384, 1, 3), conv(b3, 384, 3, 1))
        bd = conv(conv(x, 448, 1, 1), 384, 3, 3)
        bd = ops.concat(conv(bd, 384, 1, 3), conv(bd, 384, 3, 1))
        bp = conv(ops.avg_pool(x, 3, 1), 192, 1, 1)
        return ops.concat(b1, b3, bd, bp)
