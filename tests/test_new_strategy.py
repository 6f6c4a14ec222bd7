"""A new strategy is one file: added to a copy of the suite, with no other edit, it runs,
is refused with a clear line where its own rule says so, and the report shows it with
its family (the ps variant below gets the staleness section as an asynchronous ps run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import ROOT

NEW_STRATEGY = '''"""ps-async-2ps: ps-async with its variables always over two ps tasks."""

from bench.config import RunConfig
from bench.errors import UsageError
from strategies.ps_async import PSAsync


class PSAsync2PS(PSAsync):
    name = "ps-async-2ps"
    description = "ps-async over exactly two ps tasks"

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        super().validate(config)
        if config.ps != 2:
            raise UsageError(f"--strategy {cls.name} needs --ps 2, got {config.ps}")
'''


@pytest.mark.slow
def test_one_added_file_runs_and_reaches_the_report(tmp_path):
    suite = tmp_path / "suite"
    for package in ("bench", "strategies"):
        shutil.copytree(ROOT / package, suite / package, ignore=shutil.ignore_patterns("__pycache__"))
    (suite / "strategies" / "ps_async_2ps.py").write_text(NEW_STRATEGY)
    env = {**os.environ, "PYTHONPATH": str(suite)}

    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bench", *args], cwd=suite, env=env, capture_output=True,
                              text=True, timeout=300)

    results = tmp_path / "results"
    common = ["--strategy", "ps-async-2ps", "--workers", "2", "--data", "synthetic", "--steps", "20",
              "--warmup-steps", "2", "--eval-every", "0", "--output", str(results)]
    refused = bench(*common, "--ps", "1")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "bench: error: --strategy ps-async-2ps needs --ps 2, got 1"]
    done = bench(*common, "--ps", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    report = bench("report", str(results), "--output", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    row = summary.iloc[0]
    assert (row["strategy"], row["family"], row["ps"], row["status"]) == ("ps-async-2ps", "parameter-server", 2, "ok")
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Staleness (ps-async-2ps)" in page
