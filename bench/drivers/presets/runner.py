"""One run of a preset (the default comparison, stragglers, network) in a process of its own:
its one-line result shown, everything else logged, and a run past its time limit ended and
marked as such in its run.json."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.run.launch.interrupts import Interrupted, interruptible
from bench.run.process.records import RUN_FILE, RunFolder

END_GRACE_S = 15.0  # a launcher ends its own processes on SIGTERM well within this


def run_folders(output: Path) -> set[Path]:
    return {p.parent for p in output.glob(f"*/{RUN_FILE}")}


def end_group(process: subprocess.Popen, grace_s: float = END_GRACE_S) -> None:
    """SIGTERM the run's process group (the launcher ends what it started), SIGKILL what is left."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        os.killpg(process.pid, signal.SIGCONT)  # a stopped process takes SIGTERM only once continued
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def mark_timed_out(folders: set[Path], timeout_s: float) -> None:
    for path in folders:
        folder = RunFolder(path)
        record = folder.read_run()
        folder.update_run(status=f"failed: timed out after {timeout_s:.0f} s (--timeout-s)",
                          ended_by_launcher_as=record.get("status"))


BENCH = (sys.executable, "-m", "bench")


def strategy_of(args: Sequence[str]) -> str:
    """The strategy a preset's run arguments name (`--strategy NAME`)."""
    return args[list(args).index("--strategy") + 1]


def refused_cells(cells: Iterable[tuple[str, str]]) -> list[str]:
    """The (strategy, model) cells of a preset that a run would refuse (bench.run.validation.model_refusal),
    one line each with why: the preset leaves them out and its report says so."""
    from bench.run import models
    from bench.run.validation import model_refusal
    from strategies import registry

    return [f"{strategy} x {models.label(model)}: {reason}" for strategy, model in dict.fromkeys(cells)
            for reason in [model_refusal(model, registry.get(strategy), registry.all_strategies())] if reason]


def execute(argv: list[str], timeout_s: float, output: Path, log: Path, command: Sequence[str] = BENCH) -> int:
    """`python -m bench ARGV` (or `command` ARGV) writing under `output`; returns its exit status (1 when
    timed out)."""
    before = run_folders(output)
    with open(log, "ab") as out:
        process = subprocess.Popen([*command, *argv], stdout=out, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            _, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            end_group(process)
            mark_timed_out(run_folders(output) - before, timeout_s)
            print(f"  failed: timed out after {timeout_s:.0f} s; ended", file=sys.stderr, flush=True)
            return 1
        except BaseException:
            end_group(process, grace_s=5.0)  # Ctrl-C of the preset: the run in progress ends too
            raise
        out.write(stderr)
    lines = stderr.decode(errors="replace").strip().splitlines()
    result = next((ln for ln in reversed(lines) if ": ok" in ln or ": failed" in ln or ": interrupted" in ln),
                  lines[-1] if lines else "")
    print(f"  {result}", file=sys.stderr, flush=True)
    return process.returncode


def time_left(started: float, done: int, total: int) -> str:
    """ " (3 done, 81 left, about 11 min left)": the runs so far' mean time times the runs left."""
    if done == 0:
        return ""
    per_run = (time.monotonic() - started) / done
    return f" ({done} done, {total - done} left, about {per_run * (total - done) / 60:.0f} min left)"


class InterimReport:
    """The report rewritten between runs, so that it can be read while the preset goes on; never
    while a run trains (it would take that run's cores), and at most SHARE of the time so far."""

    SHARE = 0.03  # a full report takes ~3 s at 84 runs: rewritten about every 100 s, ~3% of the preset

    def __init__(self, name: str, folder: Path, output: Path, total: int, started: float) -> None:
        self.name, self.folder, self.output, self.total, self.started = name, folder, output, total, started
        self.spent = 0.0

    def after_run(self, done: int) -> None:
        from bench.analysis.report.build import write_report

        elapsed = time.monotonic() - self.started
        if self.spent > self.SHARE * elapsed or not run_folders(self.folder):
            return
        began = time.monotonic()
        try:
            html = write_report([self.folder], self.folder, remark=(
                f"The {self.name} preset is running: {done} of {self.total} runs in after {elapsed / 60:.1f} min; "
                "this report is rewritten as runs end."))
            shutil.copy(html, self.output / "report.html")
            shutil.copy(self.folder / "summary.csv", self.output / "summary.csv")
        except Exception as exc:  # noqa: BLE001 - an interim report must not end the preset
            print(f"  (interim report not written: {exc})", file=sys.stderr, flush=True)
        self.spent += time.monotonic() - began


@dataclass(frozen=True)
class Turn:
    """One run a preset makes: which planned run, the steps that replace its planned ones (None: as planned), and
    why it runs once more ("" the first time)."""

    index: int
    steps: tuple[int, int] | None = None  # (steps, warm-up steps)
    why: str = ""


def with_steps(argv: Sequence[str], steps: tuple[int, int]) -> list[str]:
    """`argv` with its --steps and --warmup-steps values replaced."""
    out = list(argv)
    for flag, value in zip(("--steps", "--warmup-steps"), steps, strict=True):
        out[out.index(flag) + 1] = str(value)
    return out


class Queue(Protocol):
    """What a preset runs next (bench.drivers.presets.budgeted: sized by a time budget)."""

    def take(self) -> Turn | None:
        """The next run to make; None when there is none (what it left out, it says)."""

    def ended(self, turn: Turn, wall_s: float, folders: set[Path]) -> None:
        """Run `turn` ended after `wall_s`, its records in `folders`."""

    def status(self) -> str:
        """What is left of the budget, for the progress line ("" for none)."""

    def remark(self) -> str:
        """How it sized the runs, for the report's end."""

    def left_out(self) -> list[str]:
        """The runs it left out, a line each with why."""

    def notes(self) -> list[str]:
        """What the answer says of the sizing (what it left out), a line each."""


class InOrder:
    """The Queue of a preset with fixed steps: every planned run once, in order."""

    def __init__(self, total: int) -> None:
        self.total, self.next = total, 0

    def take(self) -> Turn | None:
        if self.next >= self.total:
            return None
        self.next += 1
        return Turn(self.next - 1)

    def ended(self, turn: Turn, wall_s: float, folders: set[Path]) -> None:
        pass

    def status(self) -> str:
        return ""

    def remark(self) -> str:
        return ""

    def left_out(self) -> list[str]:
        return []

    def notes(self) -> list[str]:
        return []


def run_turn(turn: Turn, runs: Sequence[tuple[str, list[str]]], folder: Path, timeout_s: float,
             command: Sequence[str], progress: str) -> tuple[float, set[Path]]:
    """Make one run as its turn sizes it: its wall time and the run folders it wrote."""
    label, argv = runs[turn.index]
    print(f"[{turn.index + 1}/{len(runs)}] {label}{f' {turn.why}' if turn.why else ''}{progress}", file=sys.stderr,
          flush=True)
    sized = with_steps(argv, turn.steps) if turn.steps else argv
    began, before = time.monotonic(), run_folders(folder)
    execute([*sized, "--output", str(folder)], timeout_s, folder, folder / "matrix.log", command)
    return time.monotonic() - began, run_folders(folder) - before


def make_runs(name: str, queue: Queue, runs: Sequence[tuple[str, list[str]]], folder: Path, timeout_s: float,
              command: Sequence[str], before: Callable[[int], None] | None, interim: InterimReport
              ) -> tuple[int, str | None]:
    """Every run the queue yields, made; how many, and why they stopped early (None: they did not)."""
    made, started = 0, time.monotonic()
    try:
        with interruptible():
            while (turn := queue.take()) is not None:
                if before is not None:
                    before(turn.index)
                progress = f" ({queue.status()})" if queue.status() else time_left(started, made, len(runs))
                wall_s, folders = run_turn(turn, runs, folder, timeout_s, command, progress)
                made += 1
                queue.ended(turn, wall_s, folders)
                interim.after_run(made)
    except Interrupted as exc:
        stopped = f"interrupted ({exc}) after {made} of {len(runs)} runs"
    except Exception as exc:  # noqa: BLE001 - a fault of the preset's own: the runs made so far still get their report
        traceback.print_exc()
        stopped = f"stopped by its own error after {made} runs: {exc!r}"
    else:
        return made, None
    print(f"{name}: {stopped}", file=sys.stderr, flush=True)
    return made, stopped


def run_all(name: str, runs: Sequence[tuple[str, list[str]]], output: Path, timeout_s: float,
            before: Callable[[int], None] | None = None, command: Sequence[str] = BENCH,
            refused: Sequence[str] = (), sizer: Queue | None = None,
            before_report: Callable[[Path], object] | None = None) -> int:
    """Every run of a preset, one after the other, into `output`/NAME-<time>/; then the report,
    also copied (with summary.csv) to `output`. `before(i)` prepares run i (a link cap); `command`
    starts each run (`python -m bench`, or that under salloc). SIGINT or SIGTERM (whatever
    disposition this process inherited) ends the run in progress and the preset; the report then
    shows the runs made so far, and the status is 130 (1 where the preset's own code failed).
    `refused`: cells the preset left out as a run of each would be refused, each with why, which
    the report lists. `sizer`: the queue that says which run is next and sizes it (default: every
    run once, in order, as planned). `before_report(folder)`: what the preset adds to the folder
    before its report reads it (the comparison's projection)."""
    from bench.analysis.report.answer import ANSWER_FILE
    from bench.analysis.report.build import ANSWER_TEXT, write_report

    folder = output / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    for line in refused:
        print(f"{name}: left out {line}", file=sys.stderr, flush=True)
    started = time.monotonic()
    queue = sizer or InOrder(len(runs))
    made, stopped = make_runs(name, queue, runs, folder, timeout_s, command, before,
                              InterimReport(name, folder, output, len(runs), started))
    elapsed = time.monotonic() - started
    said = f"{made} runs" if stopped is None else stopped
    status = 0 if stopped is None else 130 if stopped.startswith("interrupted") else 1
    if stopped is not None and not run_folders(folder):
        return status  # nothing to report
    left_out = [*queue.left_out(), *(f"{line} (a run would refuse it)" for line in refused)]
    if before_report is not None and stopped is None:
        before_report(folder)
    html = write_report([folder], folder, notes=queue.notes(),
                        remark=f"The {name} preset: {said} in {elapsed / 60:.1f} min." + (
                            f" {len(left_out)} left out: listed at the end, with how the runs were sized."
                            if left_out else ""),
                        appendix=(queue.remark(), left_out))
    shutil.copy(html, output / "report.html")
    shutil.copy(folder / "summary.csv", output / "summary.csv")
    print(f"{said} in {elapsed / 60:.1f} min", file=sys.stderr)
    shown = folder / ANSWER_TEXT
    if shown.is_file() and shown.read_text().strip():
        print(shown.read_text().rstrip())
    print(f"report: {(output / 'report.html').resolve()} (answer.csv: {(folder / ANSWER_FILE).resolve()})")
    return status
