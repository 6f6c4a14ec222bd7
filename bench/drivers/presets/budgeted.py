"""The comparison's runs sized by its budget (bench.drivers.presets.budget) as they go: each run's steps
set just before it starts, the rule that set them written into its run.json (`sizing`), what it cost
learned after it ends, and a convergence run the budget has no room for left out with a line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from bench.drivers.presets.budget import REPORT_S, Budget, Cell, Sizing
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
    print(f"compare: {line}", file=sys.stderr, flush=True)


def say_rounds(rounds: int, budget: Budget) -> None:
    more = ("one round: a verdict's threshold comes from the spread of the baseline's repeats, pooled (a larger "
            "--budget fits more rounds)") if rounds == 1 else "a verdict's threshold comes from their spread"
    say(f"{rounds} round{'s' if rounds > 1 else ''} of the throughput runs fit the {budget.total_s / 60:.1f} min "
        f"budget; {more}")


class BudgetedRuns:
    """A runner.Sizer: the comparison's planned runs (`cells`, in the runner's order) within `budget`."""

    def __init__(self, cells: Sequence[Cell], budget: Budget) -> None:
        self.cells, self.budget = list(cells), budget
        self.sizings: dict[int, Sizing] = {}
        self.left_out: list[str] = []
        self.begun: set[str] = set()  # models whose throughput runs have started
        self.dropped: set[str] = set()  # models left out for want of time
        least = budget.least_s(self.cells)
        if least > budget.left_s() - REPORT_S:
            say(f"this machine needs about {least / 60:.1f} min for the throughput runs' start-ups and least steps "
                f"alone, more than the {budget.total_s / 60:.1f} min budget: the last models will be left out as the "
                "runs show what they cost (a larger --budget, or fewer --strategies or --workers, keeps them)")

    def kept(self, cells: Sequence[Cell]) -> list[Cell]:
        return [c for c in cells if not (c.purpose == "throughput" and c.model in self.dropped)]

    def fit_models(self, index: int) -> None:
        """Before a model's first run: leave out the last models not begun until the throughput runs left fit
        in the budget at their least; the first model is never left out."""
        while True:
            left = self.kept(self.cells[index:])
            waiting = list(dict.fromkeys(c.model for c in left
                                         if c.purpose == "throughput" and c.model not in self.begun))
            least = self.budget.least_s(left)
            if not waiting or (not self.begun and len(waiting) == 1) or least <= self.budget.left_s() - REPORT_S:
                return
            model = waiting[-1]
            runs = sum(1 for c in left if c.purpose == "throughput" and c.model == model)
            self.dropped.add(model)
            line = (f"{model}'s {runs} throughput runs (the runs left need about {least / 60:.1f} min at the least; "
                    f"{max(0.0, self.budget.left_s()) / 60:.1f} min of the budget is left)")
            self.left_out.append(line)
            say(f"left out {line}")

    def argv(self, index: int, argv: list[str]) -> list[str] | None:
        cell = self.cells[index]
        if cell.purpose == "throughput" and cell.model not in self.begun | self.dropped:
            self.fit_models(index)
            if cell.model not in self.dropped:
                self.begun.add(cell.model)
        if cell.purpose == "throughput" and cell.model in self.dropped:
            return None
        sizing = self.budget.size(cell, self.kept(self.cells[index + 1:]))
        if sizing is None:
            left = max(0.0, self.budget.left_s() - REPORT_S)  # the report's time is kept back
            line = (f"{cell.purpose}: {cell.strategy} {cell.model} x{cell.workers} (about "
                    f"{self.budget.convergence_s(cell):.0f} s; {left:.0f} s of the budget left before the report)")
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
        self.budget.learn(self.cells[index], sizing, wall_s, summary)

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
        if self.left_out:
            out += f" Left out for want of time: {'; '.join(self.left_out)}."
        return out
