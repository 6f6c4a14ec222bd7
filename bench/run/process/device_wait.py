"""What ends a timed step on the device's completion. On a GPU, an eager op or a `tf.function` call returns once
its kernels are queued on the device's stream, so a clock read then measures the launch, not the step; a
`session.run` (graph mode: the parameter-server strategies) returns once its fetches and targets are computed.
So every timed step of a process that runs eagerly and sees a GPU ends with `tf.test.experimental.sync_devices()`
(TensorFlow's own wait for every device's pending work, made for benchmarks), and the step's t_end is read after
it: each step's time, and so each window's, includes the device's work (docs/results.md)."""

from __future__ import annotations

from collections.abc import Callable


def device_wait() -> Callable[[], None] | None:
    """The wait that ends a step on this process's devices, or None where a step's return already means its work
    is done (no GPU: CPU ops run synchronously; graph mode: session.run waits)."""
    import tensorflow as tf

    if not tf.executing_eagerly() or not tf.config.list_logical_devices("GPU"):
        return None
    return tf.test.experimental.sync_devices
