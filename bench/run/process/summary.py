"""The summary figures of a run, from its steps.csv and evals.csv, by the definitions
in bench.metrics (the same for every strategy)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from bench.metrics import (
    applied_examples,
    measured_steps,
    recovery_costs,
    split_steps,
    step_time_percentiles,
    throughput,
    throughput_between_saves,
    time_to_accuracy,
)
from bench.run.process import breakdown, exposure, utilization
from bench.run.process.checkpoints import CHECKPOINTS_FILE
from bench.run.process.records import EVALS_FILE, RECOVERIES, STEPS_FILE, RunFolder, restarts_s


def read_steps(run_dir: Path | str, missing_ok: bool = False) -> pd.DataFrame:
    """A run's steps.csv (with `missing_ok`, an empty frame where it has none)."""
    return _read(Path(run_dir) / STEPS_FILE, missing_ok)


def read_evals(run_dir: Path | str, missing_ok: bool = False) -> pd.DataFrame:
    """A run's evals.csv (with `missing_ok`, an empty frame where it has none)."""
    return _read(Path(run_dir) / EVALS_FILE, missing_ok)


def _read(path: Path, missing_ok: bool) -> pd.DataFrame:
    return pd.read_csv(path) if not missing_ok or path.is_file() else pd.DataFrame()


def summarize(run_dir: Path, warmup_steps: int, target_accuracy: float,
              write_breakdown: bool = False) -> dict[str, Any]:
    """The summary figures; with `write_breakdown`, also the run's breakdown.csv (split once)."""
    steps = read_steps(run_dir)
    evals = read_evals(run_dir)
    record = RunFolder(run_dir).read_run()
    restarts = restarts_s(record)
    measured = measured_steps(steps, warmup_steps, restarts)
    mean, half = throughput(measured, applied_examples(measured), restarts)
    computed, _ = throughput(measured, measured["examples"].to_numpy(dtype=float), restarts)
    first_step_s = float(steps["t_start_s"].min()) if len(steps) else math.nan
    val = evals[evals["split"] == "val"] if not evals.empty else evals
    tta_s, tta_steps = time_to_accuracy(val, target_accuracy) if not val.empty else (math.nan, math.nan)
    out: dict[str, Any] = {
        "throughput_examples_per_s": mean,
        "throughput_ci95_examples_per_s": half,
        "throughput_interval": "95% CI, batch means over consecutive steps",
        "computed_throughput_examples_per_s": computed,
        "measured_steps": int(len(measured)),
        "attempts": len(restarts) + 1,
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
        **utilization.figures(record, mean),
    }
    if (run_dir / CHECKPOINTS_FILE).exists() and len(measured):
        out.update(checkpoint_figures(pd.read_csv(run_dir / CHECKPOINTS_FILE), measured, mean))
    # a collective's split needs every worker's rows of a step: split all, then drop the warm-up
    parts = split_steps(steps)
    if write_breakdown:
        breakdown.write(run_dir, parts)
    out["exposure"] = exposure.summarize(run_dir, parts, record.get("strategy") or {},
                                         exposure.last_ready(steps, record.get("run_start_epoch_s")))
    parts = parts[parts["local_step"] >= warmup_steps]
    if not parts.empty:
        synchronous = not (record.get("strategy") or {}).get("asynchronous", False)
        out["breakdown"] = breakdown.summarize(parts, synchronous)
        speedup = out["breakdown"].get("speedup_without_slowest")
        out["throughput_without_slowest_examples_per_s"] = mean * speedup if speedup else None
    if record.get(RECOVERIES):
        out["recoveries"] = recovery_costs(steps, record[RECOVERIES])
    if "staleness_steps" in steps and steps["staleness_steps"].notna().any():
        out["staleness_mean_steps"] = float(steps["staleness_steps"].mean())
        out["staleness_max_steps"] = float(steps["staleness_steps"].max())
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def checkpoint_figures(saves: pd.DataFrame, measured: pd.DataFrame, throughput_with: float) -> dict[str, Any]:
    """What the run's checkpoints cost (bench.metrics defines the overhead)."""
    if saves.empty:
        return {"checkpoints": 0}
    between = throughput_between_saves(measured, applied_examples(measured), saves)
    return {"checkpoints": int(len(saves)), "checkpoint_save_s_mean": float(saves["save_s"].mean()),
            "checkpoint_save_s_max": float(saves["save_s"].max()), "checkpoint_bytes": int(saves["bytes"].iloc[-1]),
            "throughput_between_checkpoints_examples_per_s": between,
            "checkpoint_overhead": 1 - throughput_with / between}
