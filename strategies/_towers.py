"""What the two in-graph strategies (multi-tower, mirrored) declare alike: one process
feeding the global batch to N towers on N devices of this machine."""

from __future__ import annotations

from bench.config import RunConfig
from bench.errors import UsageError
from bench.options import Option, flag_bool
from bench.run.contract import IN_GRAPH, Strategy

VARIABLE_DEVICE = Option("variable_device", str, "cpu", "multi-tower/mirrored: where variables live (cpu|gpu0)",
                         choices=("cpu", "gpu0"))
GPU_MEMORY_FRACTION = Option("gpu_memory_fraction", float, None,
                             "fraction of each GPU's memory TensorFlow may take (recorded on CPU)",
                             check=lambda f: None if 0 < f <= 1 else "must be in (0, 1]")
ALLOW_GROWTH = Option("allow_growth", flag_bool, False, "grow GPU memory as needed (true|false)")
TOWER_OPTIONS = (VARIABLE_DEVICE, GPU_MEMORY_FRACTION, ALLOW_GROWTH)


class TowerStrategy(Strategy):
    family = IN_GRAPH
    exchange_trace = "not traced per tensor: its towers exchange inside one process (the split's communication)"
    checkpoints = True
    options = TOWER_OPTIONS

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        if config.multi_host:
            raise UsageError(f"--strategy {config.strategy} runs on one machine; drop --worker-hosts/--ps-hosts")

    @classmethod
    def worker_batch(cls, config: RunConfig) -> int:
        return config.batch_size * config.workers
