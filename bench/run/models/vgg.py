"""VGG-16 (Simonyan and Zisserman 2014, configuration D): 13 3x3 convolutions with biases and
no normalisation, then three dense layers; fc6 alone is 102.8 M parameters (411 MB)."""

from bench.run.models.imagenet import ImageNetModel

DECLARES = ({"name": "vgg16", "class": "VGG16", "reads": "images", "imagenet": True, "min_image_size": 32},)

STAGES = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))


class VGG16(ImageNetModel):
    def net(self, ops, x):
        for filters, convs in STAGES:
            for _ in range(convs):
                x = ops.conv(x, filters, 3, bn=False)
            x = ops.max_pool(x, 2, 2)
        x = ops.flatten_at(x, 7)
        x = ops.dense(ops.dense(x, 4096), 4096)
        return ops.dense(x, self.num_classes, relu=False)
