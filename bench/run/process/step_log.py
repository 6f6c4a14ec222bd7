"""A worker's steps.csv rows, kept in memory as the steps run and written every FLUSH_S
seconds in one write (and when the worker stops, fails or is killed on purpose).

Per step the harness only reads the clock twice and appends to a list: the loss stays
whatever the strategy returned (a tensor, not read back until the flush, so no host sync
per step) and a stamped step's time split is worked out at the flush. A crash loses at most
the last FLUSH_S of rows; the supervisor's stall detection sees steps.csv grow at every flush.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.run.contract import StepResult, StepTimes
from bench.run.process.records import CsvAppender

FLUSH_S = 0.5


@dataclass
class Written:
    """What the last flush wrote, for the progress line and TensorBoard."""

    global_step: int
    loss: float
    examples_per_s: float
    mean_loss: float
    step_time_s: float  # the median of the rows'
    staleness_steps: float | None  # the mean, where the strategy records it


class StepLog:
    def __init__(self, writer: CsvAppender, run_id: str, worker: int, run_start: float) -> None:
        self.writer = writer
        self.run_id = run_id
        self.worker = worker
        self.prefix = f"{run_id},{worker},"
        self.run_start = run_start  # ready_s is written relative to it (epoch seconds)
        self.pending: list[tuple[int, float, float, StepResult, float]] = []
        self.next_flush = 0.0

    def add(self, local_step: int, t_start: float, t_end: float, result: StepResult, slept: float = 0.0) -> None:
        """One step; `slept`: an injected straggler's sleep, which stands for slower compute. A step
        that ran on another worker (result.ran_on) is recorded as that worker's, with its span."""
        ran_on = result.ran_on
        if ran_on is not None:
            local_step, t_start, t_end = ran_on.local_step, ran_on.began - self.run_start, ran_on.ended - self.run_start
        self.pending.append((local_step, t_start, t_end, result, slept))

    def due(self, now: float) -> bool:
        return now >= self.next_flush

    def flush(self, now: float) -> Written | None:
        """Write the pending rows; None if there were none."""
        self.next_flush = now + FLUSH_S
        if not self.pending:
            return None
        pending, self.pending = self.pending, []
        losses = read_losses([p[3].loss for p in pending])
        self.writer.write_text("".join(self._row(*p, loss) for p, loss in zip(pending, losses, strict=True)))
        first, last = pending[0], pending[-1]
        span = max(last[2] - first[1], 1e-9)
        times = sorted(p[2] - p[1] for p in pending)
        stale = [p[3].staleness for p in pending if p[3].staleness is not None]
        return Written(last[3].global_step, losses[-1], sum(p[3].examples for p in pending) / span,
                       sum(losses) / len(losses), times[len(times) // 2],
                       sum(stale) / len(stale) if stale else None)

    def _row(self, local_step: int, t_start: float, t_end: float, result: StepResult, slept: float,
             loss: float) -> str:
        """One line of steps.csv (records.STEP_COLUMNS), formatted in one go: at hundreds of
        rows a second, a function call per field was a visible part of a short step."""
        staleness, applied, arrival = result.staleness, result.applied, result.arrival
        exchange = (",," if staleness is None and applied is None and arrival is None else
                    f"{_text(staleness)},{'' if applied is None else int(applied)},{_text(arrival)}")
        prefix = self.prefix if result.ran_on is None else f"{self.run_id},{result.ran_on.worker},"
        head = (f"{prefix}{local_step},{result.global_step},{t_start!r},{t_end!r},{result.examples},"
                f"{loss!r},{exchange}")
        if result.times is None:
            return head + ",,,,\n"
        times: StepTimes = result.times() if callable(result.times) else result.times
        ready = times.ready_at and times.ready_at - self.run_start
        return (f"{head},{_text(times.compute_s + slept)},{_text(times.exchange_s)},{_text(times.waiting_s)},"
                f"{_text(ready)}\n")


def _text(value: float | int | None) -> str:
    """A field: empty for None, an exact float (a NumPy scalar would be written as its repr)."""
    if value is None:
        return ""
    return repr(float(value)) if not isinstance(value, int) else str(value)


# Losses in device memory are read back per op, STACK at a time: one copy per STACK steps, not
# one per step. A fixed count, padded, so that TensorFlow builds its stack kernel once: stacking
# all of a flush's losses in one op made a new kernel for every new count, ~20 ms a flush (4% of
# an mlp run on 2 cores). A loss already in host memory (a CPU run) is read in place, which is
# four times cheaper than stacking it (0.6 against 2.5 us a step).
STACK = 64


def in_host_memory(device: str) -> bool:
    return "CPU" in device


def read_losses(losses: list) -> list[float]:
    """The losses as floats."""
    out = list(losses)
    groups: dict = {}
    for i, v in enumerate(losses):
        device = getattr(v, "backing_device", None)
        if device is not None and not in_host_memory(device) and v.ndim == 0:
            groups.setdefault((v.dtype, device), []).append(i)
    for indices in groups.values():
        import tensorflow as tf

        for start in range(0, len(indices), STACK):
            part = indices[start:start + STACK]
            tensors = [losses[i] for i in part]
            tensors += tensors[-1:] * (STACK - len(part))
            for i, v in zip(part, tf.stack(tensors).numpy().tolist(), strict=False):
                out[i] = v
    return [v if isinstance(v, float) else float(v) for v in out]
