"""The comparison's time budget (bench.drivers.presets.budget): its flags, and its sizing run against a
simulated machine whose steps and start-ups the probe got wrong, on a clock the test moves."""

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from bench.drivers.presets.budget import (
    LEAST_MEASURED_STEPS,
    REPORT_S,
    Budget,
    Cell,
    Probed,
    parse_budget,
    parse_ci_width,
)
from bench.drivers.presets.runner import Turn, with_steps
from bench.errors import UsageError
from bench.run.contract import ALLREDUCE, ALWAYS, FAMILY_FASTEST, IN_GRAPH, PARAMETER_AVERAGING, PARAMETER_SERVER

NO_TENSORFLOW = True


def test_budget_and_width_flags():
    assert parse_budget("10m") == 600 and parse_budget("90s") == 90 and parse_budget("600") == 600
    assert parse_budget("1.5h") == 5400
    for bad in ("ten", "10 minutes", "20s", "-5m"):
        with pytest.raises(UsageError, match="--budget"):
            parse_budget(bad)
    assert parse_ci_width("5%") == pytest.approx(0.05) and parse_ci_width("0.1") == pytest.approx(0.1)
    for bad in ("0", "100%", "x"):
        with pytest.raises(UsageError, match="--ci-width"):
            parse_ci_width(bad)


class Machine:
    """True costs: a global step of `strategy` at W workers is `slow[strategy]` x W/2 times the baseline's,
    and a run starts in 3 s plus 2 s per extra worker; every run's interval is `spread` (a share of its
    throughput) at 1 measured step, narrowing as one over the root of its steps."""

    def __init__(self, step_s: dict[str, float], slow: dict[str, float], spread: float = 3.0) -> None:
        self.step_s, self.slow, self.spread, self.now = step_s, slow, spread, 0.0

    def true_step_s(self, cell: Cell) -> float:
        return self.step_s[cell.model] * (1.0 if cell.baseline else self.slow[cell.strategy] * cell.workers / 2)

    def run(self, cell: Cell, steps: int, warmup: int) -> tuple[float, dict]:
        step = self.true_step_s(cell)
        startup = 3.0 + 2.0 * (cell.workers - 1)
        wall = startup + steps * step * (1.4 if cell.purpose == "convergence" else 1.0)
        self.now += wall
        measured = steps - warmup
        examples_per_step = 64 * cell.workers
        rate = examples_per_step / step
        return wall, {"throughput_examples_per_s": rate, "global_steps": steps, "examples": examples_per_step * steps,
                      "throughput_ci95_examples_per_s": rate * self.spread / math.sqrt(measured)}


def cells(convergence_steps: int = 2500) -> list[Cell]:
    out = []
    for model in ("mlp", "cnn", "embedding"):
        out.append(Cell("single", model, 1, "throughput", 100, True))
        for strategy in ("allreduce", "ps-sync", "ps-async"):
            out += [Cell(strategy, model, w, "throughput", 100, False) for w in (2, 4)]
    return out + [Cell(s, "mlp", 2, "convergence", convergence_steps, s == "single")
                  for s in ("single", "allreduce", "ps-sync", "ps-async")]


def simulate(total_s: float, machine: Machine, probed: Probed, ci_width: float = 0.05):
    budget = Budget(total_s, ci_width, probed, started=0.0, clock=lambda: machine.now)
    plan, sized = cells(), []
    for i, cell in enumerate(plan):
        sizing = budget.size(cell, plan[i + 1:])
        if sizing is None:
            sized.append((cell, None))
            continue
        wall, summary = machine.run(cell, sizing.steps, sizing.warmup_steps)
        budget.learn(cell, sizing, wall, summary)
        sized.append((cell, sizing))
    return machine.now, sized


# the probe saw a quiet machine; the runs see one twice as slow, and strategies slower than the prior says
PROBED = Probed({"mlp": 0.002, "cnn": 0.05, "embedding": 0.01}, startup_s=2.0)


def slow_machine(spread: float = 3.0) -> Machine:
    return Machine({"mlp": 0.004, "cnn": 0.1, "embedding": 0.02}, {"allreduce": 1.2, "ps-sync": 3.0, "ps-async": 2.0},
                   spread)


def test_a_comparison_ends_within_its_budget_though_the_probe_was_wrong():
    spent, sized = simulate(600, slow_machine(), PROBED)
    assert spent <= 600 - REPORT_S + 1
    throughput = [s for c, s in sized if c.purpose == "throughput"]
    assert all(s is not None and s.steps - s.warmup_steps >= LEAST_MEASURED_STEPS for s in throughput)
    # runs whose intervals are still wide use what start-ups leave: the comparison is not cut far short
    assert spent >= 0.8 * (600 - REPORT_S)


def test_a_short_budget_leaves_out_convergence_runs_it_has_no_room_for():
    _, sized = simulate(120, slow_machine(), PROBED)
    left_out = [c for c, s in sized if s is None]
    assert left_out and all(c.purpose == "convergence" for c in left_out)
    assert all(s is not None for c, s in sized if c.purpose == "throughput")


def test_runs_stop_at_the_width_their_model_needs_on_a_long_budget():
    _, sized = simulate(3600, slow_machine(spread=0.2), PROBED, ci_width=0.05)
    later = [s for c, s in sized if c.purpose == "throughput" and c.model == "mlp"][1:]
    assert later and all(s.rule == "ci-width" for s in later)
    # 20 % at one step: (0.2 / 0.05)^2 = 16 steps, below the least a run measures
    assert all(s.steps - s.warmup_steps == LEAST_MEASURED_STEPS for s in later)


def family_first_cells() -> list[Cell]:
    """cells() as a budgeted comparison orders them (bench.drivers.presets.matrix.family_cells_first): each model's
    baseline's 1-worker run and its parameter-server and allreduce runs at its most workers first, marked, then the
    rest."""
    families = {"single": IN_GRAPH, "allreduce": ALLREDUCE, "ps-sync": PARAMETER_SERVER, "ps-async": PARAMETER_SERVER}
    plan = [replace(c, family=families[c.strategy]) for c in cells()]
    in_cell = [c.purpose == "throughput" and (c.workers == 4 or c.baseline) for c in plan]
    first = [replace(c, first=True) for c, inside in zip(plan, in_cell) if inside]
    return first + [c for c, inside in zip(plan, in_cell) if not inside]


def row_of(cell: Cell, summary: dict, path: str) -> dict:
    """A run's row as collect.load reads it, enough for the family verdicts (tests.test_answer.run)."""
    from tests.test_answer import run

    rate = summary["throughput_examples_per_s"]
    row = run(cell.strategy, rate, cell.workers, cell.model, cell.family or "in-graph", baseline=cell.baseline,
              window=summary["throughput_ci95_examples_per_s"] / rate)
    return {**row, "purpose": cell.purpose, "path": path, "superseded": None}


def run_within(total_s: float, plan: list[Cell], machine: Machine, more_rounds: bool = False,
               fails: Callable[[Turn], bool] = lambda turn: False, where: Path | None = None,
               no_figure: Callable[[Cell], bool] = lambda cell: False):
    """The queue run against the simulated machine: each run it yields made (ended ok unless `fails` says), and
    what it returned learned; with `where`, each run has a folder there (a run.json of its own)."""
    from bench.drivers.presets.budgeted import BudgetedRuns

    budget = Budget(total_s, 0.05, PROBED, started=0.0, clock=lambda: machine.now)
    runs, ran = BudgetedRuns(plan, budget, more_rounds=more_rounds), []
    while (turn := runs.take()) is not None:
        cell = plan[turn.index]
        wall, summary = machine.run(cell, *turn.steps)
        ok = not fails(turn)
        folder = (where or Path("unwritten")) / f"run-{len(ran)}"
        if where is not None:
            folder.mkdir()
            (folder / "run.json").write_text("{}")
        row = row_of(cell, summary, str(folder))
        if no_figure(cell):  # ended ok with too few steps for a figure: collect.load's row has None for it
            row.update(throughput_examples_per_s=None, throughput_ci95_examples_per_s=None)
        runs.learn(turn, wall, summary if ok else {}, ok, pd.DataFrame([row]) if ok
                   else pd.DataFrame([{"path": str(folder), "ok": False}]), {folder} if where else set())
        ran.append(cell)
    return runs, ran


def test_a_budget_that_cannot_hold_every_run_narrows_every_model_alike_and_keeps_each_family_cell(capsys):
    machine = slow_machine()
    runs, ran = run_within(210, family_first_cells(), machine)
    throughput = [c for c in ran if c.purpose == "throughput"]
    for model in ("mlp", "cnn", "embedding"):  # every model keeps its family verdict at its most workers
        mine = {c.strategy for c in throughput if c.model == model and c.first}
        assert "allreduce" in mine and mine & {"ps-sync", "ps-async"}, (model, mine)
    assert runs.skipped and all(not runs.cells[i].first or runs.cells[i].strategy != "allreduce"
                                for i in runs.skipped)
    assert machine.now <= 210 + 15  # within the budget, give or take the last run's misjudged cost
    err = capsys.readouterr().err
    assert "every model narrowed alike" in err and all(len(line) <= 100 for line in err.splitlines())
    assert runs.notes() and runs.notes()[0].startswith("Narrowed by the budget:")
    assert not runs.models_without_family_cell()


def test_a_model_whose_family_cell_cannot_fit_is_said_to_be_left_out():
    machine = slow_machine()
    runs, ran = run_within(90, family_first_cells(), machine)
    assert {c.model for c in ran if c.purpose == "throughput"} >= {"mlp"}  # the first model's family cell always
    missing = runs.models_without_family_cell()
    assert missing and "mlp" not in missing
    assert any(line.startswith("Not answered:") and missing[-1] in line for line in runs.notes())


def test_sized_steps_replace_the_fixed_ones():
    _, sized = simulate(600, slow_machine(), PROBED)
    sizing = sized[0][1]
    argv = ["--strategy", "single", "--steps", "500", "--warmup-steps", "10", "--batch-size", "64"]
    assert with_steps(argv, (sizing.steps, sizing.warmup_steps)) == [
        "--strategy", "single", "--steps", str(sizing.steps), "--warmup-steps", str(sizing.warmup_steps),
        "--batch-size", "64"]


def test_two_answers_agree_differ_by_a_tie_or_reverse():
    from bench.analysis.report.agreement import verdict

    assert verdict("a ahead", "a ahead") == "same" and verdict("tie", "tie") == "same"
    assert verdict("tie", "b ahead") == "tie in one" and verdict("a ahead", "tie") == "tie in one"
    assert verdict("a ahead", "b ahead") == "reversed"


@pytest.mark.slow
def test_a_budgeted_comparison_sizes_every_run_and_says_so_in_its_records_and_report(tmp_path):
    import json
    import subprocess
    import sys

    import pandas as pd

    from tests.conftest import ROOT
    from tests.processes import PRESET_LIMIT_S

    done = subprocess.run([sys.executable, "-m", "bench", "all", "--budget", "30s", "--strategies", "single,ps-sync",
                           "--workers", "2", "--models", "mlp", "--convergence-steps", "300",
                           "--output", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=PRESET_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "probe: single mlp x1" in done.stderr and "min budget left" in done.stderr
    folder = next(tmp_path.glob("compare-*"))
    records = [json.loads(p.read_text()) for p in folder.glob("*/run.json")]
    throughput = [r for r in records if r["purpose"] == "throughput"]
    assert throughput and all(r["status"] == "ok" for r in records)
    for r in throughput:
        sizing = r["sizing"]
        assert sizing["rule"] in ("budget", "ci-width", "least steps") and sizing["budget_s"] == 30
        assert r["config"]["steps"] == sizing["steps"] and r["summary"]["warmup_steps"] == sizing["warmup_steps"]
    # the answer's convergence runs (of these, ps-sync's: single is not in it) keep their steps where they ran,
    # and are named where the budget left them out
    ran = {r["config"]["strategy"] for r in records if r["purpose"] == "convergence"}
    assert ran <= {"ps-sync"} and all(r["config"]["steps"] == 300 for r in records if r["purpose"] == "convergence")
    assert ran or "left out convergence: ps-sync" in done.stderr
    table = pd.read_csv(tmp_path / "summary.csv")
    assert set(table.loc[table["purpose"] == "throughput", "sizing_rule"]) <= {"budget", "ci-width", "least steps"}
    assert (table["budget_s"].dropna() == 30).all() and table["ci95_share"].notna().any()
    page = (tmp_path / "report.html").read_text()
    assert "Sized by a budget of 0.5 min" in page


def test_the_probe_runs_in_the_comparisons_folder_with_its_runs_flags(tmp_path, monkeypatch):
    # in /tmp, a Slurm allocation's nodes could not see it: every budgeted comparison under salloc failed at its
    # probe; and without the runs' flags (--on-cpu on a host whose GPUs TensorFlow cannot see) it failed too
    from bench.drivers.presets import probe as probing
    from bench.run.process.records import RUN_FILE

    seen = []

    def execute(argv, timeout_s, out, log):
        seen.append((out, argv))
        run = out / "r1"
        run.mkdir()
        (run / RUN_FILE).write_text('{"summary": {"global_steps": 45, "throughput_examples_per_s": 6400.0, '
                                    '"global_step_s": 0.01}}')

    monkeypatch.setattr(probing, "execute", execute)
    monkeypatch.setattr(probing, "global_step_s", lambda summary: summary.get("global_step_s"))
    probed = probing.probe("single", [("mlp", "synthetic")], 64, 60.0, tmp_path / "results", ["--on-cpu"])
    [(out, argv)] = seen
    assert out.parent == tmp_path / "results" and argv[-1] == "--on-cpu" and probed.step_s == {"mlp": 0.01}
    assert not out.exists()  # gone before the comparison's report reads its folder


def answer_first_cells() -> list[Cell]:
    """family_first_cells() as a budgeted comparison now orders them: the family cells, then the answer's
    convergence runs at the cells' workers (two seeds, and of averaging's two strategies the faster's only), then
    the rest."""
    plan = family_first_cells()
    first = [c for c in plan if c.first]
    first += [Cell(s, "mlp", 4, "throughput", 100, False, family=PARAMETER_AVERAGING, first=True)
              for s in ("local-sgd", "local-sgd-ps")]
    converging = [Cell(s, "mlp", 4, "convergence", 1000, False, family=f, answer=a)
                  for _ in range(2)
                  for s, f, a in (("allreduce", ALLREDUCE, ALWAYS), ("ps-sync", PARAMETER_SERVER, ALWAYS),
                                  ("local-sgd", PARAMETER_AVERAGING, FAMILY_FASTEST),
                                  ("local-sgd-ps", PARAMETER_AVERAGING, FAMILY_FASTEST))]
    return first + converging + [c for c in plan if not c.first and c.purpose == "throughput"]


def test_the_answers_convergence_runs_are_kept_before_the_throughput_runs_outside_the_family_cells(capsys):
    runs, ran = run_within(360, answer_first_cells(), slow_machine_with_averaging())
    converging = [c.strategy for c in ran if c.purpose == "convergence"]
    # two seeds each of the card's, and of averaging only its faster one (local-sgd, 1.0 against 2.5)
    assert sorted(converging) == ["allreduce", "allreduce", "local-sgd", "local-sgd", "ps-sync", "ps-sync"]
    assert not runs.left_out_convergence and runs.skipped  # the rest narrowed to make room
    for model in ("mlp", "cnn", "embedding"):  # every family cell still has both families
        mine = {c.strategy for c in ran if c.model == model and c.first}
        assert "allreduce" in mine and mine & {"ps-sync", "ps-async"}, (model, mine)
    assert "local-sgd-ps left to local-sgd" in capsys.readouterr().err
    # too short for every family cell and the convergence runs: the family cells stay, convergence runs go
    runs, ran = run_within(150, answer_first_cells(), slow_machine_with_averaging())
    assert {c.model for c in ran if c.first} == {"mlp", "cnn", "embedding"} and runs.left_out_convergence


def slow_machine_with_averaging() -> Machine:
    return Machine({"mlp": 0.004, "cnn": 0.1, "embedding": 0.02},
                   {"allreduce": 1.2, "ps-sync": 3.0, "ps-async": 2.0, "local-sgd": 1.0, "local-sgd-ps": 2.5})


def small_plan() -> list[Cell]:
    return [Cell("single", "mlp", 1, "throughput", 100, True, False, IN_GRAPH, True),
            Cell("allreduce", "mlp", 4, "throughput", 100, False, True, ALLREDUCE, True),
            Cell("ps-sync", "mlp", 4, "throughput", 100, False, True, PARAMETER_SERVER, True),
            Cell("ps-sync", "mlp", 2, "throughput", 100, False, True, PARAMETER_SERVER)]


def test_a_figure_too_wide_is_measured_again_next_and_superseded_only_by_a_replacement_that_ended_ok(tmp_path):
    import json

    from bench.drivers.presets.budgeted import AGAIN, SUPERSEDED

    def fails(turn: Turn) -> bool:
        return turn.why == AGAIN and small_plan()[turn.index].strategy == "allreduce"

    # intervals so wide that every run but the last, for which no time is left, is measured again
    runs, ran = run_within(600, small_plan(), slow_machine(spread=100.0), fails=fails, where=tmp_path)
    assert [(c.strategy, c.workers) for c in ran] == [("single", 1), ("single", 1), ("allreduce", 4), ("allreduce", 4),
                                                      ("ps-sync", 4), ("ps-sync", 4), ("ps-sync", 2)]
    record = {f.name: json.loads((f / "run.json").read_text()) for f in tmp_path.iterdir()}
    assert record["run-2"] == {}  # allreduce's replacement (run-3) failed: its first figure stands
    assert record["run-4"] == {"superseded": SUPERSEDED} and record["run-0"] == {"superseded": SUPERSEDED}
    standing = runs.runs[runs.runs["superseded"].isna() & runs.runs["ok"].astype(bool)]
    assert sorted(standing["path"].map(lambda p: Path(p).name)) == ["run-1", "run-2", "run-5", "run-6"]
    assert runs.standing[1] == {tmp_path / "run-2"} and runs.measured_again == {0, 1, 2}


def test_after_the_plan_the_family_cell_closest_to_its_bar_gets_rounds_in_turn_reversed(capsys):
    from bench.drivers.presets.budgeted import ROUND

    machine = Machine({"mlp": 0.004}, {"allreduce": 1.05, "ps-sync": 1.0}, spread=0.2)  # a close verdict
    runs, ran = run_within(300, small_plan(), machine, more_rounds=True)
    rounds = [(c.strategy, c.workers) for c in ran[len(small_plan()):]]
    assert rounds[:4] == [("allreduce", 4), ("ps-sync", 4), ("ps-sync", 4), ("allreduce", 4)]  # A B, then B A
    assert runs.round_cells[:2] == ["mlp x4", "mlp x4"] and "another round of mlp x4" in capsys.readouterr().err
    assert len(runs.round_cells) <= 4  # MOST_ROUNDS a cell: the first and four more
    # each at the steps of its first
    first = {i: runs.sizings[i].steps for i in (1, 2)}
    assert all(runs.sizings[i].steps == first[i] for i in (1, 2))
    assert ROUND == "(another round)" and runs.budget.left_s() >= REPORT_S - 1


def test_runs_that_ran_are_never_listed_as_left_out_after_rounds():
    machine = Machine({"mlp": 0.004, "cnn": 0.1, "embedding": 0.02}, {"allreduce": 1.05, "ps-sync": 1.0,
                                                                      "ps-async": 2.0}, spread=0.2)
    # the baseline run twice (as every comparison does), and a run that ended ok without a figure: the verdicts of
    # the rounds are folded from rows of every type
    plan = [*family_first_cells(), Cell("single", "mlp", 1, "throughput", 100, True, False, IN_GRAPH)]
    runs, ran = run_within(250, plan, machine, more_rounds=True,
                           no_figure=lambda cell: (cell.strategy, cell.model) == ("ps-sync", "cnn"))
    assert runs.skipped and runs.round_cells  # narrowed, then rounds
    made = {(c.strategy, c.model, c.workers, c.purpose) for c in ran}
    listed = {tuple(line.split(": ", 1)[1].replace(" x", " ").split()) for line in runs.left_out()
              if line.startswith("throughput")}
    assert not {(s, m, int(w), "throughput") for s, m, w in listed} & made
