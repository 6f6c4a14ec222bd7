"""A Keras 3 classifier of digits' 8x8 images, as a user brings one (tests/test_precision.py); its last layer
pinned to float32, as Keras's mixed-precision guide advises for a model's output."""

import keras


def build() -> keras.Model:
    images = keras.Input((8, 8, 1))
    hidden = keras.layers.Dense(100, activation="relu")(keras.layers.Flatten()(images))
    model = keras.Model(images, keras.layers.Dense(10, dtype="float32")(hidden))
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model
