"""The comparison's verdicts: per cell (model, workers, and link on the emulated cluster) the fastest
strategy, its lead over the runner-up, and whether that lead is more than a rerun moves a figure on
this machine ("ahead") or not ("tie").

What a rerun moves a figure is measured, not assumed: the spread of log throughput between runs of
one setting (its rounds, --repeats, and the baseline's repeats every comparison makes), pooled over
every setting that ran more than once. A setting with OWN_ROUNDS rounds or more gives its own. One
run's interval over its own time windows is not a rerun's: three fixed-step comparisons of the
same matrix agreed on 6-7 of 9 cells when "ahead" meant "95 % intervals of one run apart"
(docs/presets.md, "What a verdict's interval covers")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from bench.analysis.runs.collect import GROUP_KEY
from bench.metrics import t975

CELL = ["model", "workers"]
OWN_ROUNDS = 5  # a setting with this many rounds has a spread of its own (4 degrees of freedom)
# A figure whose 95 % interval reaches further than this share of itself either side is not ranked, called
# fastest or best, nor used for scaling: one run of local-sgd at 2 workers once gave 46,700 ± 35,100
# examples/s (docs/step-time.md, "Why local SGD's windows spread"). The budgeted comparison measures such a
# figure again while its budget allows (bench.drivers.presets.budgeted).
WIDE_SHARE = 0.25
ANSWER_COLUMNS = ["model", "workers", "fastest", "runner_up", "lead", "verdict"]


@dataclass(frozen=True)
class Spread:
    """Standard deviation of log throughput between runs of one setting, and what it was measured on."""

    sd: float  # nan: no setting ran twice
    dof: int
    settings: int  # settings that ran more than once

    def known(self) -> bool:
        return self.dof >= 1 and not math.isnan(self.sd)

    def said(self) -> str:
        if not self.known():
            return ("no setting ran twice: verdicts use each run's own interval over its time windows, "
                    "which does not hold what moves between runs")
        return (f"a rerun moves a figure by {100 * math.expm1(self.sd):.1f} % (one standard deviation, pooled "
                f"over {self.settings} settings that ran more than once, {self.dof} degrees of freedom)")


def measured(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs a verdict reads: ok, clean throughput runs with a throughput, but those a budgeted comparison
    measured again (`superseded`: their interval was too wide to rank)."""
    if runs.empty:
        return runs
    scenario = runs["scenario"] if "scenario" in runs else pd.Series("clean", index=runs.index)
    replaced = runs["superseded"].notna() if "superseded" in runs else pd.Series(False, index=runs.index)
    keep = runs["ok"] & (runs["purpose"] == "throughput") & (scenario == "clean") \
        & runs["throughput_examples_per_s"].gt(0) & ~replaced
    return runs[keep]


def _keys(runs: pd.DataFrame) -> list[str]:
    return [k for k in GROUP_KEY if k in runs]


def rerun_spread(runs: pd.DataFrame) -> Spread:
    """The pooled spread of log throughput between runs of one setting (`runs`: every run, as collect.load
    reads them)."""
    ok = measured(runs)
    squares, dof, settings = 0.0, 0, 0
    for _, group in ok.groupby(_keys(ok), dropna=False):
        logs = np.log(group["throughput_examples_per_s"].to_numpy(dtype=float))
        if len(logs) < 2:
            continue
        squares += float(((logs - logs.mean()) ** 2).sum())
        dof += len(logs) - 1
        settings += 1
    return Spread(math.sqrt(squares / dof) if dof else math.nan, dof, settings)


def window_share(row: pd.Series) -> float:
    """A setting's own 95 % half-width as a share of its throughput (0 when unknown)."""
    half = row.get("throughput_ci95_examples_per_s")
    rate = row["throughput_examples_per_s"]
    return 0.0 if half is None or pd.isna(half) or not rate else float(half) / float(rate)


def figure_share(row: pd.Series) -> float:
    """How far a setting's figure may be off, as a share of it, either side at 95 %: its runs' own intervals over
    their time windows (`windows_share`: a mean of n runs, each known to its windows' share, is known to the root
    mean square share over root n), and its interval over its rounds where it has OWN_ROUNDS of them. What moves
    between reruns is the verdicts' to weigh (threshold), not a figure's."""
    n = int(row.get("repeats", 1) or 1)
    share = float(row.get("windows_share", 0.0) or 0.0)
    if n >= OWN_ROUNDS:
        share = max(share, window_share(row))
    return share


def settings_of(runs: pd.DataFrame) -> pd.DataFrame:
    """The settings a verdict reads (measured runs, repeats folded, aggregate.settings), each with `share`
    (figure_share) and `too_wide` (share above WIDE_SHARE)."""
    from bench.analysis.report.aggregate import settings

    clean = measured(runs)
    table = settings(clean) if len(clean) else pd.DataFrame()
    if table.empty:
        return table
    table = table.dropna(subset=["throughput_examples_per_s"]).copy()
    table["share"] = [figure_share(row) for _, row in table.iterrows()]
    table["too_wide"] = table["share"] > WIDE_SHARE
    return table


def rankable(table: pd.DataFrame) -> pd.DataFrame:
    """The settings whose figures may be ranked (none too wide)."""
    return table[~table["too_wide"]] if len(table) else table


@dataclass(frozen=True)
class Verdicts:
    """What every verdict of one report reads, computed once (Verdicts.of): its runs, their settings
    (settings_of), the rerun spread (rerun_spread) and, where read, the time to accuracy (convergence)."""

    runs: pd.DataFrame
    settings: pd.DataFrame
    spread: Spread

    @classmethod
    def of(cls, runs: pd.DataFrame) -> Verdicts:
        return cls(runs, settings_of(runs), rerun_spread(runs))

    @property
    def rankable(self) -> pd.DataFrame:
        return rankable(self.settings)

    @cached_property
    def convergence(self) -> pd.DataFrame:
        """Each strategy's time to accuracy over its seeds (convergence_settings.strategies), folded once."""
        from bench.analysis.report.convergence_settings import strategies

        return strategies(self.runs)


def unranked(verdicts: Verdicts) -> list[str]:
    """ "mlp local-sgd (H=4) x2 ± 75 %" for each figure left out of every ranking for its interval's width."""
    table = verdicts.settings
    wide = table[table["too_wide"]] if len(table) else table
    return [f"{row['model']} {name_of(row)} x{int(row['workers'])} ± {100 * row['share']:.0f} %"
            for _, row in wide.iterrows()]


def threshold(best: pd.Series, runner: pd.Series, spread: Spread) -> float:
    """The lead `best` must exceed to be ahead of `runner`: the 95 % two-sided bound of the log ratio of two
    settings' means under the rerun spread (each setting's own where it has OWN_ROUNDS rounds), and never
    less than their own windows' intervals say."""
    windows = math.exp(math.hypot(window_share(best), window_share(runner)))
    if not spread.known():
        return windows
    rounds = [int(row.get("repeats", 1) or 1) for row in (best, runner)]
    own = [row.get("log_sd", math.nan) for row in (best, runner)]
    variances, dofs = [], []
    for n, sd in zip(rounds, own, strict=True):
        if n >= OWN_ROUNDS and not pd.isna(sd):
            variances.append(sd**2 / n)
            dofs.append(n - 1)
        else:
            variances.append(spread.sd**2 / n)
            dofs.append(spread.dof)
    return max(windows, math.exp(t975(min(dofs)) * math.sqrt(sum(variances))))


def answer(verdicts: Verdicts) -> pd.DataFrame:
    """One row per cell: the fastest strategy (its variant), the runner-up, the lead (>= 1), the threshold the
    lead was held to, the verdict and the rounds behind it."""
    spread, thr = verdicts.spread, verdicts.rankable
    if thr.empty:
        return time_to_target_answer(verdicts.runs)
    links = "link_mbit" in thr and thr["link_mbit"].notna().any()
    cell = [*CELL, *(["link_mbit"] if links else [])]
    rows = []
    for key, group in thr.groupby(cell, dropna=False):
        ranked = group.sort_values("throughput_examples_per_s", ascending=False)
        best = ranked.iloc[0]
        row = {**dict(zip(cell, key, strict=True)), "fastest": name_of(best), "runner_up": "", "lead": math.nan,
               "verdict": "only one ran", "threshold": math.nan, "rounds": int(best["repeats"]),
               "throughput_examples_per_s": best["throughput_examples_per_s"],
               "throughput_ci95_examples_per_s": best["throughput_ci95_examples_per_s"]}
        if len(ranked) > 1:
            runner = ranked.iloc[1]
            lead = best["throughput_examples_per_s"] / runner["throughput_examples_per_s"]
            bar = threshold(best, runner, spread)
            row.update(runner_up=name_of(runner), lead=lead, threshold=bar, verdict="ahead" if lead > bar else "tie",
                       rounds=min(int(best["repeats"]), int(runner["repeats"])))
        rows.append(row)
    out = pd.DataFrame(rows)
    out["workers"] = out["workers"].astype(int)
    return out.rename(columns={"link_mbit": "link"}) if links else out


def time_to_target_answer(runs: pd.DataFrame) -> pd.DataFrame:
    """Where the runs are convergence runs on capped links (the tradeoffs preset): per link, the strategy that
    reaches the target first, its lead in time over the next, and "tie" where their 95 % intervals over
    seeds (reruns) overlap (bench.analysis.report.tradeoffs)."""
    from bench.analysis.report.tradeoffs import overlap, settings

    empty = pd.DataFrame(columns=[*ANSWER_COLUMNS, "threshold", "rounds"])
    linked = runs[runs["link_mbit"].notna() & (runs["purpose"] == "convergence")] \
        if len(runs) and "link_mbit" in runs else runs.iloc[0:0]
    table = settings(linked) if len(linked) else linked
    if table.empty:
        return empty
    rows = []
    for link, group in table[table["all_reached"]].groupby("link_mbit"):
        ranked = group.sort_values("time_to_target_s")
        first = ranked.iloc[0]
        row = {"model": linked["model"].iloc[0], "workers": int(linked["workers"].max()), "link": link,
               "fastest": first["variant"], "runner_up": "", "lead": math.nan, "verdict": "only one reached",
               "threshold": math.nan, "rounds": int(first["runs"])}
        if len(ranked) > 1:
            second = ranked.iloc[1]
            row.update(runner_up=second["variant"], lead=second["time_to_target_s"] / first["time_to_target_s"],
                       verdict="tie" if overlap(first, second) else "ahead",
                       rounds=min(int(first["runs"]), int(second["runs"])))
        rows.append(row)
    return pd.DataFrame(rows) if rows else empty


def name_of(row: pd.Series) -> str:
    variant = row.get("variant")
    return str(variant) if isinstance(variant, str) and variant else str(row["strategy"])


def csv_frame(table: pd.DataFrame) -> pd.DataFrame:
    """answer.csv's columns: ANSWER_COLUMNS, and `link` (Mbit/s) where the runs varied links."""
    columns = [*ANSWER_COLUMNS, *(["link"] if "link" in table else [])]
    out = table[columns].copy() if len(table) else pd.DataFrame(columns=columns)
    out["lead"] = out["lead"].round(3)
    return out


def said(row: pd.Series) -> str:
    """ "X ahead" or "tie", as two comparisons' verdicts are set side by side."""
    return f"{row['fastest']} ahead" if row["verdict"] == "ahead" else row["verdict"]
