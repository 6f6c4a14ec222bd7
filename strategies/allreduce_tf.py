"""allreduce-tf: the allreduce job through TensorFlow's own MultiWorkerMirroredStrategy
(ring collectives over gRPC), one process per worker with a TF_CONFIG each; for
comparing Horovod with TensorFlow's native allreduce, or where Horovod is missing."""

from __future__ import annotations

from bench.config import RunConfig
from bench.errors import UsageError
from bench.metrics import ring_allreduce_bytes
from strategies.base import ALLREDUCE, TF_CLUSTER, Strategy


class AllreduceTF(Strategy):
    name = "allreduce-tf"
    description = "tf.distribute.MultiWorkerMirroredStrategy, ring collectives over gRPC"
    worker = "strategies.workers.allreduce_tf:AllreduceTFWorker"
    family = ALLREDUCE
    launch = TF_CLUSTER

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        if config.ps_hosts:
            raise UsageError("--strategy allreduce-tf has no ps tasks; drop --ps-hosts")

    @classmethod
    def traffic(cls, config: RunConfig, gradient_bytes: int) -> dict[str, tuple[float, float]]:
        ring = ring_allreduce_bytes(gradient_bytes, config.workers)
        return {"worker": (ring, ring)}
