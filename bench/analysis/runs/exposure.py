"""A run's per-tensor exposed communication (run.json's summary "exposure",
bench.run.process.exposure) as the report's columns: the tensors that added most, with their
sizes and the time each added, and the ps task that held most of it."""

from __future__ import annotations

from typing import Any

from bench.analysis.runs.formats import fmt
from bench.metrics import significant

NAMED = 3  # tensors named in a row's text and in the "why" sentence


def exposure_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """exposed_traced_s (the traced steps' per-tensor sum), exposed_tensors (the NAMED largest,
    'name phase size +ms'), exposed_top_share (their share of the sum) and exposed_ps_task (the ps task
    holding the largest share, 'task k: p %'); None where the run traced nothing."""
    exposure = summary.get("exposure") or {}
    tensors = [t for t in exposure.get("tensors", []) if t["exposed_s"] > 0][:NAMED]
    total = exposure.get("exposed_communication_s")
    if not exposure.get("traced") or not tensors or not total:
        return {"exposed_traced_s": total if exposure.get("traced") else None,
                "exposed_tensors": None, "exposed_top_share": None, "exposed_ps_task": None}
    text = "; ".join(f"{t['name']} {t['phase']} {fmt(t['bytes'], 'bytes')} +{significant(1e3 * t['exposed_s'])} ms"
                     for t in tensors)
    tasks = exposure.get("exposed_by_ps_task_s") or {}
    busiest = max(tasks, key=tasks.get) if tasks else None
    return {"exposed_traced_s": total, "exposed_tensors": text,
            "exposed_top_share": sum(t["exposed_s"] for t in tensors) / total,
            "exposed_ps_task": (f"task {busiest}: {100 * tasks[busiest] / total:.0f} %"
                                if busiest is not None else None)}
