"""A background run that fails or hangs fails its test at once (it is never made again), with what its
record, the files it wrote and its processes' logs said, and its folder kept."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.background import run_to_end

HUNG = "failed: no step recorded for 900 s (hung): worker 1 stepping (step) for 901 s"


class Scripted:
    """A stand-in for the session's runner: each call writes the next run's record, rows and log."""

    def __init__(self, statuses: list[str]) -> None:
        self.statuses, self.calls = statuses, []

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        self.calls.append(args)
        status = self.statuses[len(self.calls) - 1]
        run = Path(args[args.index("--output") + 1]) / "20261206-run"
        (run / "logs").mkdir(parents=True)
        (run / "workers").mkdir()
        hang = {"processes": [{"process": "worker 1", "alive": True, "phase": "stepping", "call": "step",
                               "stack_in": "logs/worker1.log"}]}
        (run / "run.json").write_text(json.dumps({"status": status, **({"hang": hang} if "hung" in status else {})}))
        (run / "steps.csv").write_text("run_id,worker\nr,0\n")
        (run / "workers" / "worker0.json").write_text("{}")
        stack = 'Thread 0x7f (most recent call first):\n  File "ps.py", line 9 in run_step\n'
        (run / "logs" / "worker1.log").write_text(stack)
        return subprocess.CompletedProcess(args, 0 if status == "ok" else 1, "", "launcher's last words")


def test_an_ok_run_is_made_once(tmp_path):
    runner = Scripted(["ok"])
    results = run_to_end("--strategy", "ps-sync")(tmp_path, runner)
    assert len(runner.calls) == 1 and json.loads(next(results.glob("*/run.json")).read_text())["status"] == "ok"


@pytest.mark.parametrize("status", ["failed: worker 1 exited with status 1", HUNG])
def test_a_run_that_fails_or_hangs_fails_its_test_at_once_with_its_account_and_its_folder_kept(tmp_path, status):
    runner = Scripted([status, "ok"])
    with pytest.raises(AssertionError) as failed:
        run_to_end("--strategy", "ps-sync")(tmp_path, runner)
    said = str(failed.value)
    assert len(runner.calls) == 1  # never made again
    assert status in said and "launcher's last words" in said and "in run_step" in said
    assert "steps.csv rows: 1; written: workers/worker0.json" in said
    if "hung" in status:
        assert "worker 1: alive True, stepping (step), stack in logs/worker1.log" in said
    kept = Path(re.search(r"its folder is kept: (\S+)", said).group(1))
    assert (kept / "20261206-run" / "logs" / "worker1.log").exists()
