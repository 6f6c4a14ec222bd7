"""single: one process, one device, a tf.function training step. The baseline of
every scaling-efficiency figure, so it adds nothing to a bare training loop."""

from bench.config import RunConfig
from bench.run.contract import IN_GRAPH, SparseExchange, Strategy


class Single(Strategy):
    name = "single"
    baseline = True
    description = "one process, one device: the baseline"
    family = IN_GRAPH
    xla = True  # its gradients: strategies.workers.gradient_step.gradients
    checkpoints = True
    worker = "strategies.workers.single:SingleWorker"
    worker_range = (1, 1)

    @classmethod
    def gpus(cls, config: RunConfig) -> dict[str, int]:
        return {"worker": 1}

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        return SparseExchange("none (one replica)")
