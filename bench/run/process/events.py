"""The chief's TensorBoard event files, in its run folder: `tensorboard --logdir results/`
shows every run side by side, named by its folder.

Written with TensorFlow's summary FileWriter, at the step log's flushes (every 0.5 s, not
every step: one event a flush costs nothing a step would notice) and at every evaluation.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.run.process.step_log import Written

# the tags, as TensorBoard lists them
LOSS, EXAMPLES_PER_S, STEP_TIME, STALENESS = "train/loss", "train/examples_per_s", "train/step_time_s", \
    "train/staleness_steps"
VAL_ACCURACY, VAL_LOSS = "val/accuracy", "val/loss"
FLUSH_SECS = 5  # the writer's own thread writes to disk this often (TensorBoard reloads every 5 s)


class RunEvents:
    def __init__(self, folder: Path) -> None:
        import tensorflow as tf  # here: the launcher imports this module before it may import TensorFlow

        self.tf = tf
        # FileWriter refuses to be made while eager execution is on; once made it only writes
        # protocol buffers from Python, in either mode
        with tf.Graph().as_default():
            self.writer = tf.compat.v1.summary.FileWriter(str(folder), flush_secs=FLUSH_SECS)

    def _add(self, step: int, values: dict[str, float | None]) -> None:
        v1 = self.tf.compat.v1
        summary = v1.Summary(value=[v1.Summary.Value(tag=tag, simple_value=value)
                                    for tag, value in values.items() if value is not None])
        self.writer.add_event(v1.Event(wall_time=time.time(), step=step, summary=summary))

    def train(self, written: Written) -> None:
        """What one flush wrote: the chief's mean loss, examples/s, median step time, staleness."""
        self._add(written.global_step, {LOSS: written.mean_loss, EXAMPLES_PER_S: written.examples_per_s,
                                        STEP_TIME: written.step_time_s, STALENESS: written.staleness_steps})

    def evaluation(self, global_step: int, loss: float, accuracy: float) -> None:
        self._add(global_step, {VAL_ACCURACY: accuracy, VAL_LOSS: loss})

    def close(self) -> None:
        self.writer.close()
