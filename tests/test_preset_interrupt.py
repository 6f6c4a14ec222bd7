"""A preset stops on SIGINT, even one started with SIGINT ignored (a script's background job):
the run in progress ends with every process it started, no later run starts, and the report
shows what was made."""

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.processes import ENDING_LIMIT_S, TRAINING_LIMIT_S, leftover_processes, task_processes

pytestmark = pytest.mark.slow


def first_run_training(out, process: subprocess.Popen, timeout_s: float = TRAINING_LIMIT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1][-3000:]
        for _, run_dir, _, _ in task_processes():
            if run_dir.parent.parent == out and (run_dir / "steps.csv").is_file() \
                    and (run_dir / "steps.csv").read_text().count("\n") > 4:
                return run_dir
        time.sleep(0.1)
    raise AssertionError("no run started training")


def test_sigint_to_a_preset_that_ignores_it_ends_the_run_in_progress_and_the_preset(tmp_path):
    out = tmp_path / "results"
    argv = [sys.executable, "-m", "bench", "all", "--strategies", "ps-async", "--workers", "2", "--models", "mlp",
            "--steps", "100000", "--repeats", "3", "--convergence-steps", "0", "--output", str(out)]
    preset = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        run_dir = first_run_training(out, preset)
        preset.send_signal(signal.SIGINT)
        _, stderr = preset.communicate(timeout=ENDING_LIMIT_S)  # the preset ends after SIGINT
    finally:
        if preset.poll() is None:
            preset.kill()
    assert preset.returncode == 130, stderr[-3000:]
    assert "interrupted (SIGINT) after 0 of 3 runs" in stderr
    [made] = [p.parent for p in out.glob("*/*/run.json")]
    assert made == run_dir
    assert json.loads((run_dir / "run.json").read_text())["status"].startswith("interrupted")
    assert "interrupted (SIGINT) after 0 of 3 runs" in (out / "report.html").read_text()
    assert not leftover_processes(str(run_dir))
