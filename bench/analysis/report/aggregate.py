"""Figures across runs: scaling efficiency, repeats folded into one setting with their
spread, the best strategy per model and worker count, and ratios to a baseline."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bench.analysis.runs.collect import DECLARED, GROUP_KEY
from bench.metrics import mean_and_ci95, scaling_efficiency

MATCH_KEY = ["purpose", "strategy", "model", "data", "workers", "batch_size"]
# the split of a step (bench.run.process.breakdown), median seconds per step of a typical worker
SPLIT = {"compute_p50_s": "compute", "communication_p50_s": "communication", "waiting_p50_s": "waiting",
         "other_p50_s": "host time outside the graph"}


def add_scaling_efficiency(runs: pd.DataFrame) -> pd.DataFrame:
    """Scaling efficiency of every run against the median 1-worker throughput of the baseline
    strategy (the one that declares itself so) on the same model, data and per-worker batch."""
    runs = runs.copy()
    base = baseline_throughput(runs)

    def efficiency(row: pd.Series) -> float:
        key = (row["model"], row["data"], row["batch_size"])
        if not row["ok"] or key not in base.index or pd.isna(row["throughput_examples_per_s"]):
            return math.nan
        return scaling_efficiency(row["throughput_examples_per_s"], int(row["workers"]), float(base[key]))

    runs["scaling_efficiency"] = runs.apply(efficiency, axis=1) if len(runs) else []
    return runs


def baseline_throughput(runs: pd.DataFrame) -> pd.Series:
    """Median throughput of the ok 1-worker baseline runs, by (model, data, batch_size). The
    default comparison runs it three times (bench.drivers.presets.matrix.BASELINE_REPEATS), and one
    disturbed process moves a mean, not the median: cnn's three once gave 1,611, 2,451 and 2,871
    examples/s on the project's 2-core machine (the first uniformly slow, its p50 step 39 ms
    against 24 and 22)."""
    ok = runs[runs["ok"] & runs["scaling_baseline"].fillna(False).astype(bool) & (runs["workers"] == 1)]
    return ok.groupby(["model", "data", "batch_size"])["throughput_examples_per_s"].median()


def windows_share(group: pd.DataFrame) -> float:
    """A setting's runs' own 95 % intervals over their time windows as a share of its mean: a mean of n runs, each
    known to its windows' share, is known to the root mean square share over root n (0 where none is known)."""
    shares = group["throughput_ci95_examples_per_s"] / group["throughput_examples_per_s"]
    return math.sqrt(float(np.nanmean(shares**2)) / len(shares)) if shares.notna().any() else 0.0


def settings(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per setting (repeats folded): mean throughput and a 95% interval over the
    repeats when there are several, else the single run's own interval; and its runs' windows share."""
    ok = runs[runs["ok"]]
    rows = []
    for key, group in ok.groupby(GROUP_KEY, dropna=False):
        values = group["throughput_examples_per_s"].dropna().to_numpy()
        positive = values[values > 0]
        if len(values) >= 2:
            mean, half = mean_and_ci95(values)
            spread = "95% CI over repeats"
        else:
            mean = float(values[0]) if len(values) else math.nan
            half = float(group["throughput_ci95_examples_per_s"].iloc[0]) \
                if len(values) and pd.notna(group["throughput_ci95_examples_per_s"].iloc[0]) else math.nan
            spread = "95% CI over time windows of the run"
        rows.append({**dict(zip(GROUP_KEY, key, strict=True)),
                     **{c: group[c].iloc[0] for c in DECLARED if c in group}, "repeats": len(group),
                     "throughput_examples_per_s": mean, "throughput_ci95_examples_per_s": half,
                     "windows_share": windows_share(group),
                     "spread": spread, "log_sd": float(np.std(np.log(positive), ddof=1)) if len(positive) > 1
                     else math.nan, "scaling_efficiency": float(np.nanmean(group["scaling_efficiency"]))
                     if group["scaling_efficiency"].notna().any() else math.nan,
                     "step_time_p50_s": float(group["step_time_p50_s"].mean()),
                     **{part: float(group[part].mean()) if part in group and group[part].notna().any() else math.nan
                        for part in (*SPLIT, "mfu", "achieved_tflops")}})
    return pd.DataFrame(rows)


def overlaps_best(best: pd.Series, other: pd.Series) -> bool:
    """Whether `other`'s 95% interval reaches `best`'s (an unknown interval counts as zero width)."""
    def half(row: pd.Series) -> float:
        value = row["throughput_ci95_examples_per_s"]
        return 0.0 if pd.isna(value) else float(value)

    return other["throughput_examples_per_s"] + half(other) >= best["throughput_examples_per_s"] - half(best)


def add_baseline(runs: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """`throughput_vs_baseline`: this run's throughput / the baseline's mean for the same setting."""
    runs = runs.copy()
    ok = baseline[baseline["ok"]] if "ok" in baseline else baseline
    means = ok.groupby(MATCH_KEY)["throughput_examples_per_s"].mean()

    def ratio(row: pd.Series) -> float:
        key = tuple(row[k] for k in MATCH_KEY)
        if key not in means.index or not row["ok"]:
            return math.nan
        return row["throughput_examples_per_s"] / means[key]

    runs["throughput_vs_baseline"] = runs.apply(ratio, axis=1) if len(runs) else []
    return runs
