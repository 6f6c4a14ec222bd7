"""A background run that hangs is made once more and said in the session's summary; one that fails
otherwise fails its test at once, with what its record and its processes' logs said."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.background import run_to_end


class Scripted:
    """A stand-in for the session's runner: each call writes the next run's record and log."""

    def __init__(self, statuses: list[str]) -> None:
        self.statuses, self.calls, self.hung_once = statuses, [], []

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        self.calls.append(args)
        status = self.statuses[len(self.calls) - 1]
        run = Path(args[args.index("--output") + 1]) / "20261206-run"
        (run / "logs").mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({"status": status}))
        (run / "logs" / "worker1.log").write_text("session created\nwaiting for its token\n")
        return subprocess.CompletedProcess(args, 0 if status == "ok" else 1, "", "launcher's last words")


def test_a_hung_run_is_made_once_more_and_said(tmp_path):
    runner = Scripted(["failed: no step recorded for 3000 s (hung)", "ok"])
    results = run_to_end("--strategy", "ps-sync")(tmp_path, runner)
    assert json.loads(next(results.glob("*/run.json")).read_text())["status"] == "ok"
    assert len(runner.calls) == 2 and results.name == "again"
    said = runner.hung_once[0]
    assert "--strategy ps-sync" in said and "(hung)" in said and "waiting for its token" in said


@pytest.mark.parametrize("statuses", [["failed: worker 1 exited with status 1"],
                                      ["failed: no step recorded for 3000 s (hung)"] * 2])
def test_a_run_that_fails_otherwise_or_hangs_twice_fails_with_its_account(tmp_path, statuses):
    runner = Scripted(statuses)
    with pytest.raises(AssertionError, match="waiting for its token") as failed:
        run_to_end("--strategy", "ps-sync")(tmp_path, runner)
    assert statuses[-1] in str(failed.value) and "launcher's last words" in str(failed.value)
    assert len(runner.calls) == len(statuses) and not runner.hung_once
