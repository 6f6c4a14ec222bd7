"""Devices for in-graph replication: the machine's GPUs, or the CPU split into
logical devices. Must run before TensorFlow initialises its runtime."""

from __future__ import annotations

import tensorflow as tf

from bench.errors import RunFailed


def configure(towers: int) -> dict:
    """Prepare `towers` devices; returns what was done, for run.json. The GPUs this process sees, and their
    memory, were decided before (bench.run.placement)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return {"kind": "gpu", "gpus": len(gpus)}
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu) or []
    if len(current) < towers:
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * towers)
        except RuntimeError as exc:
            raise RunFailed(f"need {towers} logical CPU devices but TensorFlow already started with "
                            f"{max(1, len(current))}: {exc}") from exc
    return {"kind": "cpu", "logical_cpu_devices": max(towers, len(current))}


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
