"""mirrored: the multi-tower job through tf.distribute.MirroredStrategy, on the same
devices and the same global batch, so the hand-built towers can be compared with
TensorFlow's own."""

from bench.config import RunConfig
from bench.run.contract import SparseExchange
from strategies._towers import TowerStrategy


class Mirrored(TowerStrategy):
    name = "mirrored"
    description = "tf.distribute.MirroredStrategy over the same towers"
    worker = "strategies.workers.mirrored:MirroredWorker"

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        return SparseExchange("TensorFlow's ReductionToOneDevice (touched rows concatenated)")
