"""The report's section on checkpoints: what saving cost each run (bench.metrics defines it)."""

from __future__ import annotations

import pandas as pd

from bench.analysis.report.html import note, section, table

COLUMNS = [
    ("strategy", "strategy", "text"), ("model", "model", "text"), ("workers", "workers", "int"),
    ("checkpoints", "saves", "int"), ("checkpoint_save_s_mean", "mean save ms", "ms"),
    ("checkpoint_save_s_max", "max save ms", "ms"), ("checkpoint_bytes", "checkpoint", "bytes"),
    ("throughput_examples_per_s", "examples/s", "rate"),
    ("throughput_between_checkpoints_examples_per_s", "examples/s between saves", "rate"),
    ("checkpoint_overhead", "overhead", "pct")]


def checkpoints_section(runs: pd.DataFrame) -> str:
    """One row per run that saved checkpoints."""
    saved = runs[runs["checkpoints"].fillna(0) > 0] if "checkpoints" in runs else runs.iloc[0:0]
    if saved.empty:
        return section("checkpoints", "Checkpoints", note("No run saved checkpoints."))
    return section("checkpoints", "Checkpoints", note(
        "The chief saves; the throughput between saves counts the steps that end outside every save, over the "
        "measured time less the saves. Overhead: 1 - examples/s / examples/s between saves."),
        table(saved.sort_values(["model", "strategy", "workers"]), COLUMNS, "checkpoints-table"))
