"""A small transformer encoder in Keras 3, as a team classifying sensor sequences writes one: each
example is STEPS time steps of FEATURES readings, projected to WIDTH, given learned positions, passed
through BLOCKS encoder blocks (multi-head self-attention and a feed-forward layer, each with a
residual and layer normalisation), pooled, and classified into CLASSES. Dense throughout: every step
moves every weight's gradient, so it is the kind of model the cluster projection can take.

    python -m bench --model examples/keras_encoder.py:build --strategy allreduce --workers 2
"""

import keras

STEPS, FEATURES, WIDTH, HEADS, BLOCKS, CLASSES = 32, 16, 64, 4, 2, 4


class Positions(keras.layers.Layer):
    """A learned vector per time step, added to the sequence."""

    def build(self, input_shape):
        self.table = self.add_weight(shape=(input_shape[1], input_shape[2]), initializer="random_normal",
                                     name="positions")

    def call(self, x):
        return x + self.table


def encoder_block(x):
    attended = keras.layers.MultiHeadAttention(HEADS, WIDTH // HEADS)(x, x)
    x = keras.layers.LayerNormalization()(x + attended)
    hidden = keras.layers.Dense(4 * WIDTH, activation="gelu")(x)
    return keras.layers.LayerNormalization()(x + keras.layers.Dense(WIDTH)(hidden))


def build() -> keras.Model:
    readings = keras.Input((STEPS, FEATURES), name="readings")
    x = Positions()(keras.layers.Dense(WIDTH)(readings))
    for _ in range(BLOCKS):
        x = encoder_block(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(readings, keras.layers.Dense(CLASSES)(x), name="sensor_encoder")
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model
