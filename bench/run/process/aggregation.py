"""Which gradients a synchronous step averaged, decided once every worker's rows are in.

A strategy whose global step averages the first R gradients computed for it (ps-sync's
`SyncReplicasOptimizer`) declares R in its launch kind (`TfCluster.gradients_per_step`); its
workers record, for each gradient, the step it was computed for and, where arrival decides
(R != N), its order of arrival. The `applied` column of steps.csv is filled here from those
rows, after the run.
"""

from __future__ import annotations

from pathlib import Path


def mark_aggregated(steps_csv: Path, replicas: int, last_step: int) -> dict:
    """Fill `applied`: of the gradients computed for a global step, the first `replicas`
    to arrive were averaged into it, the rest dropped; none of a step never taken. Without
    arrival orders (every gradient goes into its own step), all of the steps taken. Returns
    run.json's counts of gradients applied and dropped."""
    import pandas as pd

    steps = pd.read_csv(steps_csv)
    if steps.empty:
        return {}
    taken = steps["global_step"] <= last_step
    if steps["arrival_order"].notna().any():
        taken &= steps.groupby("global_step")["arrival_order"].rank(method="first") <= replicas
    steps["applied"] = taken.astype(int)
    tmp = steps_csv.with_suffix(".tmp")
    steps.to_csv(tmp, index=False)
    tmp.replace(steps_csv)
    per_step = steps[steps["applied"] == 1].groupby("global_step").size()
    return {"gradients": int(len(steps)), "gradients_applied": int(steps["applied"].sum()),
            "gradients_dropped": int(len(steps) - steps["applied"].sum()),
            "aggregated_per_step_min": int(per_step.min()), "aggregated_per_step_max": int(per_step.max())}
