"""What the two in-graph strategies (multi-tower, mirrored) share: their options,
device set-up, and slicing one global batch into per-tower batches."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from bench import devices
from bench.config import RunConfig
from bench.errors import UsageError
from bench.options import Option, flag_bool

VARIABLE_DEVICE = Option("variable_device", str, "cpu", "multi-tower/mirrored: where variables live (cpu|gpu0)",
                         choices=("cpu", "gpu0"))
GPU_MEMORY_FRACTION = Option("gpu_memory_fraction", float, None,
                             "fraction of each GPU's memory TensorFlow may take (recorded on CPU)",
                             check=lambda f: None if 0 < f <= 1 else "must be in (0, 1]")
ALLOW_GROWTH = Option("allow_growth", flag_bool, False, "grow GPU memory as needed (true|false)")
TOWER_OPTIONS = (VARIABLE_DEVICE, GPU_MEMORY_FRACTION, ALLOW_GROWTH)


def validate_towers(config: RunConfig) -> None:
    if config.multi_host:
        raise UsageError(f"--strategy {config.strategy} runs on one machine; drop --worker-hosts/--ps-hosts")


def configure(config: RunConfig) -> dict[str, Any]:
    return devices.configure(config.workers, config.option("gpu_memory_fraction"), config.option("allow_growth"))


def tower_slice(x: tf.Tensor, index: tf.Tensor | int, per_tower: int) -> tf.Tensor:
    """Rows [index*b, (index+1)*b) of the global batch: tower i's share."""
    return x[index * per_tower : (index + 1) * per_tower]
