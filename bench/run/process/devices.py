"""Devices for in-graph replication: the machine's GPUs, or the CPU split into
logical devices. Must run before TensorFlow initialises its runtime."""

from __future__ import annotations

import tensorflow as tf

from bench.errors import RunFailed
from bench.run.process.environment import gpu_memory_mb


def configure(towers: int, gpu_memory_fraction: float | None = None, allow_growth: bool = False) -> dict:
    """Prepare `towers` devices; returns what was done, for run.json."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return _configure_gpus(gpus, gpu_memory_fraction, allow_growth)
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu) or []
    if len(current) < towers:
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * towers)
        except RuntimeError as exc:
            raise RunFailed(f"need {towers} logical CPU devices but TensorFlow already started with "
                            f"{max(1, len(current))}: {exc}") from exc
    return {"kind": "cpu", "logical_cpu_devices": max(towers, len(current)),
            "gpu_options": {"gpu_memory_fraction": gpu_memory_fraction, "allow_growth": allow_growth,
                            "applied": False, "why": "no GPU found"}}


def _configure_gpus(gpus: list, fraction: float | None, allow_growth: bool) -> dict:
    totals = gpu_memory_mb()
    for i, gpu in enumerate(gpus):
        if allow_growth:
            tf.config.experimental.set_memory_growth(gpu, True)
        elif fraction is not None and i < len(totals):
            limit = int(totals[i] * fraction)
            tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(limit)])
    return {"kind": "gpu", "gpus": len(gpus),
            "gpu_options": {"gpu_memory_fraction": fraction, "allow_growth": allow_growth, "applied": True}}


def tower_devices(towers: int) -> list[str]:
    """Device names for `towers` towers: /gpu:i when there are GPUs, else /cpu:i."""
    gpus = tf.config.list_logical_devices("GPU")
    pool = gpus if gpus else tf.config.list_logical_devices("CPU")
    if len(pool) < towers:
        raise RunFailed(f"{towers} towers need {towers} devices; TensorFlow sees {len(pool)}")
    return [d.name for d in pool[:towers]]


def parameter_device(choice: str) -> str:
    """Where the variables live: the host CPU (the seed's choice) or the first GPU."""
    if choice == "gpu0" and tf.config.list_logical_devices("GPU"):
        return tf.config.list_logical_devices("GPU")[0].name
    return tf.config.list_logical_devices("CPU")[0].name
