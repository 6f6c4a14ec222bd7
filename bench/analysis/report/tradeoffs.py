"""The report's "Trade-offs" section: convergence runs on the emulated cluster (the tradeoffs
preset): time to target against link bandwidth, accuracy against bytes moved, and which
family reaches the target first on each link."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bench.analysis.report import plots
from bench.analysis.report.html import figure, note, section, table
from bench.metrics import mean_and_ci95


def steps_per_worker(runs: pd.DataFrame, global_steps: pd.Series) -> pd.Series:
    """An asynchronous run's global steps are every worker's steps together."""
    asynchronous = runs["asynchronous"].fillna(False).astype(bool)
    return global_steps / np.where(asynchronous, runs["workers"], 1)


def settings(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (link, variant): time to target and accuracy over its seeds, and the bytes
    one worker sent (measured on its link) to the target and over the run."""
    runs = runs[runs["ok"]].copy()
    if runs.empty:
        return runs
    runs["bytes_to_target"] = runs["net_worker_sent_per_step"] * steps_per_worker(runs, runs["steps_to_target"])
    runs["bytes_per_run"] = runs["net_worker_sent_per_step"] * steps_per_worker(runs, runs["steps"])
    rows = []
    for (link, variant), group in runs.groupby(["link_mbit", "variant"]):
        reached = group[group["time_to_target_s"].notna()]
        tta, tta_ci = mean_and_ci95(reached["time_to_target_s"].to_numpy())
        acc, acc_ci = mean_and_ci95(group["best_accuracy"].to_numpy())
        rows.append({"link_mbit": link, "variant": variant, "family": group["family"].iloc[0],
                     "runs": len(group), "reached": len(reached), "all_reached": len(reached) == len(group),
                     "time_to_target_s": tta, "time_to_target_ci95": tta_ci,
                     "steps_to_target": reached["steps_to_target"].mean(),
                     "best_accuracy": acc, "best_accuracy_ci95": acc_ci,
                     "target_accuracy": group["target_accuracy"].iloc[0],
                     "bytes_to_target": reached["bytes_to_target"].mean(),
                     "bytes_per_run": group["bytes_per_run"].mean()})
    return pd.DataFrame(rows).sort_values(["link_mbit", "time_to_target_s"])


def family_bests(table_: pd.DataFrame) -> pd.DataFrame:
    """Per link and family: its variant with the lowest mean time to target among those whose
    every seed reached it."""
    reached = table_[table_["all_reached"]]
    if reached.empty:
        return reached
    best = reached.loc[reached.groupby(["link_mbit", "family"])["time_to_target_s"].idxmin()]
    return best.sort_values(["link_mbit", "time_to_target_s"])


def headline(table_: pd.DataFrame) -> str:
    """Per link: the family whose best variant reaches the target first, with its 95% interval,
    and each other family's best; a tie when the first two intervals overlap."""
    bests, lines = family_bests(table_), []
    for link in sorted(table_["link_mbit"].unique()):
        here = bests[bests["link_mbit"] == link]
        never = table_[(table_["link_mbit"] == link) & ~table_["all_reached"]]["variant"].tolist()
        if here.empty:
            lines.append(f"{link:g} Mbit/s: no variant reached the target in every run.")
            continue
        parts = [f"{r.family} {r.variant} {r.time_to_target_s:.1f} s ± {_half(r.time_to_target_ci95)}"
                 for r in here.itertuples()]
        first = here.iloc[0]
        tie = len(here) > 1 and overlap(first, here.iloc[1])
        verdict = f"tie between {first['family']} and {here.iloc[1]['family']}" if tie else f"{first['family']} first"
        missed = f"; not reached in every run: {', '.join(never)}" if never else ""
        lines.append(f"{link:g} Mbit/s: {verdict} ({'; '.join(parts)}){missed}.")
    return " ".join(lines)


def _half(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.1f}"


def overlap(a: pd.Series, b: pd.Series) -> bool:
    ha = 0.0 if math.isnan(a["time_to_target_ci95"]) else a["time_to_target_ci95"]
    hb = 0.0 if math.isnan(b["time_to_target_ci95"]) else b["time_to_target_ci95"]
    return a["time_to_target_s"] + ha >= b["time_to_target_s"] - hb


def tradeoffs_section(runs: pd.DataFrame) -> str:
    table_ = settings(runs)
    if table_.empty:
        return section("tradeoffs", "Trade-offs", note("No emulated convergence run finished."))
    target = table_["target_accuracy"].iloc[0]
    return section(
        "tradeoffs", "Trade-offs: time to target accuracy by link",
        note(f"Convergence runs on the emulated cluster, to validation accuracy {target:g}; intervals are 95% "
             f"Student t over seeds. Time to target runs from the first training step; a variant is ranked only "
             f"when every seed reached the target. Bytes: what one worker's link carried (interface counters)."),
        note(headline(table_)),
        figure(plots.time_to_target_vs_link(table_),
               "Time to target against each host's link bandwidth (both axes log scale); error bars: 95% CI "
               "over seeds, the lower one cut off above zero."),
        figure(plots.accuracy_vs_bytes(table_),
               "Best validation accuracy against the bytes one worker sent over the run (log scale)."),
        table(table_, [
            ("link_mbit", "link Mbit/s", "int"), ("variant", "strategy", "text"), ("family", "family", "text"),
            ("reached", "reached", "int"), ("runs", "runs", "int"),
            ("time_to_target_s", "time to target s", "s"), ("time_to_target_ci95", "± 95% CI", "s"),
            ("steps_to_target", "global steps", "int"), ("best_accuracy", "best accuracy", "acc"),
            ("best_accuracy_ci95", "± 95% CI", "acc"), ("bytes_to_target", "sent to target", "bytes"),
            ("bytes_per_run", "sent per run", "bytes")], "tradeoffs-table"))
