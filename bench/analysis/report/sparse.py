"""Whether a strategy slow on the sparse model is slow because of the table: on each model with an embedding
table, every strategy more than SLOWER behind its family's fastest, set beside the same two strategies' ratio on
the dense models run at the same workers. As slow there, its cost is its own exchange's (TensorFlow's
collectives, say), not the table's path; slower only with the table, the way it moves the table (its run.json's
sparse_exchange) is what costs it. It reads the records; it measures nothing."""

from __future__ import annotations

import pandas as pd

from bench.analysis.report import verdict

SLOWER = 1.5  # behind its family's fastest by more than this: the "within reach"


def rates(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean examples/s per model, workers and variant of the runs a verdict reads (verdict.measured) on one machine,
    with the variant's family, how it moves a table, and whether the model has one."""
    ok = verdict.measured(runs)
    if "link_mbit" in ok:
        ok = ok[ok["link_mbit"].isna()]
    if ok.empty or "rows_touched_per_step" not in ok:
        return pd.DataFrame()
    return ok.assign(sparse=ok["rows_touched_per_step"].fillna(0) > 0).groupby(
        ["model", "workers", "variant"], as_index=False).agg(
        rate=("throughput_examples_per_s", "mean"), family=("family", "first"), sparse=("sparse", "any"),
        how=("sparse_exchange", "first"))


def sentences(runs: pd.DataFrame) -> list[str]:
    """A sentence per strategy more than SLOWER behind its family's fastest on a sparse model."""
    table = rates(runs)
    if table.empty:
        return []
    out = []
    for (model, workers), cell in table[table["sparse"]].groupby(["model", "workers"]):
        for _, mine in cell.groupby("family"):
            best = mine.loc[mine["rate"].idxmax()]
            for _, slow in mine[mine["rate"] * SLOWER < best["rate"]].iterrows():
                out.append(said(table, model, int(workers), slow, best))
    return out


def said(table: pd.DataFrame, model: str, workers: int, slow: pd.Series, best: pd.Series) -> str:
    ratio = slow["rate"] / best["rate"]
    dense = table[~table["sparse"] & (table["workers"] == workers)]
    elsewhere = []
    for other, group in dense.groupby("model"):
        pair = group.set_index("variant")["rate"]
        if slow["variant"] in pair and best["variant"] in pair:
            elsewhere.append((other, pair[slow["variant"]] / pair[best["variant"]]))
    head = (f"{model} x{workers}: {slow['variant']} {ratio:.2f}x {best['variant']}'s examples/s "
            f"(its table: {slow['how']})")
    if not elsewhere:
        return head + "; no dense model ran both at these workers to tell the table's cost from the rest."
    beside = ", ".join(f"{m} {r:.2f}x" for m, r in elsewhere)
    if ratio * SLOWER >= min(r for _, r in elsewhere):
        return (f"{head}; on {beside}: as far behind without a table, so its cost is its exchange's own, not the "
                "table's path.")
    return f"{head}; on {beside}: further behind only with the table, so the way it moves the table costs it."
