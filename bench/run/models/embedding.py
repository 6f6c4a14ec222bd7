"""A click model over categorical features: one large embedding table looked up by every
feature of an example, the looked-up rows summed, and a small dense tower (width -> 64
-> 2) on top. The table is most of the parameters, but a step reads and updates only
the rows its batch touches, so its gradient is sparse (tf.IndexedSlices).

The batch's ids are made unique before the lookup, as production embedding lookups do:
each touched row is read (and, from a parameter server, moved) once per step, and the
gradient carries each touched row once.

Under a tf.distribute strategy (mirrored, allreduce-tf) the table is a mirrored variable, and
tf.gather on it reads the whole table every step: the variable's `sparse_read` is the base
Variable's, which raises AttributeError, and tf.gather falls back to a dense read (TF 2.21). So
the rows are read from the replica's own copy, as a plain variable's are: measured on one
replica, 2M x 16 rows, 10.8 against 0.32 ms a step (docs/embedding.md).
"""

import tensorflow as tf
from tensorflow.python.ops.variables import PartitionedVariable  # a table split over ps tasks

from bench.run.models.base import Model

DECLARES = ({"name": "embedding", "class": "Embedding", "reads": "ids"},)

HIDDEN = 64
INIT_SCALE = 0.05


def own_copy(table: tf.Variable) -> tf.Variable:
    """The replica's own copy of a tf.distribute variable (a plain variable is its own): its reads, and the
    gradient the tape gives the distributed variable, stay those of the rows read."""
    if isinstance(table, tf.distribute.DistributedValues):
        return table._get_on_device_or_primary()  # no public accessor in TF 2.21
    return table


class Embedding(Model):
    autograph = False  # see Model.autograph
    input_shape = (None,)  # one row id per feature; as many features as the data has
    input_dtype = tf.int32
    num_classes = 2

    def build(self) -> None:
        rows, width = self.sizes["rows"], self.sizes["width"]
        self.width = width
        self.table = self.variable("embedding", self._rng.uniform(-INIT_SCALE, INIT_SCALE, size=(rows, width)))
        self.w1 = self.he_normal("tower_w", (width, HIDDEN), width)
        self.b1 = self.zeros("tower_b", (HIDDEN,))
        self.w2 = self.he_normal("click_w", (HIDDEN, self.num_classes), HIDDEN)
        self.b2 = self.zeros("click_b", (self.num_classes,))

    def lookup(self, unique_ids: tf.Tensor) -> tf.Tensor:
        if isinstance(self.table, PartitionedVariable):
            # pieces split along rows in order: TensorFlow's "div" partition strategy
            return tf.nn.embedding_lookup(list(self.table), unique_ids)
        return own_copy(self.table).sparse_read(unique_ids)

    def logits(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        unique, where = tf.unique(tf.reshape(x, [-1]))
        vectors = tf.gather(self.lookup(unique), where)
        pooled = tf.reduce_sum(tf.reshape(vectors, [tf.shape(x)[0], tf.shape(x)[1], self.width]), axis=1)
        pooled = tf.cast(pooled, self.w1.dtype)  # the table stays float32 (rows cast once read); the tower computes
        hidden = tf.nn.relu(tf.matmul(pooled, self.w1) + self.b1)
        return tf.matmul(hidden, self.w2) + self.b2

    @property
    def tables(self) -> list[tf.Variable]:
        return list(self.table) if isinstance(self.table, PartitionedVariable) else [self.table]

    @property
    def row_bytes(self) -> int:
        return 4 * self.width
