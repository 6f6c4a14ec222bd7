"""allreduce-tf: the allreduce job through TensorFlow's own MultiWorkerMirroredStrategy
(ring collectives over gRPC), one process per worker with a TF_CONFIG each; for
comparing Horovod with TensorFlow's native allreduce, or where Horovod is missing."""

from __future__ import annotations

from bench.config import RunConfig
from bench.errors import UsageError
from bench.metrics import Gradient, sparse_allreduce_bytes
from bench.run.contract import ALLREDUCE, GRPC, SparseExchange, Strategy, TfCluster


class AllreduceTF(Strategy):
    name = "allreduce-tf"
    description = "tf.distribute.MultiWorkerMirroredStrategy, ring collectives over gRPC"
    worker = "strategies.workers.allreduce_tf:AllreduceTFWorker"
    family = ALLREDUCE
    xla = True  # its replicas' gradients: strategies.workers.gradient_step.gradients
    checkpoints = True
    runs_as = TfCluster
    # Keras 3's optimizer under a tf.distribute strategy reduces every gradient in one all_reduce call
    # (keras/src/backend/tensorflow/optimizer.py, _all_reduce_sum_gradients, 3.15.1), which TensorFlow
    # packs whole when CommunicationOptions.bytes_per_pack is 0 (cross_device_utils.group_by_size, 2.21)
    exchange_overlaps_backward = False
    exchange_trace = ("not traced per tensor: every gradient goes in one packed collective after the backward pass "
                      "(above), so its exposed communication is that one collective, the split's communication")

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        if config.ps_hosts:
            raise UsageError("--strategy allreduce-tf has no ps tasks; drop --ps-hosts")

    @classmethod
    def wire(cls, config: RunConfig) -> str | None:
        return GRPC  # its ring collectives' messages

    @classmethod
    def nccl_on_gpus(cls, config: RunConfig) -> bool:
        return True  # its worker's choice among GPUs (strategies/workers/allreduce_tf.py)

    @classmethod
    def collective(cls, config: RunConfig, role: str, on_gpus: bool) -> str:
        # the worker's own choice (strategies/workers/allreduce_tf.py): NCCL among GPUs, else the ring over gRPC
        return f"MultiWorkerMirroredStrategy, {'NCCL' if on_gpus else 'RING over gRPC'}"

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        ring = sparse_allreduce_bytes(gradient, config.workers)
        return {"worker": (ring, ring)}

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        return SparseExchange("all-gather of the touched rows (TensorFlow's collectives)")
