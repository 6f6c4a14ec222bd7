"""The comparison's runs as one queue sized by its budget (bench.drivers.presets.budget): the planned runs in
their order (family cells, the answer's convergence runs, the rest), a run measured again right after it where its
figure is too wide to rank, and, once the plan is done, further rounds of the family cells closest to their bar.
Each run's steps are set just before it starts and written into its run.json (`sizing`); what it cost is learned
as it ends, and its records are read then, once: the verdicts for the next round are computed from them. One rule
says whether runs fit (`BudgetedRuns.fits`): narrowing, measuring again and rounds all ask it."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bench.analysis.report.answer import fit
from bench.analysis.report.verdict import WIDE_SHARE
from bench.drivers.presets.budget import MOST_ROUNDS, REPORT_S, Budget, Cell, Sizing
from bench.drivers.presets.runner import Turn
from bench.run.contract import FAMILY_FASTEST
from bench.run.process.records import RunFolder

AGAIN, ROUND = "again", "(another round)"  # why a planned run is made once more
SUPERSEDED = f"measured again: its 95 % interval was wider than ±{WIDE_SHARE:.0%}"


def say(line: str) -> None:
    print(fit(f"compare: {line}"), file=sys.stderr, flush=True)


def closest_first(found: pd.DataFrame) -> pd.DataFrame:
    """The measured family cells (bench.analysis.report.families.measured) with fewer than MOST_ROUNDS rounds, the
    verdict closest to its bar first: by how far the log of the ratio is from the log of the ratio it needs."""
    if found.empty:
        return found
    open_ = found[found["rounds"] < MOST_ROUNDS]
    distance = (np.log(open_["ratio"].astype(float)).abs() - np.log(open_["needs"].astype(float))).abs()
    return open_.loc[distance.sort_values(kind="stable").index]


class BudgetedRuns:
    """A runner.Queue: the comparison's planned runs (`cells`, in order) within `budget`. Where the budget cannot
    hold them all, every model is narrowed alike: runs not begun are left out, the least needed and the last first,
    until those left fit at their least. Least needed: runs outside a family cell (Cell.first); then, in the family
    cells, the strategies other than each family's fastest in the family cells measured so far; the first model's
    family cell is never left out."""

    def __init__(self, cells: Sequence[Cell], budget: Budget, more_rounds: bool = True) -> None:
        self.cells, self.budget, self.more_rounds = list(cells), budget, more_rounds
        self.position = 0  # the next planned run not yet decided
        self.pending: deque[tuple[int, str]] = deque()  # decided and not begun: (planned run, AGAIN or ROUND)
        self.sizings: dict[int, Sizing] = {}
        self.skipped: set[int] = set()  # throughput runs left out for want of time
        self.left_out_convergence: list[str] = []  # convergence runs left out, each with why
        self.not_fastest: dict[str, str] = {}  # convergence runs not made: not their family's fastest, by strategy
        self.rates: dict[int, float] = {}  # examples/s of the family cells' runs so far
        self.standing: dict[int, set[Path]] = {}  # each run's folders whose figure stands (ended ok, not superseded)
        self.measured_again: set[int] = set()
        self.round_cells: list[str] = []  # the family cells given another round, one entry a round
        self.rows: list[dict] = []  # every run so far as collect.load reads it, each read once, as it ended

    # the queue

    def take(self) -> Turn | None:
        """The next run to make: one decided already (measured again, a round's), else the next planned run that
        the budget holds, else another round's first; None when there is none."""
        while True:
            if self.pending:
                index, why = self.pending.popleft()
                if why == AGAIN:
                    self.sizings[index] = self.budget.size(self.cells[index], self.kept_from(self.position))
                return Turn(index, self._steps(index), why)
            if self.position < len(self.cells):
                self.position += 1
                if self.planned(self.position - 1):
                    return Turn(self.position - 1, self._steps(self.position - 1))
                continue
            if not (self.more_rounds and self.another_round()):
                return None

    def _steps(self, index: int) -> tuple[int, int]:
        return self.sizings[index].steps, self.sizings[index].warmup_steps

    def planned(self, index: int) -> bool:
        """Whether planned run `index` runs now, sized; a run the budget cannot hold is left out with a line."""
        cell = self.cells[index]
        if cell.purpose == "throughput":
            self.narrow(index)
            if index in self.skipped:
                return False
        elif not self.wanted(index):
            if cell.strategy not in self.not_fastest:
                self.not_fastest[cell.strategy] = self.family_best(cell.family) or ""
                say(f"convergence: {cell.strategy} left to {self.not_fastest[cell.strategy]}, its family's "
                    "fastest here")
            return False
        sizing = self.budget.size(cell, self.kept_from(index + 1))
        if sizing is None:
            left = max(0.0, self.budget.left_s() - REPORT_S)  # the report's time is kept back
            line = (f"{cell.purpose}: {cell.strategy} {cell.model} x{cell.workers} (needs about "
                    f"{self.budget.convergence_s(cell):.0f} s, {left:.0f} s left)")
            self.left_out_convergence.append(line)
            say(f"left out {line}")
            return False
        self.sizings[index] = sizing
        return True

    def ended(self, turn: Turn, wall_s: float, folders: set[Path]) -> None:
        """Run `turn` ended after `wall_s`, its records in `folders`: its sizing written into them and its records
        read, once (learn)."""
        from bench.analysis.runs import collect

        summary, ok, sizing = {}, bool(folders), self.sizings[turn.index].record()
        for path in folders:
            record = RunFolder(path).update_run(sizing={**sizing, "wall_s": round(wall_s, 2)})
            summary = record.get("summary") or summary
            ok = ok and record.get("status") == "ok"
        self.learn(turn, wall_s, summary, ok, collect.load(sorted(folders)), folders)

    def learn(self, turn: Turn, wall_s: float, summary: dict, ok: bool, rows: pd.DataFrame,
              folders: set[Path] = frozenset()) -> None:
        """What run `turn` returned (its summary, whether it ended ok, its rows as collect.load reads them): the
        budget learns what it cost; a family cell's run ranks its family; a replacement that ended ok supersedes the
        figure it replaces; a figure too wide to rank is measured again next, where it fits."""
        index = turn.index
        self.rows += rows.to_dict("records")
        self.budget.learn(self.cells[index], self.sizings[index], wall_s, summary)
        if ok and self.cells[index].first and summary.get("throughput_examples_per_s"):
            self.rates[index] = float(summary["throughput_examples_per_s"])
        if turn.why == AGAIN:
            self._replaced(index, set(folders), ok)
        elif ok:
            self.standing[index] = set(folders)
        if ok and not turn.why and index not in self.measured_again and self._too_wide(index, summary):
            self.measured_again.add(index)
            self.pending.appendleft((index, AGAIN))
            cell = self.cells[index]
            say(f"measuring {cell.strategy} {cell.model} x{cell.workers} again: its 95 % interval was wider than "
                f"±{WIDE_SHARE:.0%} of its figure")

    def _replaced(self, index: int, folders: set[Path], ok: bool) -> None:
        """A run measured again ended: ok, it stands for its setting and the first is superseded (kept, and left out
        of every figure the answer ranks); else the first figure stands."""
        cell = self.cells[index]
        if not ok:
            say(f"{cell.strategy} {cell.model} x{cell.workers} measured again did not end ok: its first figure stands")
            return
        first = self.standing.get(index, set())
        for path in first:
            RunFolder(path).update_run(superseded=SUPERSEDED)
        for row in self.rows:
            if row.get("path") in {str(p) for p in first}:
                row["superseded"] = SUPERSEDED
        self.standing[index] = set(folders)

    @property
    def runs(self) -> pd.DataFrame:
        """The runs so far, one frame (built from the rows: a column's type is that of all its values, where one
        run's row alone, without a figure, would make it an object column)."""
        return pd.DataFrame(self.rows)

    # the one rule: do runs fit

    def fits(self, start: int, extra_s: float = 0.0, convergence: bool = True) -> bool:
        """Whether the planned runs not begun from `start` (less those left out; without their convergence runs,
        with `convergence` False) at their least, and `extra_s` more, fit in what the budget has before the
        report."""
        rest = [c for c in self.kept_from(start) if convergence or c.purpose == "throughput"]
        return self.budget.least_s(rest) + extra_s <= self.budget.left_s() - REPORT_S

    def kept_from(self, start: int) -> list[Cell]:
        """The planned runs from index `start` on, less those left out."""
        return [c for i, c in enumerate(self.cells[start:], start) if i not in self.skipped and self.wanted(i)]

    def wanted(self, index: int) -> bool:
        """False for a convergence run the answer takes only from its family's fastest (FAMILY_FASTEST) once
        another of its family is measured faster."""
        cell = self.cells[index]
        if cell.purpose != "convergence" or cell.answer != FAMILY_FASTEST:
            return True
        best = self.family_best(cell.family)
        return best is None or best == cell.strategy

    def _too_wide(self, index: int, summary: dict) -> bool:
        """A throughput run whose 95 % interval is wider than WIDE_SHARE of its figure, where one more run of it
        fits beside the runs left."""
        cell = self.cells[index]
        rate, half = summary.get("throughput_examples_per_s"), summary.get("throughput_ci95_examples_per_s")
        if cell.purpose != "throughput" or not rate or half is None or half / rate <= WIDE_SHARE:
            return False
        return self.fits(self.position, self.budget.least_s([cell]))

    # narrowing

    def family_best(self, family: str) -> str | None:
        """The family's fastest strategy in the first model's family cell measured (None before any)."""
        measured = [(self.cells[i], rate) for i, rate in self.rates.items() if self.cells[i].family == family]
        if not measured:
            return None
        first_model = measured[0][0].model
        return max((rate, c.strategy) for c, rate in measured if c.model == first_model)[1]

    def priority(self, index: int) -> int:
        """2: outside a family cell; 1: in one, beside another kept run of its family there that is not slower
        (its family's fastest so far, or any where none is known); 0: the one its family keeps in the cell."""
        cell = self.cells[index]
        if not cell.first:
            return 2
        if cell.baseline:
            return 0
        best = self.family_best(cell.family)
        others = [self.cells[i].strategy for i, c in enumerate(self.cells) if c.first and i != index
                  and i not in self.skipped and (c.model, c.family) == (cell.model, cell.family)]
        return 1 if others and cell.strategy != best and (best is None or best in others) else 0

    def narrow(self, index: int) -> None:
        """Before throughput run `index`, the queue's place: leave out runs not begun (this one included) until the
        runs left fit (the convergence runs counted); where only runs a family cell needs are left, the convergence
        runs make room first (each left out when it comes, Budget.size), then the last model's whole cell goes.
        Decided afresh before every planned run from what the runs so far cost: a run left out earlier comes back
        where the budget now holds it."""
        reached = {c.model for c in self.cells[:index] if c.first}  # family cells begun, or left out once begun
        dropped = {c.model for i, c in enumerate(self.cells[:index]) if c.first and i in self.skipped}
        begun = (reached - dropped) | {self.cells[0].model}  # the first model's family cell is never left out
        said = bool(self.skipped)
        self.skipped -= {i for i in range(index, len(self.cells))
                         if not (self.cells[i].first and self.cells[i].model in dropped)}
        while not self.fits(index):
            victims = [i for i in range(index, len(self.cells)) if i not in self.skipped
                       and self.cells[i].purpose == "throughput"
                       and not (self.cells[i].first and self.cells[i].model in begun and self.priority(i) == 0)]
            if not victims or (max(map(self.priority, victims)) == 0 and self.fits(index, convergence=False)):
                return
            if not said:
                said = True
                least = self.budget.least_s(self.kept_from(index))
                say(f"the runs left need {least / 60:.1f} min at their least: every model narrowed alike, family "
                    "cells first")
            victim = max(victims, key=lambda i: (self.priority(i), i))
            model = self.cells[victim].model
            whole = [i for i in victims if self.cells[i].first and self.cells[i].model == model] \
                if self.priority(victim) == 0 else [victim]
            self.skipped.update(whole)

    def models_without_family_cell(self) -> list[str]:
        """Models whose family cell the budget could not hold at all."""
        firsts = [(i, c) for i, c in enumerate(self.cells) if c.first]
        models = dict.fromkeys(c.model for _, c in firsts)
        return [m for m in models if all(i in self.skipped for i, c in firsts if c.model == m)]

    # rounds

    def another_round(self) -> bool:
        """After the planned runs: another round of the family cell whose verdict is closest to its bar (the rerun
        rule's, bench.analysis.report.families, on the runs so far as they ended), its parameter-server and
        allreduce runs in turn at the steps of their first, queued; False where none fits, or every cell has
        MOST_ROUNDS."""
        from bench.analysis.report.aggregate import add_scaling_efficiency
        from bench.analysis.report.families import measured
        from bench.analysis.report.verdict import Verdicts

        if not self.rows:
            return False
        runs = self.runs
        for _, cell in closest_first(measured(Verdicts.of(add_scaling_efficiency(runs)))).iterrows():
            pair = [self.index_of(runs, cell, column) for column in ("parameter_servers", "allreduce")]
            if None in pair:
                continue
            cost = sum(self.budget.startup_s(self.cells[i])
                       + (self.sizings[i].steps - self.sizings[i].warmup_steps) * self.budget.step_s(self.cells[i])
                       for i in pair)
            if not self.fits(len(self.cells), cost):
                continue
            order = pair if int(cell["rounds"]) % 2 == 0 else pair[::-1]  # A B, then B A: a drift touches both alike
            self.pending.extend((i, ROUND) for i in order)
            self.round_cells.append(f"{cell['model']} x{int(cell['workers'])}")
            say(f"another round of {cell['model']} x{int(cell['workers'])}: its family verdict is the closest to "
                "its bar")
            return True
        return False

    def index_of(self, runs: pd.DataFrame, cell: pd.Series, column: str) -> int | None:
        """The planned run of the family cell's fastest strategy in `column` (a variant's name) among `runs`, where it
        ran."""
        named = runs[(runs["variant"] == cell[column]) & (runs["model"] == cell["model"])]
        if named.empty:
            return None
        strategy = named["strategy"].iloc[0]
        return next((i for i, c in enumerate(self.cells) if i in self.sizings and c.purpose == "throughput"
                     and (c.strategy, c.model, c.workers) == (strategy, cell["model"], int(cell["workers"]))), None)

    # what it says

    def status(self) -> str:
        return self.budget.status()

    def remark(self) -> str:
        split = self.budget.split()
        rules: dict[str, int] = {}
        for sizing in self.sizings.values():
            rules[sizing.rule] = rules.get(sizing.rule, 0) + 1
        said = ", ".join(f"{n} by {rule}" for rule, n in sorted(rules.items()))
        out = (f"Sized by a budget of {split['budget'] / 60:.1f} min (--budget; each run's steps and the rule "
               f"that set them are in its run.json and summary.csv): {said}; the probe took {split['probe']:.0f} s, "
               f"the throughput runs {split['throughput'] / 60:.1f} min, the convergence runs "
               f"{split['convergence'] / 60:.1f} min, the rest {split['between runs']:.0f} s "
               f"({(split['probe'] + split['throughput'] + split['convergence'] + split['between runs']) / 60:.1f} min "
               "until the report).")
        if self.round_cells:
            given = {c: self.round_cells.count(c) for c in dict.fromkeys(self.round_cells)}
            out += (" Rounds beyond the first, to the family cells closest to their bar: "
                    f"{', '.join(f'{c} {n}' for c, n in given.items())}.")
        if self.measured_again:
            again = [self.cells[i] for i in sorted(self.measured_again)]
            out += (f" Measured again, their first interval wider than ±{WIDE_SHARE:.0%}: "
                    f"{'; '.join(f'{c.strategy} {c.model} x{c.workers}' for c in again)}.")
        if self.not_fastest:
            out += (" Convergence runs of a family's fastest only: "
                    f"{'; '.join(f'{s} left to {best}' for s, best in self.not_fastest.items())}.")
        return out

    def left_out(self) -> list[str]:
        """The runs the budget left out, a line each (the report's list at its end)."""
        skipped = [f"throughput: {c.strategy} {c.model} x{c.workers}"
                   for c in map(self.cells.__getitem__, sorted(self.skipped))]
        return [*skipped, *self.left_out_convergence]

    def notes(self) -> list[str]:
        """The answer's lines on what the budget left out (ANSWER_WIDTH columns at most)."""
        out = []
        if self.skipped:
            models = dict.fromkeys(self.cells[i].model for i in sorted(self.skipped))
            counts = ", ".join(f"{m} {sum(1 for i in self.skipped if self.cells[i].model == m)}" for m in models)
            out.append(fit(f"Narrowed by the budget: {len(self.skipped)} throughput runs left out ({counts}); "
                                 "the report lists them."))
        missing = self.models_without_family_cell()
        if missing:
            out.append(fit(f"Not answered: {', '.join(missing)} (not even its family cell fit the budget)."))
        return out
