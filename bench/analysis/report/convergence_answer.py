"""The comparison's answer on time to accuracy, beside its throughput answer: per strategy of the convergence
runs made on one machine (no capped link: the tradeoffs preset's runs are its own section), the time and steps
to the target accuracy over its seeds, or "not reached" with its best; and per family, parameter servers against
allreduce, the family whose best strategy reaches the target first, by the throughput verdict's kind of rule:
a lead counts only beyond what a rerun (here, another seed) moves it. convergence.csv holds both."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench.analysis.report.convergence_settings import NOT_REACHED, REACHED, SOME
from bench.analysis.report.families import ALLREDUCE_AHEAD, PS_AHEAD, TIE
from bench.metrics import t975
from bench.run.contract import ALLREDUCE, PARAMETER_SERVER

CONVERGENCE_FILE = "convergence.csv"
UNDECIDED = "undecided"
def pooled_spread(table: pd.DataFrame) -> tuple[float, int]:
    """The log spread of a time to target from one seed to another, pooled over the strategies that reached it
    in two seeds or more, and its degrees of freedom (0: no strategy gives one)."""
    rows = table[(table["reached"] > 1) & table["log_sd"].notna()] if len(table) else table
    dof = int((rows["reached"] - 1).sum()) if len(rows) else 0
    if dof == 0:
        return math.nan, 0
    return math.sqrt(float(((rows["reached"] - 1) * rows["log_sd"] ** 2).sum()) / dof), dof


def family_best(table: pd.DataFrame, family: str) -> pd.Series | None:
    """The family's strategy that reached the target first in every seed; else its strategy with the best
    accuracy; None where it ran none."""
    mine = table[table["family"] == family]
    if mine.empty:
        return None
    reached = mine[mine["status"] == REACHED]
    if len(reached):
        return reached.loc[reached["time_to_target_s"].idxmin()]
    return mine.loc[mine["best_accuracy"].idxmax()]


def verdict(table: pd.DataFrame) -> dict | None:
    """Parameter servers against allreduce on time to accuracy (None where either family has no run): the
    family ahead, its lead (the other's time over its own) and the lead it needs, or TIE, or UNDECIDED where the
    seeds cannot say (one seed, or some seeds of a family's best reached the target and some not)."""
    ps, ar = family_best(table, PARAMETER_SERVER), family_best(table, ALLREDUCE)
    if ps is None or ar is None:
        return None
    out = {"parameter_servers": ps["variant"], "allreduce": ar["variant"], "first": "", "lead": math.nan,
           "needs": math.nan, "verdict": UNDECIDED, "seeds": int(min(ps["seeds"], ar["seeds"]))}
    statuses = {ps["status"], ar["status"]}
    if SOME in statuses or statuses == {NOT_REACHED} or out["seeds"] < 2:
        return out
    if statuses == {REACHED, NOT_REACHED}:  # every seed of one, none of the other
        out["verdict"] = ALLREDUCE_AHEAD if ar["status"] == REACHED else PS_AHEAD
        return out
    sd, dof = pooled_spread(table)
    if dof == 0:
        return out
    first, second = (ar, ps) if ar["time_to_target_s"] <= ps["time_to_target_s"] else (ps, ar)
    out["lead"] = second["time_to_target_s"] / first["time_to_target_s"]
    out["first"] = ALLREDUCE if first is ar else PARAMETER_SERVER
    out["needs"] = math.exp(t975(dof) * sd * math.sqrt(1 / first["reached"] + 1 / second["reached"]))
    ahead = ALLREDUCE_AHEAD if first is ar else PS_AHEAD
    out["verdict"] = ahead if out["lead"] > out["needs"] else TIE
    return out


def said(row: pd.Series) -> str:
    if row["status"] == REACHED:
        return f"{row['time_to_target_s']:.1f} s, {row['steps_to_target']:,.0f} steps"
    if row["status"] == NOT_REACHED:
        return f"not reached, best {row['best_accuracy']:.3f}"
    return f"{row['reached']} of {row['seeds']} seeds reached, best {row['best_accuracy']:.3f}"


def verdict_line(found: dict) -> str:
    head = "To accuracy:"
    if found["verdict"] == UNDECIDED:
        why = "one seed" if found["seeds"] < 2 else "a family's best reached it in some seeds only, or none did"
        return f"{head} undecided ({why})."
    ps, ar = found["parameter_servers"], found["allreduce"]
    if math.isnan(found["lead"]):
        reached = ar if found["verdict"] == ALLREDUCE_AHEAD else ps
        return f"{head} {found['verdict']} (only {reached} reached it, in every seed)."
    first, second = (ar, ps) if found["first"] == ALLREDUCE else (ps, ar)
    lead, needs = found["lead"], found["needs"]
    return f"{head} {found['verdict']} ({first} {lead:.2f}x sooner than {second}, needs {needs:.2f}x)."


def lines(table: pd.DataFrame, room: int = 8) -> list[str]:
    """The answer's block from `table` (strategies'): a head, a line per strategy (the largest worker count's), the
    families' verdict; where that takes more than `room` lines (every strategy ran: a comparison without --budget),
    the head, the verdict and where the rest is."""
    if table.empty:
        return []
    table = table[table["workers"] == table["workers"].max()]
    first = table.iloc[0]
    seeds = sorted(set(table["seeds"]))
    out = [f"Time to accuracy {first['target_accuracy']:g} on {first['data']} ({first['model']}, "
           f"{int(first['workers'])} workers; {'/'.join(map(str, seeds))} seed{'s' if seeds != [1] else ''} each, "
           "geometric mean):"]
    found = verdict(table)
    verdicts = [verdict_line(found)] if found is not None else []
    if len(table) + len(out) + len(verdicts) > room:
        return [*out, *verdicts, f"  (every strategy's: {CONVERGENCE_FILE})"]
    return [*out, *[f"  {row['variant']:<22} {row['family']:<20} {said(row)}" for _, row in table.iterrows()],
            *verdicts]


def write(table: pd.DataFrame, folder: Path) -> Path | None:
    """convergence.csv from `table` (strategies'): a row per strategy (kind "strategy") and the families' verdict
    (kind "families")."""
    if table.empty:
        return None
    rows = [table.assign(kind="strategy").drop(columns=["log_sd"])]
    for workers, group in table.groupby("workers"):
        found = verdict(group)
        if found is not None:
            rows.append(pd.DataFrame([{"kind": "families", "model": group["model"].iloc[0],
                                       "data": group["data"].iloc[0], "workers": workers, **found}]))
    path = folder / CONVERGENCE_FILE
    pd.concat(rows, ignore_index=True).to_csv(path, index=False)
    return path


def html_parts(found: pd.DataFrame) -> list[str]:
    """The answer section's time-to-accuracy table and verdict from `found` (strategies'; empty where no convergence
    run ran here)."""
    from bench.analysis.report.html import note, table

    if found.empty:
        return []
    columns = [("variant", "strategy", "text"), ("family", "family", "text"), ("workers", "workers", "int"),
               ("seeds", "seeds", "int"), ("reached", "reached", "int"), ("time_to_target_s", "time to target s", "s"),
               ("steps_to_target", "steps to target", "int"), ("best_accuracy", "best accuracy", "fraction")]
    verdicts = [verdict_line(v) for _, group in found.groupby("workers") if (v := verdict(group)) is not None]
    return [table(found, columns, "convergence-answer"),
            note(f"Time to validation accuracy {found['target_accuracy'].iloc[0]:g} on the teacher task, from the "
                 "first training step, its geometric mean over the seeds that reached it; steps are global steps "
                 "(an asynchronous run's count every worker's update). " + " ".join(verdicts) + " A lead counts "
                 "only beyond the 95 % t bound of the seed-to-seed spread pooled over the strategies; a family "
                 f"whose best reached the target in some seeds and not others is {UNDECIDED}. The same rows are "
                 f"{CONVERGENCE_FILE} beside this report.")]
