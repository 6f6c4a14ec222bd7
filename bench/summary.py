"""The summary figures of a run, computed from its steps.csv and evals.csv.

One function per figure, the same for every strategy. Definitions:
- throughput (examples/s): examples finished in a measurement window / window length.
  The measured span runs from the first post-warm-up step start to the last step
  end over all workers; it is cut into equal windows. We report the mean over
  windows and the 95% confidence interval of that mean (Student t), not the spread
  of single windows.
- step time (s): t_end - t_start of each post-warm-up step of each worker; p50/p90/p99.
- time to target (s): wall time of the first evaluation whose accuracy >= target.
- gradient bytes per step: float32 gradient one worker produces per step.
- scaling efficiency: throughput / (workers x throughput of the 1-worker `single`
  run of the same model and per-worker batch).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.records import EVALS_FILE, STEPS_FILE

MAX_WINDOWS = 10
MIN_STEPS_PER_WINDOW = 5


def read_steps(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / STEPS_FILE)


def read_evals(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / EVALS_FILE)


def measured_steps(steps: pd.DataFrame, warmup_steps: int) -> pd.DataFrame:
    """Rows after each worker's first `warmup_steps` steps."""
    return steps[steps["local_step"] >= warmup_steps]


def window_throughputs(steps: pd.DataFrame) -> np.ndarray:
    """Examples/s in each of up to MAX_WINDOWS equal time windows of the measured span."""
    if len(steps) < 2:
        return np.array([])
    start, end = steps["t_start_s"].min(), steps["t_end_s"].max()
    if end <= start:
        return np.array([])
    count = max(1, min(MAX_WINDOWS, len(steps) // MIN_STEPS_PER_WINDOW))
    edges = np.linspace(start, end, count + 1)
    which = np.clip(np.searchsorted(edges, steps["t_end_s"].to_numpy(), side="left") - 1, 0, count - 1)
    examples = np.bincount(which, weights=steps["examples"].to_numpy(), minlength=count)
    return examples / np.diff(edges)


def mean_and_ci95(samples: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (nan with < 2 samples)."""
    if len(samples) == 0:
        return math.nan, math.nan
    mean = float(np.mean(samples))
    if len(samples) < 2:
        return mean, math.nan
    from scipy.stats import t

    half = t.ppf(0.975, len(samples) - 1) * np.std(samples, ddof=1) / math.sqrt(len(samples))
    return mean, float(half)


def step_time_percentiles(steps: pd.DataFrame) -> dict[str, float]:
    durations = (steps["t_end_s"] - steps["t_start_s"]).to_numpy()
    if len(durations) == 0:
        return {f"step_time_p{p}_s": math.nan for p in (50, 90, 99)}
    return {f"step_time_p{p}_s": float(np.percentile(durations, p)) for p in (50, 90, 99)}


def time_to_accuracy(evals: pd.DataFrame, target: float) -> tuple[float, float]:
    """(wall seconds, global step) of the first evaluation reaching `target`; nan if never."""
    reached = evals[evals["accuracy"] >= target]
    if reached.empty:
        return math.nan, math.nan
    first = reached.sort_values("wall_s").iloc[0]
    return float(first["wall_s"]), float(first["global_step"])


def scaling_efficiency(throughput: float, workers: int, baseline_throughput: float) -> float:
    """throughput / (workers x 1-worker baseline throughput); 1.0 is perfect scaling."""
    if not baseline_throughput or workers < 1 or math.isnan(baseline_throughput):
        return math.nan
    return throughput / (workers * baseline_throughput)


def summarize(run_dir: Path, warmup_steps: int, target_accuracy: float) -> dict[str, Any]:
    steps = read_steps(run_dir)
    evals = read_evals(run_dir)
    measured = measured_steps(steps, warmup_steps)
    mean, half = mean_and_ci95(window_throughputs(measured))
    val = evals[evals["split"] == "val"] if not evals.empty else evals
    tta_s, tta_steps = time_to_accuracy(val, target_accuracy) if not val.empty else (math.nan, math.nan)
    out: dict[str, Any] = {
        "throughput_examples_per_s": mean,
        "throughput_ci95_examples_per_s": half,
        "measured_steps": int(len(measured)),
        "total_steps": int(len(steps)),
        "global_steps": int(steps["global_step"].max()) if len(steps) else 0,
        "examples": int(steps["examples"].sum()) if len(steps) else 0,
        "train_time_s": float(steps["t_end_s"].max() - steps["t_start_s"].min()) if len(steps) else math.nan,
        **step_time_percentiles(measured),
        "final_loss": float(steps.sort_values("t_end_s")["loss"].iloc[-1]) if len(steps) else math.nan,
        "final_accuracy": float(val.sort_values("wall_s")["accuracy"].iloc[-1]) if len(val) else math.nan,
        "best_accuracy": float(val["accuracy"].max()) if len(val) else math.nan,
        "target_accuracy": target_accuracy,
        "time_to_target_s": tta_s,
        "steps_to_target": tta_steps,
    }
    if "staleness_steps" in steps and steps["staleness_steps"].notna().any():
        out["staleness_mean_steps"] = float(steps["staleness_steps"].mean())
        out["staleness_max_steps"] = float(steps["staleness_steps"].max())
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
