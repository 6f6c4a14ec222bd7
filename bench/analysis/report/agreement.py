"""Whether two sets of runs give the report's first table the same answers: per model and worker count,
the fastest strategy of each (or its tie). A budgeted comparison is checked this way against a long
fixed-step one (`python -m bench report BUDGETED --baseline LONG`)."""

from __future__ import annotations

import pandas as pd

from bench.analysis.report import aggregate
from bench.analysis.report.html import note, section, table

TIE = "tie: "


def winners(fastest: str) -> set[str]:
    """The strategies a first-table cell names: one, or every strategy of its tie."""
    return set(fastest[len(TIE):].split(", ")) if fastest.startswith(TIE) else {fastest}


def verdict(here: str, there: str) -> str:
    """ "same", "tie in one" (one names a tie that holds the other's answer, or both ties that share a
    strategy) or "different" (no strategy in common)."""
    if winners(here) == winners(there) and here.startswith(TIE) == there.startswith(TIE):
        return "same"
    return "tie in one" if winners(here) & winners(there) else "different"


def agreement(here: pd.DataFrame, there: pd.DataFrame) -> pd.DataFrame:
    """The first table's cells of two sets of runs (with scaling efficiency added) side by side."""
    tables = [aggregate.headline(aggregate.settings(runs))[["model", "workers", "fastest"]] for runs in (here, there)]
    both = tables[0].merge(tables[1], on=["model", "workers"], suffixes=("", "_baseline"))
    both["agreement"] = [verdict(a, b) for a, b in zip(both["fastest"], both["fastest_baseline"], strict=True)]
    return both


def agreement_section(here: pd.DataFrame, there: pd.DataFrame) -> str:
    both = agreement(here, there)
    counts = both["agreement"].value_counts()
    said = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("same", "tie in one", "different"))
    return section("agreement", "The first table against the baseline runs'", note(
        f"{len(both)} cells: {said}. \"tie in one\": one side could not rank strategies the other ranked, and "
        "its tie holds the other's answer; \"different\": the two name no strategy in common."),
        table(both, [("model", "model", "text"), ("workers", "workers", "int"), ("fastest", "fastest here", "text"),
                     ("fastest_baseline", "fastest in the baseline runs", "text"),
                     ("agreement", "agreement", "text")], "agreement-table"))
