"""mirrored: the multi-tower job through tf.distribute.MirroredStrategy, on the same
devices and the same global batch, so the hand-built towers can be compared with
TensorFlow's own. Its reduction is the seed's (to one parameter device) unless --reduction nccl
all-reduces the gradients across its GPU towers, as GPU users run MirroredStrategy."""

from bench.config import RunConfig
from bench.errors import UsageError
from bench.options import Option
from bench.run.contract import SparseExchange
from bench.run.placement.gpus import found_gpus, given_visible
from strategies._towers import TOWER_OPTIONS, TowerStrategy

ONE_DEVICE, NCCL = "one-device", "nccl"
REDUCTION = Option("reduction", str, ONE_DEVICE,
                   "mirrored: one-device (the seed's: the towers' gradients reduced on the variables' device) or nccl "
                   "(NCCL all-reduce across the GPU towers)", choices=(ONE_DEVICE, NCCL))


class Mirrored(TowerStrategy):
    name = "mirrored"
    description = "tf.distribute.MirroredStrategy over the same towers"
    worker = "strategies.workers.mirrored:MirroredWorker"
    options = (*TOWER_OPTIONS, REDUCTION)

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        super().validate(config)
        import os

        if config.option("reduction") == NCCL and not (found_gpus() or given_visible(os.environ)
                                                        or config.gpus_per_host):
            raise UsageError("--reduction nccl all-reduces across GPU towers, and this host has none (nvidia-smi "
                             "lists no GPU): leave it out to reduce on one device")

    @classmethod
    def nccl_on_gpus(cls, config: RunConfig) -> bool:
        return config.option("reduction") == NCCL

    @classmethod
    def collective(cls, config: RunConfig, role: str, on_gpus: bool) -> str:
        if config.option("reduction") == NCCL:
            return "NCCL all-reduce across the GPU towers (tf.distribute.NcclAllReduce)"
        return super().collective(config, role, on_gpus)

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        if config.option("reduction") == NCCL:
            return SparseExchange("NcclAllReduce (its sparse gradients gathered, not summed, by TensorFlow)")
        return SparseExchange("TensorFlow's ReductionToOneDevice (touched rows concatenated)")
