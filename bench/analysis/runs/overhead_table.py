"""The overhead benchmark's records: one row per pair and repeat (overhead.csv) and the
ratio strategy by strategy (the table it prints and the report shows)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PAIRS_FILE = "overhead.csv"
COLUMNS = ("strategy", "repeat", "first", "bare_examples_per_s", "harness_examples_per_s", "ratio")


def ratio(harness: float, bare: float) -> float:
    """Throughput through distbench as a fraction of the bare loop's (1.0: the harness costs nothing)."""
    return harness / bare


def summarize(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, in the order first measured: the median ratio and its spread over repeats."""
    order = list(dict.fromkeys(pairs["strategy"]))
    grouped = pairs.groupby("strategy")
    out = pd.DataFrame({
        "repeats": grouped.size(),
        "bare_examples_per_s": grouped["bare_examples_per_s"].median(),
        "harness_examples_per_s": grouped["harness_examples_per_s"].median(),
        "ratio_median": grouped["ratio"].median(),
        "ratio_min": grouped["ratio"].min(),
        "ratio_max": grouped["ratio"].max(),
    })
    return out.loc[order].reset_index()


def read(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / PAIRS_FILE)


def text(summary: pd.DataFrame) -> str:
    lines = [f"{'strategy':<14}{'bare ex/s':>12}{'distbench ex/s':>16}{'ratio':>8}  {'min - max':>13}  repeats"]
    for r in summary.itertuples():
        lines.append(f"{r.strategy:<14}{r.bare_examples_per_s:>12,.0f}{r.harness_examples_per_s:>16,.0f}"
                     f"{r.ratio_median:>8.3f}  {r.ratio_min:>5.3f} - {r.ratio_max:<5.3f}  {r.repeats}")
    return "\n".join(lines)
