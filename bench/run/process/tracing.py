"""Which of a worker's steps trace their exchange per tensor, and the trace's file.

Its own module, without pandas or TensorFlow: every worker imports it. A traced step costs
more than a plain one (a Horovod timeline written, or TensorFlow's full trace of the step), so
the traced steps are the last TRACED_STEPS of the warm-up, never measured ones; they are also
stamped, so that the step split of the same steps stands beside the trace
(bench.run.process.exposure compares the two)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Three steps: the per-tensor figures are their mean, and a step's trace is long enough to need
# no more; a run with fewer than TRACED_STEPS + 2 warm-up steps traces none (its first steps
# build functions and broadcast the weights, not the exchange of a training step).
TRACED_STEPS = 2 + 1
TRACE_PREFIX = "exchange-trace-worker"


def traced_steps(warmup_steps: int, first_local_step: int = 0) -> range:
    """The local steps a worker traces: the last TRACED_STEPS of its warm-up (empty when the
    warm-up is too short to hold them after its first two steps)."""
    if warmup_steps < TRACED_STEPS + 2:
        return range(0)
    end = first_local_step + warmup_steps
    return range(end - TRACED_STEPS, end)


def phase(name: str, after_s: float, tensors: list[dict[str, Any]], collective: bool = False) -> dict[str, Any]:
    """One part of a traced step's exchange: `tensors` (each with `name`, `bytes`, `start_s` and
    `done_s`, the epoch seconds its exchange began and ended, and where it applies `ps_task`) and `after_s`, the epoch
    second from which their time counts as exposed (the end of the backward pass, or for a pull
    the step's start). A `collective` part's compute ends with the last worker's gradients: where the
    step's stamps say when (steps.csv's ready_s), bench.run.process.exposure counts from there, as the
    split does. bench.metrics.exposed_by_tensor reads it."""
    return {"phase": name, "after_s": after_s, "tensors": tensors, "collective": collective}


def write(run_dir: str | Path, worker: int, steps: list[dict[str, Any]], source: str) -> None:
    """A worker's traced steps ({"local_step", "phases": [phase(...)]}) and what traced them; with no
    steps, `source` says why nothing was ("not traced: ...")."""
    path = Path(run_dir) / f"{TRACE_PREFIX}{worker}.json"
    path.write_text(json.dumps({"worker": worker, "source": source, "steps": steps}))


def read_all(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every worker's trace file in a run folder."""
    return [json.loads(p.read_text()) for p in sorted(Path(run_dir).glob(f"{TRACE_PREFIX}*.json"))]
