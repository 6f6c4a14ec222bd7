"""The answer a comparison ends on, where its user looks: the terminal (at most ANSWER_LINES lines of at most
ANSWER_WIDTH columns, the report's path aside) and answer.csv beside the report. Both read the verdicts
(bench.analysis.report.verdict) and the why section's lines (bench.analysis.report.why)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench.analysis.report import verdict, why

ANSWER_LINES = 25
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


def spread_line(runs: pd.DataFrame, table: pd.DataFrame) -> str:
    spread = verdict.rerun_spread(runs)
    rounds = int(table["rounds"].min()) if len(table) and table["rounds"].notna().any() else 1
    if verdict.measured(runs).empty:  # time to target on capped links: its seeds are its reruns
        return (f"Time to target accuracy over {rounds} seed{'s' if rounds > 1 else ''}; 'lead': the next one's "
                "time over the first's; 'ahead': their 95 % intervals over seeds apart.")
    said = f"{rounds} round{'s' if rounds > 1 else ''} per setting; "
    if not spread.known():
        return said + "no setting ran twice: 'ahead' means beyond one run's own interval."
    return said + (f"'ahead': a lead beyond what a rerun moves it (a run varies {100 * math.expm1(spread.sd):.1f} %, "
                   f"{spread.settings} settings).")


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


def scaling(runs: pd.DataFrame) -> list[str]:
    """Per model: the strategy whose own throughput grows most from its fewest workers to its most."""
    from bench.analysis.report.aggregate import settings

    clean = verdict.measured(runs)
    if clean.empty:
        return []
    rows = settings(clean)
    said = []
    for model, group in rows.groupby("model"):
        best, gain = None, 0.0
        for name, mine in group.groupby("variant"):
            mine = mine.sort_values("workers")
            if len(mine) < 2 or mine["workers"].iloc[0] < 1:
                continue
            growth = mine["throughput_examples_per_s"].iloc[-1] / mine["throughput_examples_per_s"].iloc[0]
            per = growth / (mine["workers"].iloc[-1] / mine["workers"].iloc[0])
            if best is None or per > gain:
                best, gain = (name, growth, int(mine["workers"].iloc[0]), int(mine["workers"].iloc[-1])), per
        if best is not None:
            said.append(f"{model} {best[0]} {best[1]:.2f}x from {best[2]} to {best[3]}")
    return wrap("Scales best (its own throughput, fewest workers to most): ", said)


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


def lines(runs: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """The answer's lines without the report's path: machine, verdicts, scaling and why the slowest loses."""
    cells = cell_lines(table)
    slowest = list({model: line for model, _, line in reversed(why.summaries(runs))}.values())[::-1]
    tail = [*scaling(runs), *(["Why the slowest family loses (the largest part of its step):"]
                              + [f"  {line}" for line in slowest] if slowest else [])]
    head = [*machine(runs), spread_line(runs, table)]
    room = ANSWER_LINES - 1 - len(head) - len(tail)  # the report's line aside
    if len(cells) > room:
        shown = table.loc[table.groupby([c for c in ("model", "link") if c in table])["workers"].idxmax()]
        cells = [*cell_lines(shown)[: max(room - 1, 1)],
                 f"(the largest worker count per model; every cell: {ANSWER_FILE})"]
    out = [*head, *cells, *tail]
    return [fit(line) for line in out[: ANSWER_LINES - 1]]


def write(table: pd.DataFrame, folder: Path) -> Path:
    path = folder / ANSWER_FILE
    verdict.csv_frame(table).to_csv(path, index=False)
    return path
