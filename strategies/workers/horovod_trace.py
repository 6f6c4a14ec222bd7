"""allreduce's exchange per tensor, read from Horovod's own timeline.

Horovod's timeline (its docs, "Analyze Performance") is a Chrome trace that rank 0 writes for
every rank: per tensor a process named as the op was (`HorovodAllreduce_<op>` if not), its
NEGOTIATE_ALLREDUCE phase (ended once every rank has handed the tensor in: its gradient is ready
everywhere) and its ALLREDUCE phase (ended with the tensor's dtype and shape once it is reduced). Timestamps are
microseconds from `start_time_since_epoch_in_micros`, the epoch clock every process here reads.
Only a run with `--timeline true` has one (its cost: strategies/_horovod.py, NO_TIMELINE); the
traced steps are read from it."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.run.process import tracing
from strategies._horovod import NO_TIMELINE, TIMELINE_FILE, TIMELINE_SOURCE

OPERATIONS = ("ALLREDUCE", "ALLGATHER")  # a table's touched rows are allgathered
UNNAMED_PREFIXES = ("HorovodAllreduce_", "HorovodAllgather_")


def tensor_name(variable: Any) -> str:
    """The name a variable's gradient is reduced under (a valid op name; the timeline shows it)."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", variable.name.split(":")[0])


def read_events(path: Path) -> list[dict[str, Any]]:
    """The timeline's events; a file still open (no closing bracket yet) is read as far as it goes."""
    text = path.read_text().rstrip().rstrip(",")
    if not text:
        return []
    if not text.endswith("]"):
        text += "]"
    return json.loads(text)


def tensor_phases(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every allreduce and allgather of the timeline: {"name", "ready_s", "done_s", "bytes"}, in epoch
    seconds (a broadcast of the weights is none of them)."""
    start_us = next((e["args"]["start_time_since_epoch_in_micros"] for e in events
                     if e.get("ph") == "M" and "start_time_since_epoch_in_micros" in e.get("args", {})), None)
    if start_us is None:
        return []
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name" and "name" in e.get("args", {})}
    open_phases: dict[int, list[str]] = {}
    current: dict[int, dict[str, Any]] = {}
    out = []
    for e in events:
        pid, ph = e.get("pid"), e.get("ph")
        if ph == "B":
            open_phases.setdefault(pid, []).append(e["name"])
            continue
        stack = open_phases.get(pid)
        if ph != "E" or not stack:
            continue
        ended, at_s = stack.pop(), (start_us + e["ts"]) / 1e6
        if ended.removeprefix("NEGOTIATE_") in OPERATIONS and ended.startswith("NEGOTIATE_"):
            current[pid] = {"name": _tensor(names.get(pid, str(pid))), "ready_s": at_s}
        elif ended in OPERATIONS and pid in current:
            args = e.get("args", {})
            out.append({**current.pop(pid), "done_s": at_s, "bytes": _bytes(args.get("dtype"), args.get("shape"))})
    return out


def _tensor(process_name: str) -> str:
    """A tensor's name as reduced: given (tensor_name), or Horovod's own for an unnamed op."""
    for prefix in UNNAMED_PREFIXES:
        if process_name.startswith(prefix):
            return process_name[len(prefix):].removesuffix("_0")
    return process_name


def _bytes(dtype: str | None, shape: str | None) -> float:
    if not dtype or shape is None:
        return 0.0
    dims = [int(d) for d in re.findall(r"\d+", shape)]
    return float(np.prod(dims, dtype=float) * np.dtype(dtype).itemsize)


def traced_steps(phases: list[dict[str, Any]], spans: dict[int, tuple[float, float]]) -> list[dict[str, Any]]:
    """Each traced step whose tensors (every one the traced steps reduced) all ended inside its span
    on rank 0: one phase,
    its tensors' ends counted from the moment the last of them was ready on every rank (the
    backward pass's end on the last rank; before it the others wait, the split's waiting)."""
    within = [[p for p in phases if began <= p["done_s"] <= ended] for began, ended in spans.values()]
    expected = len({p["name"] for step in within for p in step})
    steps = []
    for local_step, step in zip(spans, within, strict=True):
        inside = {p["name"]: p for p in step}
        if not inside or len(inside) < expected:
            continue
        after = max(p["ready_s"] for p in inside.values())
        tensors = [{"name": n, "bytes": p["bytes"], "start_s": p["ready_s"], "done_s": p["done_s"]}
                   for n, p in inside.items()]
        part = tracing.phase("allreduce", after, tensors, collective=True)
        steps.append({"local_step": local_step, "phases": [part]})
    return steps


class TimelineSample:
    """Rank 0's traced steps: their spans, and the trace file from the run's timeline (`path`, None
    where the run has none)."""

    def __init__(self, run_dir: str | None, path: str | None) -> None:
        self.run_dir = run_dir
        self.path = Path(path) if path else None
        self.steps: range | None = None
        self.spans: dict[int, tuple[float, float]] = {}
        self._next = 0

    def path_for_user_launch(self) -> str:
        """Where a run started by the user's own mpirun writes its timeline (--timeline true)."""
        self.path = Path(self.run_dir) / TIMELINE_FILE
        return str(self.path)

    def trace(self, steps: range | None) -> None:
        if steps is not None:
            self.steps, self._next = steps, 0

    def timed(self, step: Any) -> Any:
        """Run `step()`; while tracing, keep its span under its local step."""
        if self.steps is None or self._next >= len(self.steps):
            return step()
        began = time.time()
        out = step()
        self.spans[self.steps[self._next]] = (began, time.time())
        self._next += 1
        return out

    def write(self, rank: int) -> None:
        """The trace file of the traced steps, or of why there are none (rank 0 holds the timeline)."""
        if not self.run_dir or rank != 0 or self.steps is None:
            return
        if self.path is None:
            tracing.write(self.run_dir, rank, [], NO_TIMELINE)
            return
        phases = tensor_phases(read_events(self.path)) if self.path.is_file() else []
        tracing.write(self.run_dir, rank, traced_steps(phases, dict(sorted(self.spans.items()))), TIMELINE_SOURCE)
