"""The answer a comparison ends on, where its user looks: the terminal (at most ANSWER_LINES lines of at most
ANSWER_WIDTH columns, the report's path aside) and answer.csv beside the report. Both read the verdicts
(bench.analysis.report.verdict) and the why section's lines (bench.analysis.report.why)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.analysis.projection.levels import DEFAULT_LEVEL
from bench.analysis.report import convergence_answer, families, verdict, why

ANSWER_LINES = 32
CELL_LINES = 13  # the measured cells' table at most (its head included); the time-to-accuracy block takes up to 8
ANSWER_WIDTH = 100
ANSWER_FILE = "answer.csv"


def machine(runs: pd.DataFrame) -> list[str]:
    """What the runs ran on, and whose ranking that makes it: two lines."""
    known = runs.dropna(subset=["cpu_model"]) if "cpu_model" in runs else runs.iloc[0:0]
    if known.empty:
        return ["Answer (machine not recorded)"]
    row = known.iloc[0]
    extensions = row.get("cpu_extensions")
    cpu = f"{str(row['cpu_model'])[:48]}" + (f" ({extensions})" if isinstance(extensions, str) and extensions else "")
    cores = f", {row['cpu_count']:g} cores" if pd.notna(row.get("cpu_count")) else ""
    hosts = known["host"].nunique() if "host" in known else 1
    emulated = "link_mbit" in runs and runs["link_mbit"].notna().any()
    if emulated:
        whose = "Emulated hosts on one machine: they share its cores; their links are capped."
    elif hosts > 1:
        whose = f"{hosts} hosts."
    else:
        whose = "One machine: the ranking is this machine's, not a cluster's."
    return [f"Answer on {cpu}{cores}", whose]


def spread_line(verdicts: verdict.Verdicts, table: pd.DataFrame) -> str:
    spread = verdicts.spread
    rounds = int(table["rounds"].min()) if len(table) and table["rounds"].notna().any() else 1
    if verdicts.settings.empty:  # time to target on capped links: its seeds are its reruns
        return (f"Time to target accuracy over {rounds} seed{'s' if rounds > 1 else ''}; 'lead': the next one's "
                "time over the first's; 'ahead': their 95 % intervals over seeds apart.")
    said = f"{rounds} round{'s' if rounds > 1 else ''} per setting; "
    if not spread.known():
        return said + "no setting ran twice: 'ahead' means beyond one run's own interval."
    return said + (f"'ahead': a lead beyond what a rerun moves it (a run varies {100 * math.expm1(spread.sd):.1f} %, "
                   f"{spread.settings} setting{'s' if spread.settings != 1 else ''}).")


def cell_lines(table: pd.DataFrame) -> list[str]:
    links = "link" in table
    head = f"{'model':<10} {'workers':>7} " + (f"{'link':>6} " if links else "") + \
        f"{'fastest':<20} {'lead':>6} {'verdict':<8} {'needs':>6}  runner-up"
    lines = [head]
    for _, row in table.iterrows():
        lead = f"{row['lead']:.2f}x" if pd.notna(row["lead"]) else "–"
        needs = f"{row['threshold']:.2f}x" if pd.notna(row["threshold"]) else "–"
        link = f"{row['link']:>6g} " if links else ""
        lines.append(f"{row['model']:<10} {int(row['workers']):>7} {link}{row['fastest']:<20} {lead:>6} "
                     f"{row['verdict']:<8} {needs:>6}  {row['runner_up']}")
    return lines


def growths(group: pd.DataFrame, spread: verdict.Spread) -> list[tuple[float, float, str]]:
    """Per strategy of one model with two worker counts or more: (log growth per doubling of workers, the log of
    the growth a rerun may make up (verdict.threshold of its two figures), "name 1.8x from 2 to 4")."""
    out = []
    links = [c for c in ("link_mbit",) if c in group]  # on capped links, a strategy's growth is per link
    for (name, *_), mine in group.groupby(["variant", *links], dropna=False):
        mine = mine.sort_values("workers")
        fewest, most = mine.iloc[0], mine.iloc[-1]
        if fewest["workers"] < 1 or most["workers"] <= fewest["workers"]:
            continue
        growth = most["throughput_examples_per_s"] / fewest["throughput_examples_per_s"]
        doublings = math.log2(most["workers"] / fewest["workers"])
        out.append((math.log(growth) / doublings, math.log(verdict.threshold(most, fewest, spread)) / doublings,
                    f"{name} {growth:.2f}x from {int(fewest['workers'])} to {int(most['workers'])}"))
    return sorted(out, reverse=True)


def scaling(verdicts: verdict.Verdicts) -> list[str]:
    """Per model: the strategy whose own throughput grows most from its fewest workers to its most, where that
    growth is beyond what a rerun moves it and beyond the next strategy's by the same rule; else none is clear.
    Figures too wide to rank (verdict.WIDE_SHARE) take no part."""
    rows, spread = verdicts.rankable, verdicts.spread
    if rows.empty:
        return []
    said = []
    for model, group in rows.groupby("model"):
        found = growths(group, spread)
        if not found:
            continue
        (best, bar, text), runner = found[0], found[1] if len(found) > 1 else None
        clear = best > bar and (runner is None or best - runner[0] > math.hypot(bar, runner[1]))
        said.append(f"{model} {text}" if clear else f"{model}: none clear")
    return wrap("Scales best (growth beyond a rerun's and the next strategy's): ", said)


def wrap(head: str, parts: list[str]) -> list[str]:
    if not parts:
        return []
    lines, line = [], head
    for i, part in enumerate(parts):
        piece = part + (";" if i < len(parts) - 1 else ".")
        if len(line) + len(piece) + 1 > ANSWER_WIDTH and line.strip():
            lines.append(line.rstrip())
            line = "  "
        line += piece + " "
    lines.append(line.rstrip())
    return lines


def fit(line: str) -> str:
    return line if len(line) <= ANSWER_WIDTH else line[:ANSWER_WIDTH - 3] + "..."


def fastest_lines(table: pd.DataFrame, room: int) -> list[str]:
    """The fastest strategy per cell, where no cell had both families; the largest worker count per model (and
    link) only where every cell takes more than `room` lines."""
    cells = cell_lines(table)
    if len(cells) <= room:
        return cells
    shown = table.loc[table.groupby([c for c in ("model", "link") if c in table])["workers"].idxmax()]
    return [*cell_lines(shown)[: max(room - 1, 1)], f"(the largest worker count per model; every cell: {ANSWER_FILE})"]


def _short(name: str) -> str:
    """A strategy's name without its flavour (or a constant's without what follows it), for a terminal column; the
    whole is in families.csv."""
    return name.split(" ")[0] if name else "–"


def measured_lines(table: pd.DataFrame, room: int = ANSWER_LINES) -> list[str]:
    """The measured family answer: per model and workers (and link, on capped links) each family's fastest,
    allreduce's examples/s over the parameter servers', the ratio a verdict needs either way, the rounds it rests on
    (r), and the verdict; the largest worker count per model (and link) only where every cell takes more than
    `room` lines."""
    if table.empty:
        return []
    links = table["link_gbit"].notna().any()
    shown = table
    if len(table) + 2 > room:
        keys = ["model", *(["link_gbit"] if links else [])]
        shown = table.loc[table.groupby(keys, dropna=False)["workers"].idxmax()]
    link_head = f"{'Gbit/s':>6} " if links else ""
    lines = ["Parameter servers or allreduce, measured here (ratio: allreduce's examples/s over the ps'):",
             f"{'model':<10}{'w':>2} {link_head} {'towers':<12} {'param. servers':<15}{'allreduce':<13}"
             f"{'averaging':<12}{'ratio':>6} {'needs':>6} {'r':>2} verdict"]
    for _, row in shown.iterrows():
        link = f"{row['link_gbit']:>6g} " if links else ""
        lines.append(f"{row['model']:<10}{int(row['workers']):>2} {link} {_short(row['in_graph']):<12} "
                     f"{_short(row['parameter_servers']):<15}{_short(row['allreduce']):<13}"
                     f"{_short(row['parameter_averaging']):<12}{row['ratio']:>5.2f}x {row['needs']:>5.2f}x "
                     f"{int(row['rounds']):>2} {row['verdict']}")
    if len(shown) < len(table):
        lines.append(f"(the largest worker count per model; every cell: {families.FAMILIES_FILE})")
    return lines


def quantity(value: float, unit: str) -> str:
    """A constant's value as a reader reads it: seconds in us or ms, rates in MB/s or GB/s."""
    if unit == "s":
        return f"{value * 1e6:.3g} us" if value < 1e-3 else f"{value * 1e3:.3g} ms"
    if unit == "B/s":
        return f"{value / 1e9:.3g} GB/s" if value >= 1e9 else f"{value / 1e6:.3g} MB/s"
    return f"{value:.3g} {unit}".strip()


def _projected_cell(row: pd.Series | None, units: dict[str, str]) -> str:
    """Which family is ahead, the ratio and its interval; where the interval holds 1, which family is ahead
    below the break-even of the constant the answer turns on."""
    if row is None:
        return "–"
    turns_on = row.get("turns_on") if isinstance(row.get("turns_on"), str) else ""
    if row["verdict"] == families.TIE and turns_on:
        if pd.notna(row.get("break_even")):
            who = "ar" if row["ahead_below"] == families.ALLREDUCE_AHEAD else "ps"
            return f"{who} while {turns_on} < {quantity(float(row['break_even']), units.get(turns_on, ''))}"
        return f"overlap, turns on {turns_on}"
    word = {families.ALLREDUCE_AHEAD: "allreduce", families.PS_AHEAD: "ps", families.TIE: "overlap"}[row["verdict"]]
    return f"{word} {row['ratio']:.3g}x [{row['low']:.3g}-{row['high']:.3g}]"


CELL = 36  # a projected cell's column, and a space after it whatever its text's length


def projected_lines(table: pd.DataFrame, profile: dict) -> list[str]:
    """The projected family answer: per model and link, at each worker count, which family is ahead, the ratio
    and its interval; where the two families' interval holds 1, the constant the answer turns on and its
    break-even (families.csv holds every cell's)."""
    if table.empty:
        return []
    counts = sorted(table["workers"].unique())
    units = {c["name"]: c.get("unit", "") for c in profile.get("constants", [])}
    level = f"{100 * DEFAULT_LEVEL:g} %"  # the level python -m bench project gives by default, as the comparison asks
    lines = [f"Projected to hosts like this one, a CPU worker each (profile {profile.get('name', '?')}); "
             f"ratio [{level} bounds]:",
             (f"{'model':<10}{'Gbit/s':>6}  " + "".join(f"{f'{n} workers':<{CELL}} " for n in counts)).rstrip()]
    for (model, link), group in table.groupby(["model", "link_gbit"], sort=False):
        at = {int(r["workers"]): r for _, r in group.iterrows()}
        lines.append(f"{model:<10}{link:>6g}  " + "".join(f"{_projected_cell(at.get(n), units):<{CELL}} "
                                                          for n in counts).rstrip())
    return lines


def lines(verdicts: verdict.Verdicts, table: pd.DataFrame, found: pd.DataFrame | None = None,
          profile: dict | None = None, said: Sequence[str] = ()) -> list[str]:
    """The answer's lines without the report's path: the machine, the family answer measured here and projected to a
    cluster of machines like this one (`found`: families.both), what was not ranked, scaling, why the slowest family
    loses; the fastest-strategy table where no cell had both families. `said`: the preset's lines on its sizing."""
    runs = verdicts.runs
    found = found if found is not None else families.measured(verdicts)
    here = found[found["source"] == families.MEASURED] if len(found) else found
    there = found[found["source"] == families.PROJECTED] if len(found) else found
    cells = measured_lines(here, room=CELL_LINES) or fastest_lines(table, room=CELL_LINES)
    wide = verdict.unranked(verdicts)
    notes = wrap(f"Not ranked (95 % interval beyond ±{verdict.WIDE_SHARE:.0%}): ", wide)[:2]
    fastest = [f"Fastest strategy per cell: {ANSWER_FILE} and the report."] if len(here) else []
    slowest = list({model: line for model, _, line in reversed(why.summaries(verdicts))}.values())[::-1]
    why_lines = ["Why the slowest family loses (the largest part of its step):", *[f"  {ln}" for ln in slowest]] \
        if slowest else []
    head = [*machine(runs), spread_line(verdicts, table)]
    converging = convergence_answer.lines(verdicts.convergence)
    out = [*head, *cells, *said, *converging, *projected_lines(there, profile or {}), *notes, *scaling(verdicts)[:2],
           *fastest]
    room = ANSWER_LINES - 1 - len(out)  # the report's line aside
    if room >= len(why_lines):
        out += why_lines
    return [fit(line) for line in out[: ANSWER_LINES - 1]]


def write(table: pd.DataFrame, folder: Path) -> Path:
    path = folder / ANSWER_FILE
    verdict.csv_frame(table).to_csv(path, index=False)
    return path
