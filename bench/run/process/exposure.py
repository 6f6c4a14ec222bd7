"""run.json's "exposure": the communication the compute did not hide, tensor by tensor, from the
traced steps (bench.run.process.tracing) by bench.metrics.exposed_by_tensor, beside the step split
of the same steps (they are stamped too)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from bench.metrics import exposed_by_tensor
from bench.run.process import tracing

LISTED = 20  # tensors listed by name, the most exposed first; the rest are counted


def summarize(run_dir: Path, parts: pd.DataFrame, strategy: dict[str, Any],
              last_ready: dict[int, float]) -> dict[str, Any]:
    """Per tensor (and exchange phase) its mean exposed seconds a traced step, their sum, and the
    split's communication, waiting and other of the same steps; or why nothing was traced.
    `last_ready`: per local step, the epoch second the last worker's gradients were ready (its
    stamps), where a collective part's exposed time begins."""
    if not strategy.get("traces_exchange"):
        return {"traced": False, "why": strategy.get("exchange_trace") or "the strategy traces no exchange"}
    traces = tracing.read_all(run_dir)
    rows = [(trace["worker"], step) for trace in traces for step in trace["steps"]]
    if not rows:
        said = next((t["source"] for t in traces if t["source"].startswith("not traced")), None)
        return {"traced": False, "why": said or ("no traced step was complete (a warm-up shorter than "
                                                 f"{tracing.TRACED_STEPS + 2} steps traces none)")}
    per_tensor: dict[tuple[str, str], dict[str, Any]] = {}
    charged: dict[tuple[str, str], float] = defaultdict(float)
    for _, step in rows:
        for ph in step["phases"]:
            tensors = {t["name"]: t for t in ph["tensors"]}
            sizes = {name: t.get("bytes", 0.0) for name, t in tensors.items()}
            done = {name: t["done_s"] for name, t in tensors.items()}
            starts = {name: t["start_s"] for name, t in tensors.items() if t.get("start_s") is not None}
            after = last_ready.get(step["local_step"], ph["after_s"]) if ph.get("collective") else ph["after_s"]
            for name, seconds in exposed_by_tensor(done, after, sizes, starts).items():
                key = (name, ph["phase"])
                charged[key] += seconds
                per_tensor[key] = {"name": name, "phase": ph["phase"], "bytes": sizes[name],
                                   **({"ps_task": tensors[name]["ps_task"]} if "ps_task" in tensors[name] else {})}
    tensors = sorted(({**per_tensor[k], "exposed_s": v / len(rows)} for k, v in charged.items()),
                     key=lambda t: -t["exposed_s"])
    total = sum(t["exposed_s"] for t in tensors)
    out: dict[str, Any] = {
        "traced": True, "source": traces[0]["source"],
        "traced_steps": {str(trace["worker"]): [s["local_step"] for s in trace["steps"]] for trace in traces},
        "exposed_communication_s": total,
        "tensors": [{**t, "share": t["exposed_s"] / total if total else 0.0} for t in tensors[:LISTED]],
        "tensors_not_listed": max(0, len(tensors) - LISTED),
    }
    by_task = _by_ps_task(tensors)
    if by_task:
        out["exposed_by_ps_task_s"] = by_task
    out.update(_split_of(parts, rows))
    return out


def last_ready(steps: pd.DataFrame, run_start_epoch_s: float | None) -> dict[int, float]:
    """Per local step, the epoch second its last worker's gradients were ready (steps.csv's ready_s,
    on the run's clock), for the steps whose stamps recorded it."""
    if run_start_epoch_s is None or "ready_s" not in steps or steps["ready_s"].isna().all():
        return {}
    ready = steps.dropna(subset=["ready_s"]).groupby("local_step")["ready_s"].max()
    return {int(k): float(v) + run_start_epoch_s for k, v in ready.items()}


def _by_ps_task(tensors: list[dict[str, Any]]) -> dict[str, float]:
    tasks: dict[str, float] = defaultdict(float)
    for t in tensors:
        if "ps_task" in t:
            tasks[str(t["ps_task"])] += t["exposed_s"]
    return dict(tasks)


def _split_of(parts: pd.DataFrame, rows: list[tuple[int, dict[str, Any]]]) -> dict[str, float]:
    """The step split's parts (means) over the traced steps' rows, to hold the sum against."""
    keys = pd.DataFrame([(worker, step["local_step"]) for worker, step in rows], columns=["worker", "local_step"])
    same = parts.merge(keys, on=["worker", "local_step"])
    if same.empty:
        return {}
    return {f"split_{part}": float(same[part].mean())
            for part in ("communication_s", "waiting_s", "other_s", "step_s")}
