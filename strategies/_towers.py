"""What the two in-graph strategies (multi-tower, mirrored) share: their options,
device set-up, and slicing one global batch into per-tower batches."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench import devices
from bench.config import RunConfig
from bench.errors import UsageError
from bench.options import Option, flag_bool
from strategies._eager import EagerStrategy

VARIABLE_DEVICE = Option("variable_device", str, "cpu", "multi-tower/mirrored: where variables live (cpu|gpu0)",
                         choices=("cpu", "gpu0"))
GPU_MEMORY_FRACTION = Option("gpu_memory_fraction", float, None,
                             "fraction of each GPU's memory TensorFlow may take (recorded on CPU)",
                             check=lambda f: None if 0 < f <= 1 else "must be in (0, 1]")
ALLOW_GROWTH = Option("allow_growth", flag_bool, False, "grow GPU memory as needed (true|false)")
TOWER_OPTIONS = (VARIABLE_DEVICE, GPU_MEMORY_FRACTION, ALLOW_GROWTH)


class TowerStrategy(EagerStrategy):
    """One process feeding the global batch to N towers on N devices of this machine."""

    options = TOWER_OPTIONS

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        if config.multi_host:
            raise UsageError(f"--strategy {config.strategy} runs on one machine; drop --worker-hosts/--ps-hosts")

    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        return devices.configure(config.workers, config.option("gpu_memory_fraction"),
                                 config.option("allow_growth"))

    @classmethod
    def worker_batch(cls, config: RunConfig) -> int:
        return config.batch_size * config.workers

    def place(self) -> tuple[int, int]:
        """Choose the tower and parameter devices; returns (towers, per-tower batch)."""
        self.towers = devices.tower_devices(self.config.workers)
        self.param_device = devices.parameter_device(self.config.option("variable_device"))
        return self.config.workers, self.config.batch_size


def tower_slice(x: tf.Tensor, index: tf.Tensor | int, per_tower: int) -> tf.Tensor:
    """Rows [index*b, (index+1)*b) of the global batch: tower i's share."""
    return x[index * per_tower : (index + 1) * per_tower]
