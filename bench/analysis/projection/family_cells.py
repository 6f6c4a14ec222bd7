"""Parameter servers or allreduce, projected: per cell (model, workers, link) the fastest scheme of each of the
model's two forms by its point, allreduce's examples/s over the parameter servers' at every joint draw (the
two share every constant they both read, bench.analysis.projection.draws), the ratio's interval, and where the
interval holds 1, the constant the answer turns on and the value at which it turns (its break-even)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from bench.analysis.projection import draws, levels
from bench.analysis.projection.intervals import around
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.schemes import ALLREDUCE_FORM, PS_FORM, form_of
from bench.analysis.projection.table import Figure

ALLREDUCE_AHEAD, PS_AHEAD = "allreduce", "parameter servers"
# a break-even is looked for from the constant's least draw / SEARCH to its greatest x SEARCH, to this precision
SEARCH, BISECTIONS = 30.0, 20
KEY = ("model", "workers", "link_gbit")


def cells(figures: Sequence[Figure], profile: Profile, level: float = levels.DEFAULT_LEVEL) -> list[dict]:
    """One record per cell of `figures` that has a scheme of each form."""
    grouped: dict[tuple, list[Figure]] = {}
    for f in figures:
        grouped.setdefault(tuple(f.row[k] for k in KEY), []).append(f)
    return [found for key, mine in grouped.items() if (found := cell(key, mine, profile, level)) is not None]


def name_of(row: dict) -> str:
    ps = f", {int(row['ps'])} ps" if row.get("ps") else ""
    return f"{row['scheme']} over {row['transport']}{ps}"


def cell(key: tuple, figures: Sequence[Figure], profile: Profile, level: float) -> dict | None:
    bests: dict[str, Figure] = {}
    for f in figures:
        form = form_of(f.row["scheme"])
        if form not in bests or f.found.point > bests[form].found.point:
            bests[form] = f
    if PS_FORM not in bests or ALLREDUCE_FORM not in bests:
        return None
    ring, ps = bests[ALLREDUCE_FORM], bests[PS_FORM]
    ratios = ring.found.drawn / ps.found.drawn
    spread = draws.spread(ratios, (*ring.found.inputs, *ps.found.inputs))
    models = [m for m in (ring.found.model, ps.found.model) if m is not None]
    point = ring.found.point / ps.found.point
    low, high = around(spread, point, models, level)
    out = {**dict(zip(KEY, key, strict=True)), "allreduce": name_of(ring.row), "parameter_servers": name_of(ps.row),
           "ratio": point, "low": low, "high": high, "level": level, "turns_on": "", "break_even": math.nan,
           "ahead_below": "", "widest_term": spread.widest or ""}
    if low <= 1 <= high:
        name = next((n for n, share in spread.shares if n in profile.constants and share > 0), None)
        if name is not None:
            out["turns_on"] = name
            found = break_even(name, ring.again, ps.again, profile)
            if found is not None:
                out["break_even"], out["ahead_below"] = found
    return out


def break_even(name: str, ring: Callable[[Profile], float], ps: Callable[[Profile], float],
               profile: Profile) -> tuple[float, str] | None:
    """(the value of constant `name` at which the two schemes' points are equal, the family ahead below it),
    every other constant at its value; None where the two do not cross between the constant's least draw /
    SEARCH and its greatest x SEARCH."""
    constant = profile.constants[name]
    values = [*constant.drawn(), constant.value, constant.low, constant.high]
    positive = [v for v in values if v > 0]
    if not positive:
        return None
    top = max(positive) * SEARCH
    bottom = max(min(positive), top * 1e-6) / SEARCH

    def lead(value: float) -> float:
        moved = profile.with_value(name, value)
        return math.log(ring(moved) / ps(moved))

    below, above = lead(bottom), lead(top)
    if below * above > 0 or below == above:
        return None
    low, high = math.log(bottom), math.log(top)
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        if lead(math.exp(middle)) * below > 0:
            low = middle
        else:
            high = middle
    return float(np.exp((low + high) / 2)), ALLREDUCE_AHEAD if below > 0 else PS_AHEAD
