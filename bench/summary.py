"""The summary figures of a run, computed from its steps.csv and evals.csv.

One function per figure, the same for every strategy. Definitions:
- measured steps: every worker's steps from its local step `warmup_steps` on
  (`measured_steps`, used by the summary, the report's plots and the link meter).
- throughput (examples/s): examples whose gradients reached the model (`applied`;
  for every strategy but ps-sync with backup workers, all examples computed) over
  the measured span, from the first measured step's start to the last one's end.
  `computed_throughput_examples_per_s` counts every example a worker computed.
- its 95% interval: batch means over consecutive steps. The measured steps, in
  order of their end, are cut into up to 10 batches of consecutive steps; each
  batch has its examples and its own elapsed time (end of its last step minus end
  of the previous batch's last step), so the interval reflects how step times
  vary. Half-width: Student t (k-1 degrees of freedom) times the standard error of
  the ratio estimator sum(examples) / sum(seconds) over the k batches.
- step time (s): t_end - t_start of each measured step of each worker; p50/p90/p99.
- start-up (s): from the run's start (the launcher's clock) to its first training step.
- time to target (s): from the first training step to the first evaluation whose
  accuracy >= target (start-up is not in it).
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

MAX_BATCHES = 10
MIN_STEPS_PER_BATCH = 3


def read_steps(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / STEPS_FILE)


def read_evals(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / EVALS_FILE)


def measured_steps(steps: pd.DataFrame, warmup_steps: int) -> pd.DataFrame:
    """Rows from each worker's local step `warmup_steps` on (local steps count from 0)."""
    return steps[steps["local_step"] >= warmup_steps]


def applied_examples(steps: pd.DataFrame) -> np.ndarray:
    """Examples of each step whose gradient reached the model (a step marked applied=0 adds none)."""
    examples = steps["examples"].to_numpy(dtype=float)
    if "applied" not in steps:
        return examples
    applied = steps["applied"].to_numpy(dtype=float)
    return np.where(np.isnan(applied) | (applied != 0), examples, 0.0)


def step_batches(steps: pd.DataFrame, examples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(examples, seconds) of up to MAX_BATCHES batches of consecutive steps (by end time)."""
    if len(steps) < 2:
        return np.array([]), np.array([])
    order = np.argsort(steps["t_end_s"].to_numpy(), kind="stable")
    ends = steps["t_end_s"].to_numpy()[order]
    count = max(1, min(MAX_BATCHES, len(steps) // MIN_STEPS_PER_BATCH))
    bounds = np.linspace(0, len(steps), count + 1).astype(int)
    edges = np.concatenate([[steps["t_start_s"].min()], ends[bounds[1:] - 1]])
    return np.add.reduceat(examples[order], bounds[:-1]), np.diff(edges)


def ratio_and_ci95(examples: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
    """sum(examples)/sum(seconds) and the half-width of its 95% interval over the batches."""
    total = float(np.sum(seconds))
    if len(seconds) == 0 or total <= 0:
        return math.nan, math.nan
    ratio = float(np.sum(examples)) / total
    k = len(seconds)
    if k < 2:
        return ratio, math.nan
    from scipy.stats import t

    residuals = examples - ratio * seconds
    stderr = math.sqrt(float(np.sum(residuals**2)) / (k * (k - 1))) / (total / k)
    return ratio, float(t.ppf(0.975, k - 1) * stderr)


def throughput(measured: pd.DataFrame, examples: np.ndarray) -> tuple[float, float]:
    """Examples/s over the measured steps and its 95% interval (batch means)."""
    return ratio_and_ci95(*step_batches(measured, examples))


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
    """(seconds since the run's start, global step) of the first evaluation reaching `target`; nan if never."""
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
    mean, half = throughput(measured, applied_examples(measured))
    computed, _ = throughput(measured, measured["examples"].to_numpy(dtype=float))
    first_step_s = float(steps["t_start_s"].min()) if len(steps) else math.nan
    val = evals[evals["split"] == "val"] if not evals.empty else evals
    tta_s, tta_steps = time_to_accuracy(val, target_accuracy) if not val.empty else (math.nan, math.nan)
    out: dict[str, Any] = {
        "throughput_examples_per_s": mean,
        "throughput_ci95_examples_per_s": half,
        "throughput_interval": "95% CI, batch means over consecutive steps",
        "computed_throughput_examples_per_s": computed,
        "measured_steps": int(len(measured)),
        "warmup_steps": int(warmup_steps),
        "total_steps": int(len(steps)),
        "global_steps": int(steps["global_step"].max()) if len(steps) else 0,
        "examples": int(steps["examples"].sum()) if len(steps) else 0,
        "examples_applied": int(applied_examples(steps).sum()) if len(steps) else 0,
        "startup_s": first_step_s,
        "train_time_s": float(steps["t_end_s"].max() - first_step_s) if len(steps) else math.nan,
        **step_time_percentiles(measured),
        "final_loss": float(steps.sort_values("t_end_s")["loss"].iloc[-1]) if len(steps) else math.nan,
        "final_accuracy": float(val.sort_values("wall_s")["accuracy"].iloc[-1]) if len(val) else math.nan,
        "best_accuracy": float(val["accuracy"].max()) if len(val) else math.nan,
        "target_accuracy": target_accuracy,
        "time_to_target_s": tta_s - first_step_s if not math.isnan(first_step_s) else math.nan,
        "steps_to_target": tta_steps,
    }
    if "staleness_steps" in steps and steps["staleness_steps"].notna().any():
        out["staleness_mean_steps"] = float(steps["staleness_steps"].mean())
        out["staleness_max_steps"] = float(steps["staleness_steps"].max())
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
