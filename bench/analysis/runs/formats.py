"""A figure as text, by its kind (the report's cells, and the runs' text columns): one place for each unit's form."""

from __future__ import annotations

import math

from bench.metrics import significant

FORMATS = {
    "int": lambda v: f"{int(v):,}",
    "rate": significant,
    "ratio": lambda v: f"{v:.2f}",
    "fraction": lambda v: f"{v:.3f}",
    "pct": lambda v: f"{100 * v:.1f}%",
    "ms": lambda v: f"{1000 * v:.2f}",
    "s": lambda v: f"{v:.1f}",
    "acc": lambda v: f"{v:.4f}",
    "sci": lambda v: f"{v:.3g}",
    "bytes": lambda v: f"{v / 2**20:.2f} MiB" if v >= 2**20 else f"{v / 1024:.1f} KiB",
}


def fmt(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return FORMATS.get(kind, str)(value)
