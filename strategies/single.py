"""single: one process, one device, a tf.function training step. The baseline of
every scaling-efficiency figure, so it adds nothing to a bare training loop."""

from strategies.base import Strategy


class Single(Strategy):
    name = "single"
    description = "one process, one device: the baseline"
    worker = "strategies.workers.single:SingleWorker"
    worker_range = (1, 1)
