"""Whether two sets of runs give the same answer (bench.analysis.report.verdict): per cell, "X ahead" or
"tie" in each. A budgeted comparison is checked this way against a long fixed-step one, and a rerun against
its first run (`python -m bench report RERUN --baseline FIRST`)."""

from __future__ import annotations

import pandas as pd

from bench.analysis.report import families
from bench.analysis.report import verdict as verdicts
from bench.analysis.report.html import note, section, table

TIE = "tie"


def verdict(here: str, there: str) -> str:
    """ "same", "tie in one" (one says tie where the other names a strategy ahead) or "reversed" (each names a
    different strategy ahead)."""
    if here == there:
        return "same"
    return "tie in one" if TIE in (here, there) else "reversed"


def agreement(here: verdicts.Verdicts, there: verdicts.Verdicts) -> pd.DataFrame:
    """The answer's cells of two sets of runs (with scaling efficiency added) side by side."""
    tables = []
    for folded in (here, there):
        table_ = verdicts.answer(folded)
        table_["said"] = [verdicts.said(row) for _, row in table_.iterrows()]
        tables.append(table_[[*(c for c in ("model", "workers", "link") if c in table_), "said", "lead",
                              "threshold"]])
    key = [c for c in ("model", "workers", "link") if c in tables[0] and c in tables[1]]
    both = tables[0].merge(tables[1], on=key, suffixes=("", "_baseline"))
    both["agreement"] = [verdict(a, b) for a, b in zip(both["said"], both["said_baseline"], strict=True)]
    return both


def family_agreement(here: verdicts.Verdicts, there: verdicts.Verdicts) -> pd.DataFrame:
    """The measured family answers of two sets of runs side by side, cell by cell."""
    key = ["model", "workers", "link_gbit"]
    columns = [*key, "verdict", "ratio", "needs"]
    mine, theirs = (families.measured(folded)[columns] for folded in (here, there))
    both = mine.merge(theirs, on=key, suffixes=("", "_baseline"))
    both["agreement"] = [verdict(a, b) for a, b in zip(both["verdict"], both["verdict_baseline"], strict=True)]
    return both


def counted(both: pd.DataFrame) -> str:
    counts = both["agreement"].value_counts()
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in ("same", "tie in one", "reversed"))


def agreement_section(here: verdicts.Verdicts, there: verdicts.Verdicts) -> str:
    both, paired = agreement(here, there), family_agreement(here, there)
    said = counted(both)
    family_parts = [
        note(f"Parameter servers or allreduce, measured: {len(paired)} cells: {counted(paired)}."),
        table(paired, [("model", "model", "text"), ("workers", "workers", "int"),
                       ("verdict", "here", "text"), ("ratio", "allreduce / ps", "ratio"), ("needs", "needed", "ratio"),
                       ("verdict_baseline", "in the baseline runs", "text"),
                       ("ratio_baseline", "allreduce / ps", "ratio"), ("needs_baseline", "needed", "ratio"),
                       ("agreement", "agreement", "text")], "agreement-families")] if len(paired) else []
    return section("agreement", "The answer against the baseline runs'", *family_parts, note(
        f"Fastest strategy: {len(both)} cells: {said}. \"tie in one\": one side's lead was within what a rerun moves "
        "it, the other's beyond; \"reversed\": each names a different strategy (or family) ahead."),
        table(both, [("model", "model", "text"), ("workers", "workers", "int"),
                     *([("link", "link Mbit/s", "int")] if "link" in both else []),
                     ("said", "here", "text"), ("lead", "lead", "ratio"), ("threshold", "needed", "ratio"),
                     ("said_baseline", "in the baseline runs", "text"), ("lead_baseline", "lead", "ratio"),
                     ("threshold_baseline", "needed", "ratio"), ("agreement", "agreement", "text")],
              "agreement-table"))
