"""Where each worker's step time went, by the step split bench.metrics defines (STEP_PARTS,
split_steps): breakdown.csv and run.json's "breakdown". Which steps are stamped:
bench.run.process.stamping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.metrics import STEP_PARTS as PARTS

BREAKDOWN_FILE = "breakdown.csv"
COLUMNS = ("worker", "local_step", "step_s", *PARTS)


def write(run_dir: Path, parts: pd.DataFrame) -> None:
    parts.to_csv(run_dir / BREAKDOWN_FILE, index=False, columns=list(COLUMNS))


def summarize(parts: pd.DataFrame, synchronous: bool = False) -> dict[str, Any]:
    """run.json's "breakdown": per worker p50/p95 of each part, the share of step time the
    stamps do not account for, and the slowest worker (largest median compute) and by how
    much its median compute exceeds the median of the others'; for a `synchronous` run, also
    what that worker cost the others (slowest_cost)."""
    if parts.empty:
        return {}
    per_worker: dict[str, Any] = {}
    for worker, rows in parts.groupby("worker"):
        per_worker[str(worker)] = {
            part.removesuffix("_s"): {"p50_s": float(rows[part].quantile(0.5)),
                                      "p95_s": float(rows[part].quantile(0.95))}
            for part in ("step_s", *PARTS)}
    out: dict[str, Any] = {
        "per_worker": per_worker,
        "unattributed_share": float((parts["other_s"] / parts["step_s"]).median()),
    }
    medians = parts.groupby("worker")[["step_s", "compute_s", "waiting_s"]].median()
    compute = medians["compute_s"]
    if len(compute) > 1:
        slowest = int(compute.idxmax())
        others = float(compute.drop(slowest).median())
        out["slowest_worker"] = slowest
        out["slowest_compute_ratio"] = float(compute[slowest] / others) if others > 0 else None
        if synchronous:
            out.update(slowest_cost(medians, slowest))
    return out


def slowest_cost(medians: pd.DataFrame, slowest: int) -> dict[str, float]:
    """What the slowest worker cost a synchronous run, from each worker's medians: another worker
    waited for it, each step, what it waited in all up to how much longer the slowest computed than
    the next slowest (`waiting_caused_s`, summed over the others: a backup worker's run that does not
    wait for it shows the others' ordinary wait only). Without it, every other worker's step is that
    much shorter and the slowest one steps at their median pace: the run's examples/s grow as the
    workers' steps per second do (`speedup_without_slowest`)."""
    compute = medians["compute_s"]
    excess = max(0.0, float(compute[slowest] - compute.drop(slowest).max()))
    others = medians.drop(slowest)
    caused = others["waiting_s"].clip(upper=excess)
    without = others["step_s"] - caused
    pace = float(without.median())
    if pace <= 0:
        return {"waiting_caused_s": float(caused.sum())}
    now = float((1 / medians["step_s"]).sum())
    then = float((1 / without).sum() + 1 / pace)
    return {"waiting_caused_s": float(caused.sum()), "speedup_without_slowest": then / now}


def p50_column(part: str) -> str:
    """The report's column of a part's median (compute_s -> compute_p50_s)."""
    return f"{part.removesuffix('_s')}_p50_s"


def typical_worker(summary: dict[str, Any]) -> dict[str, float | None]:
    """From run.json's "breakdown": each part's median seconds, averaged over the workers
    (the report's columns, p50_column)."""
    workers = list((summary or {}).get("per_worker", {}).values())
    return {p50_column(part):
            float(np.mean([w[part.removesuffix("_s")]["p50_s"] for w in workers])) if workers else None
            for part in PARTS}


def per_worker_medians(run_dir: Path, warmup_steps: int) -> pd.DataFrame:
    """Each worker's median seconds of each part over its measured steps (breakdown.csv)."""
    path = run_dir / BREAKDOWN_FILE
    if not path.is_file():
        return pd.DataFrame(columns=PARTS)
    parts = pd.read_csv(path)
    parts = parts[parts["local_step"] >= warmup_steps]
    return parts.groupby("worker")[list(PARTS)].median()
