"""A ps worker's exchange per variable, from TensorFlow's own step statistics.

On a traced step the worker's session.run asks for a full trace (RunOptions(trace_level=
FULL_TRACE)); RunMetadata.step_stats then holds every node each device ran for the step, with
epoch microseconds, including the ps tasks' and the RecvTensor calls by which this worker pulled
each value from a ps task ("edge_N_<op> from /job:ps/..." in their labels). A variable's pull ends
when its value has arrived here; its push ends when its ps task has applied (ps-async) or
accumulated (ps-sync) its gradient. Pulls count from the step's start (everything before a value
arrives is exposed: the split's pull), pushes from the end of the backward pass (its last gradient
op here)."""

from __future__ import annotations

import re
from typing import Any

import tensorflow as tf

from bench.run.process import tracing
from strategies._ps import STEP_STATS_SOURCE
from strategies.workers.ps_variables import handle_bytes, ps_task

WHOLE_READ = "ReadVariableOp"
READS = (WHOLE_READ, "ResourceGather")
ACCUMULATED = "/grad_accum"  # SyncReplicasOptimizer's shared_name of a variable's gradient accumulator
RECV = re.compile(r"^\[(?P<size>[\d.]+)(?P<unit>B|KB|MB|GB)\].*?edge_\d+_(?P<op>\S+) from /job:ps")
UNITS = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30}


def _variable_of(op: tf.Operation) -> str | None:
    """The variable a ps-side op reads or updates: its variable handle input, or the variable whose
    gradient accumulator it applies to."""
    for t in op.inputs:
        source = t.op
        if source.type == "VarHandleOp":
            return source.name
        if source.type.endswith("ConditionalAccumulator"):  # dense, sparse, resource or ref
            shared = source.get_attr("shared_name").decode()
            if shared.endswith(ACCUMULATED):
                return shared[: -len(ACCUMULATED)].split(":")[0]
    return None


class StepStatsSample:
    """The traced steps' statistics of one ps worker, and its trace file from them."""

    def __init__(self, graph: tf.Graph, rank: int, gradient_ops: dict[str, str]) -> None:
        self.rank = rank
        self.gradient_ops = gradient_ops
        self.reads: dict[str, str] = {}  # a ps-side read's op name -> its variable
        self.whole_reads: set[str] = set()
        self.updates: dict[str, str] = {}  # a ps-side apply or accumulate's op name -> its variable
        self.sizes: dict[str, float] = {}
        self.tasks: dict[str, int] = {}
        operations = graph.get_operations()
        for op in operations:
            task = ps_task(op.device)
            if op.type == "VarHandleOp" and task is not None:
                self.sizes[op.name], self.tasks[op.name] = float(handle_bytes(op)), task
        for op in operations:
            # a read has no device of its own: TensorFlow places it beside its variable, on the ps task
            variable = _variable_of(op)
            if variable not in self.tasks:
                continue
            if op.type in READS:
                self.reads[op.name] = variable
                if op.type == WHOLE_READ:
                    self.whole_reads.add(op.name)
            elif "Apply" in op.type or "Scatter" in op.type:
                self.updates[op.name] = variable
        self.steps: range | None = None
        self.kept: list[tuple[int, Any]] = []

    def trace(self, steps: range | None) -> None:
        self.steps = steps

    def wanted(self) -> bool:
        return self.steps is not None and len(self.kept) < len(self.steps)

    def run(self, session: Any, fetches: Any) -> Any:
        """session.run of `fetches` with a full trace, its statistics kept."""
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        metadata = tf.compat.v1.RunMetadata()
        out = session.run(fetches, options=options, run_metadata=metadata)
        self.kept.append((self.steps[len(self.kept)], metadata.step_stats))
        return out

    def write(self, run_dir: str | None) -> None:
        if run_dir and self.kept:
            tracing.write(run_dir, self.rank, [self.step(k, stats) for k, stats in self.kept], STEP_STATS_SOURCE)

    def step(self, local_step: int, stats: Any) -> dict[str, Any]:
        """One traced step's pull and push phases (bench.run.process.tracing.phase)."""
        mine = f"/job:worker/replica:0/task:{self.rank}/"
        start_us, backward_end_us = None, 0
        ready: dict[str, float] = {}  # a variable's gradient computed here: its push begins
        pulls: dict[str, dict[str, Any]] = {}
        pushes: dict[str, dict[str, Any]] = {}
        for device in stats.dev_stats:
            for node in device.node_stats:
                began, end_us = node.all_start_micros, node.all_start_micros + node.all_end_rel_micros
                if device.device.startswith(mine):
                    start_us = min(start_us or began, began)
                    if node.node_name in self.gradient_ops:
                        backward_end_us = max(backward_end_us, end_us)
                        ready[self.gradient_ops[node.node_name]] = end_us / 1e6
                    pulled = RECV.match(node.timeline_label)
                    if pulled and pulled.group("op") in self.reads:
                        variable = self.reads[pulled.group("op")]
                        # a whole variable's size from the graph; a table's gathered rows from the label
                        size = (self.sizes[variable] if pulled.group("op") in self.whole_reads
                                else float(pulled.group("size")) * UNITS[pulled.group("unit")])
                        pulls[variable] = self._tensor(variable, began / 1e6, end_us / 1e6, size, pulls.get(variable))
                elif node.node_name in self.updates:
                    variable = self.updates[node.node_name]
                    pushes[variable] = self._tensor(variable, None, end_us / 1e6, self.sizes.get(variable, 0.0),
                                                    pushes.get(variable))
        for variable, push in pushes.items():
            push["start_s"] = ready.get(variable, backward_end_us / 1e6)
        return {"local_step": local_step, "phases": [
            tracing.phase("pull", (start_us or 0) / 1e6, list(pulls.values())),
            tracing.phase("push", backward_end_us / 1e6, list(pushes.values()))]}

    def _tensor(self, variable: str, start: float | None, done: float, size: float,
                before: dict[str, Any] | None) -> dict[str, Any]:
        """A variable's part of a phase; a variable moved in pieces (a table's rows, an update in
        several ops) runs from its first piece's start to its last one's end."""
        if before:
            starts = [s for s in (before["start_s"], start) if s is not None]
            return {**before, "start_s": min(starts) if starts else None, "done_s": max(before["done_s"], done),
                    "bytes": before["bytes"] + size}
        return {"name": variable, "bytes": size, "start_s": start, "done_s": done, "ps_task": self.tasks.get(variable)}
