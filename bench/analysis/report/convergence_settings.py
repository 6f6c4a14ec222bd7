"""The convergence runs of one machine folded per strategy (repeats are seeds), as the time-to-accuracy answer
(bench.analysis.report.convergence_answer) and the report's verdicts (verdict.Verdicts.convergence) read them.
It imports nothing of the report, so a report's verdicts can fold it once."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

REACHED, NOT_REACHED, SOME = "reached", "not reached", "some seeds"
KEY = ["model", "data", "workers", "variant"]


def on_one_machine(runs: pd.DataFrame) -> pd.DataFrame:
    """The convergence runs that ended ok on uncapped links."""
    if runs.empty or "purpose" not in runs:
        return runs.iloc[0:0]
    mine = runs[(runs["purpose"] == "convergence") & runs["ok"].astype(bool)]
    if "link_mbit" in mine:
        mine = mine[mine["link_mbit"].isna()]
    return mine


def strategies(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model, data, workers and variant: its seeds, how many reached the target, their mean time
    and steps to it, the log spread of that time over the seeds that reached it, and the mean best accuracy."""
    mine = on_one_machine(runs)
    if mine.empty:
        return pd.DataFrame()
    rows = []
    for key, group in mine.groupby(KEY, sort=False):
        reached = group[group["time_to_target_s"].notna()]
        times = np.log(reached["time_to_target_s"].clip(lower=1e-9).to_numpy(float))
        n, k = len(group), len(reached)
        rows.append({**dict(zip(KEY, key, strict=True)), "family": group["family"].iloc[0], "seeds": n,
                     "reached": k, "status": REACHED if k == n else NOT_REACHED if k == 0 else SOME,
                     "time_to_target_s": float(np.exp(times.mean())) if k else math.nan,
                     "log_sd": float(times.std(ddof=1)) if k > 1 else math.nan,
                     "steps_to_target": float(reached["steps_to_target"].mean()) if k else math.nan,
                     "best_accuracy": float(group["best_accuracy"].mean()),
                     "target_accuracy": float(group["target_accuracy"].iloc[0])})
    return pd.DataFrame(rows)


