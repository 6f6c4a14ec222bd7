"""The question the suite is named for: parameter servers or allreduce? Per cell, the best strategy of each family
that ran, and the verdict between the better parameter-server strategy and the better allreduce one: measured
(the runs' own throughput, by the rerun rule of bench.analysis.report.verdict) and projected (the projection's
figures for a cluster nobody ran, by their prediction intervals). families.csv holds both, one row a cell."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench.analysis.projection.family_cells import name_of
from bench.analysis.projection.schemes import ALLREDUCE_FORM, PS_FORM, form_of
from bench.analysis.report import verdict
from bench.run.contract import ALLREDUCE, IN_GRAPH, PARAMETER_AVERAGING, PARAMETER_SERVER

FAMILIES_FILE = "families.csv"
MEASURED, PROJECTED = "measured", "projected"
ALLREDUCE_AHEAD, PS_AHEAD, TIE = "allreduce", "parameter servers", "tie"
# families.csv's columns: the issue's, then what else a reader of one row needs
COLUMNS = ["source", "model", "workers", "link_gbit", "parameter_servers", "allreduce", "ratio", "low", "high",
           "verdict", "in_graph", "parameter_averaging", "needs", "rounds", "widest_term", "turns_on", "break_even",
           "ahead_below"]
FAMILY_COLUMNS = {IN_GRAPH: "in_graph", PARAMETER_SERVER: "parameter_servers", ALLREDUCE: "allreduce",
                  PARAMETER_AVERAGING: "parameter_averaging"}


def verdict_of(low: float, high: float) -> str:
    """Allreduce's throughput over the parameter servers' lies within [low, high]: a family is ahead only where
    the whole range is on its side of 1."""
    return ALLREDUCE_AHEAD if low > 1 else PS_AHEAD if high < 1 else TIE


def measured(verdicts: verdict.Verdicts) -> pd.DataFrame:
    """Per model and workers (and link, on capped links): each family's fastest strategy among the figures a
    ranking may use (verdict.rankable), and allreduce's throughput over the parameter servers', its bounds the
    rerun rule's (the ratio over and times the lead a verdict needs)."""
    table, spread = verdicts.rankable, verdicts.spread
    if table.empty or "family" not in table:
        return pd.DataFrame(columns=COLUMNS)
    links = "link_mbit" in table and table["link_mbit"].notna().any()
    rows = []
    for key, group in table.groupby([*verdict.CELL, *(["link_mbit"] if links else [])], dropna=False):
        bests = {family: mine.loc[mine["throughput_examples_per_s"].idxmax()]
                 for family, mine in group.groupby("family")}
        if PARAMETER_SERVER not in bests or ALLREDUCE not in bests:
            continue
        ps, ring = bests[PARAMETER_SERVER], bests[ALLREDUCE]
        ratio = ring["throughput_examples_per_s"] / ps["throughput_examples_per_s"]
        needs = verdict.threshold(ring, ps, spread)
        rows.append({"source": MEASURED, "model": key[0], "workers": int(key[1]),
                     "link_gbit": key[2] / 1000 if links and pd.notna(key[2]) else math.nan,
                     **{column: verdict.name_of(bests[f]) if f in bests else ""
                        for f, column in FAMILY_COLUMNS.items()},
                     "ratio": ratio, "low": ratio / needs, "high": ratio * needs,
                     "verdict": verdict_of(ratio / needs, ratio * needs), "needs": needs,
                     "rounds": min(int(ps["repeats"]), int(ring["repeats"])), "widest_term": "", "turns_on": "",
                     "break_even": math.nan, "ahead_below": ""})
    return pd.DataFrame(rows, columns=COLUMNS)


def projected(cells: list[dict] | None, rows: list[dict] = ()) -> pd.DataFrame:
    """Per model, workers and link of a projection: its family cells (projection.json's `families`,
    bench.analysis.projection.family_cells: the ratio's interval over joint draws, and where it holds 1 the
    constant it turns on and its break-even); a projection written before them, from its rows: each end of
    one form's interval against the other's."""
    if cells:
        table = pd.DataFrame(cells)
        table["verdict"] = [verdict_of(lo, hi) for lo, hi in zip(table["low"], table["high"], strict=True)]
        return pd.DataFrame({"source": PROJECTED, **{c: table[c] for c in COLUMNS if c in table},
                             "in_graph": "", "parameter_averaging": "", "needs": math.nan, "rounds": math.nan},
                            columns=COLUMNS)
    return from_rows(rows)


def from_rows(rows: list[dict]) -> pd.DataFrame:
    """Per model, workers and link of an older projection's rows: the fastest parameter-server scheme and the
    fastest allreduce one (by their points), and allreduce's over the parameter servers' with the bounds
    their prediction intervals give (each end against the other's)."""
    table = pd.DataFrame(list(rows))
    if table.empty or "scheme" not in table:
        return pd.DataFrame(columns=COLUMNS)
    table["form"] = table["scheme"].map(form_of)
    out = []
    for (model, workers, link), group in table.groupby(["model", "workers", "link_gbit"]):
        bests = {form: mine.loc[mine["throughput_examples_per_s"].idxmax()] for form, mine in group.groupby("form")}
        if PS_FORM not in bests or ALLREDUCE_FORM not in bests:
            continue
        ps, ring = bests[PS_FORM], bests[ALLREDUCE_FORM]
        low, high = ring["throughput_low"] / ps["throughput_high"], ring["throughput_high"] / ps["throughput_low"]
        widest = max((ps, ring), key=lambda r: r.get("widest_term_u_log") or 0.0).get("widest_term")
        out.append({"source": PROJECTED, "model": model, "workers": int(workers), "link_gbit": float(link),
                    "parameter_servers": name_of(ps), "allreduce": name_of(ring), "in_graph": "",
                    "parameter_averaging": "",
                    "ratio": ring["throughput_examples_per_s"] / ps["throughput_examples_per_s"], "low": low,
                    "high": high, "verdict": verdict_of(low, high), "needs": math.nan, "rounds": math.nan,
                    "widest_term": widest if isinstance(widest, str) else "", "turns_on": "",
                    "break_even": math.nan, "ahead_below": ""})
    return pd.DataFrame(out, columns=COLUMNS)


def both(verdicts: verdict.Verdicts, projection: dict) -> pd.DataFrame:
    """The measured cells and those of `projection` (a projection.json's content, {} where none)."""
    cells = projected(projection.get("families"), projection.get("projection", []))
    parts = [frame for frame in (measured(verdicts), cells) if len(frame)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def write(table: pd.DataFrame, folder: Path) -> Path:
    path = folder / FAMILIES_FILE
    out = table.copy()
    for column in ("ratio", "low", "high", "needs"):
        out[column] = out[column].astype(float).round(4)
    out.to_csv(path, index=False)
    return path
