"""The comparison's runs sized by its budget (bench.drivers.presets.budget) as they go: each run's steps
set just before it starts, the rule that set them written into its run.json (`sizing`), what it cost
learned after it ends, and a convergence run the budget has no room for left out with a line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bench.analysis.report.answer import fit
from bench.analysis.report.verdict import WIDE_SHARE
from bench.drivers.presets.budget import MOST_ROUNDS, REPORT_S, Budget, Cell, Sizing
from bench.run.process.records import RunFolder

SIZED_FLAGS = ("--steps", "--warmup-steps")


def with_steps(argv: Sequence[str], sizing: Sizing) -> list[str]:
    """`argv` with its --steps and --warmup-steps values replaced by the sizing's."""
    values = {"--steps": str(sizing.steps), "--warmup-steps": str(sizing.warmup_steps)}
    out = list(argv)
    for flag in SIZED_FLAGS:
        out[out.index(flag) + 1] = values[flag]
    return out


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
    """A runner.Sizer: the comparison's planned runs (`cells`, in the runner's order) within `budget`. Where the
    budget cannot hold them all, every model is narrowed alike: runs not begun are left out, the least needed and
    the last first, until those left fit at their least (Budget.least_s). Least needed: runs outside a family cell
    (Cell.first); then, in the family cells, the strategies other than each family's fastest in the family cells
    measured so far; the first model's family cell is never left out."""

    def __init__(self, cells: Sequence[Cell], budget: Budget, more_rounds: bool = True) -> None:
        self.cells, self.budget, self.more_rounds = list(cells), budget, more_rounds
        self.sizings: dict[int, Sizing] = {}
        self.left_out: list[str] = []  # convergence runs left out, each with why
        self.skipped: set[int] = set()  # throughput runs left out for want of time
        self.rates: dict[int, float] = {}  # examples/s of the family cells' runs so far
        self.again_wanted: set[int] = set()  # runs to measure once more: their figure too wide to rank
        self.measured_again: set[int] = set()
        self.folders: dict[int, set[Path]] = {}  # each run's folders, as it ended
        self.rounds_given: list[str] = []  # the family cells given another round, one entry a round
        self.in_round: set[int] = set()  # runs of such a round about to run again, at their first steps

    def kept(self, cells: Sequence[Cell], start: int = 0) -> list[Cell]:
        """`cells` (the planned runs from index `start` on) less those left out."""
        return [c for i, c in enumerate(cells, start) if i not in self.skipped]

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
        """Before throughput run `index`: leave out runs not begun (this one included) until the runs left fit; where
        only runs a family cell needs are left, the last model's whole cell goes. Decided afresh before every run
        from what the runs so far cost: a run left out earlier comes back where the budget now holds it."""
        reached = {c.model for c in self.cells[:index] if c.first}  # family cells begun, or left out once begun
        dropped = {c.model for i, c in enumerate(self.cells[:index]) if c.first and i in self.skipped}
        begun = (reached - dropped) | {self.cells[0].model}  # the first model's family cell is never left out
        said = bool(self.skipped)
        self.skipped -= {i for i in range(index, len(self.cells))
                         if not (self.cells[i].first and self.cells[i].model in dropped)}
        while True:
            left = [i for i in range(index, len(self.cells)) if i not in self.skipped]
            least = self.budget.least_s([self.cells[i] for i in left])
            victims = [i for i in left if self.cells[i].purpose == "throughput"
                       and not (self.cells[i].first and self.cells[i].model in begun and self.priority(i) == 0)]
            if least <= self.budget.left_s() - REPORT_S or not victims:
                return
            if not said:
                said = True
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

    def argv(self, index: int, argv: list[str]) -> list[str] | None:
        cell = self.cells[index]
        if index in self.in_round:
            self.in_round.discard(index)
            return with_steps(argv, self.sizings[index])
        if cell.purpose == "throughput":
            self.narrow(index)
            if index in self.skipped:
                return None
        sizing = self.budget.size(cell, self.kept(self.cells[index + 1:], index + 1))
        if sizing is None:
            left = max(0.0, self.budget.left_s() - REPORT_S)  # the report's time is kept back
            line = (f"{cell.purpose}: {cell.strategy} {cell.model} x{cell.workers} (needs about "
                    f"{self.budget.convergence_s(cell):.0f} s, {left:.0f} s left)")
            self.left_out.append(line)
            say(f"left out {line}")
            return None
        self.sizings[index] = sizing
        return with_steps(argv, sizing)

    def ended(self, index: int, wall_s: float, folders: set[Path]) -> None:
        sizing = self.sizings[index]
        summary = {}
        for path in folders:
            record = RunFolder(path).update_run(sizing={**sizing.record(), "wall_s": round(wall_s, 2)})
            summary = record.get("summary") or summary
        self.folders[index] = folders
        self.learn(index, wall_s, summary)

    def learn(self, index: int, wall_s: float, summary: dict) -> None:
        """What run `index` cost (its run.json's summary): the budget learns it; a family cell's run ranks its
        family; a figure too wide to rank is measured again where the budget allows."""
        self.budget.learn(self.cells[index], self.sizings[index], wall_s, summary)
        if self.cells[index].first and summary.get("throughput_examples_per_s"):
            self.rates[index] = float(summary["throughput_examples_per_s"])
        if self._too_wide(index, summary) and index not in self.measured_again:
            self.again_wanted.add(index)

    def _too_wide(self, index: int, summary: dict) -> bool:
        """A throughput run whose 95 % interval is wider than WIDE_SHARE of its figure, where the budget holds one
        more run of it beside the throughput runs left at their least."""
        cell = self.cells[index]
        rate, half = summary.get("throughput_examples_per_s"), summary.get("throughput_ci95_examples_per_s")
        if cell.purpose != "throughput" or not rate or half is None or half / rate <= WIDE_SHARE:
            return False
        return self.budget.least_s([cell, *self.kept(self.cells[index + 1:], index + 1)]) \
            <= self.budget.left_s() - REPORT_S

    def again(self, index: int) -> bool:
        if index not in self.again_wanted:
            return False
        self.again_wanted.discard(index)
        self.measured_again.add(index)
        for path in self.folders.get(index, ()):  # kept, and left out of every figure the answer ranks
            RunFolder(path).update_run(superseded=f"measured again: its 95 % interval was wider than ±{WIDE_SHARE:.0%}")
        cell = self.cells[index]
        say(f"measuring {cell.strategy} {cell.model} x{cell.workers} again: its 95 % interval was wider than "
            f"±{WIDE_SHARE:.0%} of its figure")
        return True

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
        if self.rounds_given:
            given = {c: self.rounds_given.count(c) for c in dict.fromkeys(self.rounds_given)}
            out += (" Rounds beyond the first, to the family cells closest to their bar: "
                    f"{', '.join(f'{c} {n}' for c, n in given.items())}.")
        if self.measured_again:
            again = [self.cells[i] for i in sorted(self.measured_again)]
            out += (f" Measured again, their first interval wider than ±{WIDE_SHARE:.0%}: "
                    f"{'; '.join(f'{c.strategy} {c.model} x{c.workers}' for c in again)}.")
        left_out = [f"{c.strategy} {c.model} x{c.workers}" for c in map(self.cells.__getitem__, sorted(self.skipped))]
        if left_out or self.left_out:
            out += f" Left out for want of time: {'; '.join([*left_out, *self.left_out])}."
        return out

    def another_round(self, folder: Path) -> list[int]:
        """After the planned runs: another round of the family cell whose verdict is closest to its bar (the rerun
        rule's, bench.analysis.report.families), its parameter-server and allreduce runs in turn at the steps of
        their first; none where the budget cannot hold both, or every cell has MOST_ROUNDS."""
        if not self.more_rounds:
            return []
        from bench.analysis.report.build import summary_frame
        from bench.analysis.report.families import measured

        runs = summary_frame([folder])
        for _, cell in closest_first(measured(runs)).iterrows():
            pair = [self.index_of(runs, cell, column) for column in ("parameter_servers", "allreduce")]
            if None in pair:
                continue
            cost = sum(self.budget.startup_s(self.cells[i])
                       + (self.sizings[i].steps - self.sizings[i].warmup_steps) * self.budget.step_s(self.cells[i])
                       for i in pair)
            if cost > self.budget.left_s() - REPORT_S:
                continue
            order = pair if int(cell["rounds"]) % 2 == 0 else pair[::-1]  # A B, then B A: a drift touches both alike
            self.in_round.update(order)
            self.rounds_given.append(f"{cell['model']} x{int(cell['workers'])}")
            say(f"another round of {cell['model']} x{int(cell['workers'])}: its family verdict is the closest to "
                "its bar")
            return order
        return []

    def index_of(self, runs: pd.DataFrame, cell: pd.Series, column: str) -> int | None:
        """The planned run of the family cell's fastest strategy in `column` (a variant's name), where it ran."""
        named = runs[(runs["variant"] == cell[column]) & (runs["model"] == cell["model"])]
        if named.empty:
            return None
        strategy = named["strategy"].iloc[0]
        return next((i for i, c in enumerate(self.cells) if i in self.sizings and c.purpose == "throughput"
                     and (c.strategy, c.model, c.workers) == (strategy, cell["model"], int(cell["workers"]))), None)

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
