"""Under the user's own mpirun no launcher of ours is left to close the run: when rank 0 fails,
rank 0 itself says so in run.json, with the reason, before mpirun ends the other ranks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, only_run
from tests.processes import RUN_LIMIT_S

# rank 0's training raises; every other rank trains as usual (and is ended by mpirun)
FAILING_RANK_0 = """
import sys
import bench.run.process.harness as harness
real = harness.run_worker
def run_worker(config, strategy, context, *args, **kwargs):
    if context.rank == 0:
        raise RuntimeError("injected failure of rank 0")
    return real(config, strategy, context, *args, **kwargs)
harness.run_worker = run_worker
from bench.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_failing_rank_0_under_the_users_mpirun_says_why_in_run_json(results):
    from bench.run.launch.mpi_launchers import mpirun_command

    argv = [*mpirun_command(2), sys.executable, "-c", FAILING_RANK_0, "--model", "mlp", "--data", "digits",
            "--steps", "20", "--output", str(results)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    assert done.returncode != 0
    record = json.loads((only_run(results) / "run.json").read_text())
    assert record["status"] == "failed: rank 0: RuntimeError: injected failure of rank 0", record["status"]
    assert record["ended_at"]
