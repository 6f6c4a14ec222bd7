"""Calibration: latency and bandwidth (alpha, B) of each transport, fitted to the
micro-benchmark sweep by least squares in relative error (small buffers weigh as much as
large ones), and the spread of the workers' step times."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.analysis.projection.costs import Link
from bench.analysis.runs.micro_summary import one_tensor
from bench.metrics import bus_factor, measured_steps, messages


def fit_link(nbytes: Sequence[float], seconds: Sequence[float], kind: str, processes: int) -> tuple[Link, float]:
    """(alpha, B) of t = messages x alpha + bus factor x bytes / B, and the fit's RMS relative error.
    A negative latency (noise at small sizes) is fitted as zero."""
    x, t = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    if len(x) < 2 or len(np.unique(x)) < 2:
        raise ValueError("an alpha-beta fit needs at least two buffer sizes")
    slope, intercept = np.polyfit(x, t, 1, w=1 / t)
    if intercept < 0 or slope <= 0:
        slope, intercept = float(np.sum(x / t) / np.sum(x**2 / t**2)), 0.0  # through the origin, same weights
    link = Link(intercept / messages(kind, processes), bus_factor(kind, processes) / slope)
    predicted = intercept + slope * x
    return link, float(np.sqrt(np.mean(((predicted - t) / t) ** 2)))


def fit_transports(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (transport, kind, processes) of a micro-benchmark summary (bench.analysis.runs.micro_summary)."""
    rows = []
    for (transport, kind, processes), group in one_tensor(table).groupby(["transport", "kind", "processes"]):
        if group["bytes"].nunique() < 2:
            continue
        link, error = fit_link(group["bytes"], group["median_s"], kind, int(processes))
        rows.append({"transport": transport, "kind": kind, "processes": int(processes), "sizes": len(group),
                     "alpha_us": link.alpha_s * 1e6, "bandwidth_gb_per_s": link.bandwidth_bytes_per_s / 1e9,
                     "fit_rms_relative_error": error})
    return pd.DataFrame(rows)


def step_spread(steps: pd.DataFrame, warmup_steps: int) -> tuple[float, float]:
    """Mean and standard deviation of one worker's step time, pooled over workers (measured steps)."""
    measured = measured_steps(steps, warmup_steps)
    durations = measured["t_end_s"] - measured["t_start_s"]
    per_worker = durations.groupby(measured["worker"])
    return float(durations.mean()), float(np.sqrt(per_worker.var(ddof=1).fillna(0).mean()))
