"""A wide-and-deep click-through model in Keras 3, as a recommender team writes one: each example is
FEATURES categorical ids hashed into one vocabulary; the wide part is a learned weight per id
(a linear model over the ids), the deep part an embedding per id fed to an MLP; their sum is the
click's logit. The embedding tables dominate its size (VOCABULARY x (1 + WIDTH) floats), and a
step touches only the rows of its batch's ids: the kind of model that asks "parameter servers
or allreduce?".

    python -m bench --model examples/wide_deep.py:build --strategy allreduce --workers 2
"""

import keras

FEATURES, VOCABULARY, WIDTH = 16, 20_000, 16


def build() -> keras.Model:
    ids = keras.Input((FEATURES,), dtype="int32", name="feature_ids")
    wide = keras.layers.Embedding(VOCABULARY, 1, name="wide")(ids)
    wide = keras.layers.Flatten()(wide)
    wide = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", trainable=False, name="wide_sum")(wide)
    deep = keras.layers.Embedding(VOCABULARY, WIDTH, name="deep")(ids)
    deep = keras.layers.Flatten()(deep)
    for units in (128, 64):
        deep = keras.layers.Dense(units, activation="relu")(deep)
    deep = keras.layers.Dense(1, name="deep_logit")(deep)
    logit = keras.layers.Add(name="logit")([wide, deep])
    model = keras.Model(ids, logit, name="wide_deep")
    model.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True))
    return model
