"""ResNet-50, -101 and -152 (He et al. 2016), v1 with bottleneck blocks, as Keras'
applications build them: convolutions with biases, the stride on each stage's first 1x1."""

from bench.run.models.imagenet import ImageNetModel

# the ImageNet models published scaling results are measured on; 32: the smallest input their strides leave
DECLARES = ({"name": "resnet50", "class": "ResNet50", "reads": "images", "imagenet": True, "min_image_size": 32},
            {"name": "resnet101", "class": "ResNet101", "reads": "images", "imagenet": True, "min_image_size": 32},
            {"name": "resnet152", "class": "ResNet152", "reads": "images", "imagenet": True, "min_image_size": 32})


class _ResNet(ImageNetModel):
    blocks: tuple[int, int, int, int]

    def net(self, ops, x):
        x = ops.conv(ops.pad(x, 3), 64, 7, stride=2, padding="VALID")
        x = ops.max_pool(ops.pad(x, 1), 3, 2)
        for stage, (filters, count) in enumerate(zip((64, 128, 256, 512), self.blocks, strict=True)):
            for block in range(count):
                x = self._bottleneck(ops, x, filters, 2 if stage and not block else 1, projection=not block)
        return ops.dense(ops.global_pool(x), self.num_classes, relu=False)

    @staticmethod
    def _bottleneck(ops, x, filters: int, stride: int, projection: bool):
        shortcut = ops.conv(x, 4 * filters, 1, stride=stride, relu=False) if projection else x
        y = ops.conv(x, filters, 1, stride=stride)
        y = ops.conv(y, filters, 3)
        y = ops.conv(y, 4 * filters, 1, relu=False)
        return ops.add_relu(y, shortcut)


class ResNet50(_ResNet):
    blocks = (3, 4, 6, 3)


class ResNet101(_ResNet):
    blocks = (3, 4, 23, 3)


class ResNet152(_ResNet):
    blocks = (3, 8, 36, 3)
