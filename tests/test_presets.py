"""`./run_bench.sh all` itself, small: a run that fails is shown and the comparison goes on, a
run past its time limit is ended and marked, repeats are folded with an interval."""

import html
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from bench.drivers.presets.matrix import BASELINE_REPEATS
from tests.conftest import ROOT
from tests.processes import PRESET_LIMIT_S, RUN_LIMIT_S, leftover_processes, task_processes

pytestmark = pytest.mark.slow
# TIMEOUT_S, each run's limit in the comparison: the hung ps-sync run is ended at it, and a clean single
# run and a ps-sync run's first steps must come well inside it: ~7 s here (5 of them start-up), ~14 s
# beside a busy process
REPEATS, TIMEOUT_S = 2, 30
# single's 1-worker run is the baseline: repeated to BASELINE_REPEATS whatever --repeats
BASELINE_RUNS = max(REPEATS, BASELINE_REPEATS)
RUNS = REPEATS + BASELINE_RUNS
# Long enough that ps-sync is still training after a few of its 0.5 s writes of steps.csv
# (step_log.FLUSH_S): at 60 steps the rows appeared only as the worker ended.
STEPS = 1000
T_975 = {1: 12.706204736174698, 2: 4.302652729911275}  # Student's t, 97.5th percentile, by degrees of freedom


def ps_worker_1(seen: set[str]) -> tuple[psutil.Process, Path] | None:
    """ps-sync's worker 1 of a run not seen before, once that run has recorded a few steps."""
    for proc, run_dir, role, index in task_processes():
        if (role, index) == ("worker", 1) and "throughput-ps-sync" in run_dir.name and run_dir.name not in seen:
            steps = run_dir / "steps.csv"
            if steps.is_file() and steps.read_text().count("\n") > 4:
                return proc, run_dir
    return None


def next_worker_1(seen: set[str], process: subprocess.Popen, timeout_s: float = RUN_LIMIT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "the comparison ended early"
        found = ps_worker_1(seen)
        if found:
            seen.add(found[1].name)
            return found
        time.sleep(0.1)
    raise AssertionError("no ps-sync run started")


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    argv = [sys.executable, "-m", "bench", "all", "--strategies", "single,ps-sync", "--workers", "2",
            "--models", "mlp", "--steps", str(STEPS), "--batch-size", "32", "--repeats", str(REPEATS),
            "--convergence-steps", "0", "--timeout-s", str(TIMEOUT_S), "--output", str(out)]
    run = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    try:
        worker, killed = next_worker_1(seen, run)
        worker.kill()  # as the OOM killer would
        worker, hung = next_worker_1(seen, run)
        worker.suspend()  # a deadlock: no exit, no step; the run's stall limit (120 s) is past the preset's
        stopped_at = time.monotonic()
        stdout, stderr = run.communicate(timeout=PRESET_LIMIT_S)
    finally:
        if run.poll() is None:
            run.kill()
    return {"out": out, "killed": killed, "hung": hung, "stopped_at": stopped_at, "code": run.returncode,
            "stdout": stdout, "stderr": stderr}


def test_every_run_was_made_and_reported(comparison):
    assert comparison["code"] == 0, comparison["stderr"][-3000:]
    assert comparison["stderr"].count("] throughput: ") == RUNS
    summary = pd.read_csv(comparison["out"] / "summary.csv")
    assert len(summary) == RUNS
    assert (summary["status"] == "ok").sum() == RUNS - 2
    assert (comparison["out"] / "report.html").is_file()


def test_a_killed_run_is_shown_failed_and_the_comparison_goes_on(comparison):
    record = json.loads((comparison["killed"] / "run.json").read_text())
    assert record["status"] == "failed: worker 1 was killed by SIGKILL"
    assert f"{comparison['killed'].name}: failed: worker 1 was killed by SIGKILL" in comparison["stderr"]
    page = (comparison["out"] / "report.html").read_text()
    body = page[page.index('<table id="failed-table">'):]
    statuses = re.findall(r'data-col="status" data-value="([^"]*)"', body[: body.index("</table>")])
    assert sorted(html.unescape(s) for s in statuses) == sorted(
        ["failed: worker 1 was killed by SIGKILL", f"failed: timed out after {TIMEOUT_S} s (--timeout-s)"])


def test_a_run_past_its_time_limit_is_ended_and_marked(comparison):
    record = json.loads((comparison["hung"] / "run.json").read_text())
    assert record["status"] == f"failed: timed out after {TIMEOUT_S} s (--timeout-s)"
    assert record["ended_by_launcher_as"].startswith("interrupted")  # it ended its own processes first
    assert f"  failed: timed out after {TIMEOUT_S} s; ended" in comparison["stderr"]
    assert not leftover_processes(str(comparison["hung"]))


def test_repeats_are_folded_with_an_interval_over_them(comparison):
    summary = pd.read_csv(comparison["out"] / "summary.csv")
    singles = summary[(summary["strategy"] == "single") & (summary["status"] == "ok")]["throughput_examples_per_s"]
    assert len(singles) == BASELINE_RUNS
    page = (comparison["out"] / "report.html").read_text()
    body = page[page.index('<table id="headline-table">'):]
    row = next(r for r in re.findall(r"<tr data-run=[^>]*>(.*?)</tr>", body[: body.index("</table>")])
               if 'data-col="workers" data-value="1"' in r)
    values = dict(re.findall(r'data-col="([^"]+)" data-value="([^"]*)"', row))
    samples = singles.to_numpy()
    half = T_975[BASELINE_RUNS - 1] * np.std(samples, ddof=1) / math.sqrt(BASELINE_RUNS)
    assert float(values["throughput_examples_per_s"]) == pytest.approx(samples.mean(), rel=1e-9)
    assert float(values["throughput_ci95_examples_per_s"]) == pytest.approx(half, rel=1e-6)


def test_the_report_is_rewritten_between_runs_and_says_how_many_are_in(tmp_path, monkeypatch):
    from bench.drivers.presets import runner

    monkeypatch.setattr(runner.InterimReport, "SHARE", 10.0)  # every run, however long the report takes
    seen = []

    def before(i: int) -> None:  # run i starts: the report of the runs before it is there
        page = tmp_path / "report.html"
        seen.append(html.unescape(page.read_text()) if page.exists() else None)

    args = ["--strategy", "single", "--model", "mlp", "--data", "digits", "--steps", "20", "--eval-every", "0"]
    code = runner.run_all("compare", [(f"run {i}", [*args, "--run-name", f"r{i}"]) for i in range(3)], tmp_path,
                          timeout_s=RUN_LIMIT_S, before=before)
    assert code == 0
    assert seen[0] is None
    for done, page in enumerate(seen[1:], 1):
        assert f"{done} of 3 runs in" in page and f"{done} runs from" in page
    final = html.unescape((tmp_path / "report.html").read_text())
    assert "3 runs from" in final and "is running" not in final


def test_the_preset_says_how_many_runs_are_left_and_about_how_long():
    from bench.drivers.presets.runner import time_left

    assert time_left(time.monotonic(), 0, 10) == ""
    text = time_left(time.monotonic() - 120, 2, 10)  # 1 min a run so far
    assert text == " (2 done, 8 left, about 8 min left)"


def test_the_comparison_ends_on_its_answer_and_writes_answer_csv(comparison):
    from bench.analysis.report.answer import ANSWER_LINES, ANSWER_WIDTH

    lines = comparison["stdout"].strip().splitlines()
    assert lines[0].startswith("Answer on ") and lines[-1].startswith("report: ")
    assert len(lines) <= ANSWER_LINES and all(len(line) <= ANSWER_WIDTH for line in lines[:-1])
    folder = next(comparison["out"].glob("compare-*"))
    rows = pd.read_csv(folder / "answer.csv")
    assert list(rows.columns) == ["model", "workers", "fastest", "runner_up", "lead", "verdict"]
    summary = pd.read_csv(comparison["out"] / "summary.csv")
    ran = summary[(summary["status"] == "ok") & (summary["purpose"] == "throughput")]
    # a cell whose every run failed, or whose every figure is too wide to rank (95 % interval beyond ±25 %), has
    # no verdict
    from bench.analysis.report.verdict import WIDE_SHARE

    unranked = {w for w, group in ran.groupby("workers") if (group["ci95_share"] > WIDE_SHARE).all()}
    assert set(rows["workers"]) == set(ran["workers"]) - unranked
