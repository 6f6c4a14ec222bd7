"""The README's first command on a new machine: a fresh clone, an empty cache, so Horovod is
built from source; then one short run through it. Every other test has the wheel cached, which
once hid a setup that failed on every first run. Then a second checkout set up from that cached
wheel, run alone and as Slurm job steps once the first checkout is gone (the wheel once loaded
the libmpi of the checkout that built it). The setups start in the background when the session
begins (tests/first_run.py); these tests run last and check them.

Where they have passed on this machine with the same inputs (the setup script, pyproject.toml,
these tests, Python, the machine and its MPI, and every package a fresh setup resolves on PyPI
today: tests/first_run.py's inputs_key), a later session skips them and says when they passed:
what a cached wheel can hide is the setup and what it installs, and that is what they key on (a
new TensorFlow, pip or CMake release runs them again). Their 4.6 CPU-minutes put the suite past
20 minutes beside a busy process (docs/testing.md). DISTBENCH_FIRST_RUN=always runs them anyway."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.first_run import FORCE_VARIABLE, INPUTS, SKIP_VARIABLE, BackgroundSetup, clean_environment
from tests.processes import RUN_LIMIT_S
from tests.slurm_cluster import WHY_NOT as NO_SLURM
from tests.slurm_cluster import slurm_cluster

pytestmark = pytest.mark.slow
SETUP_LINES_AT_MOST = 20
# What the tests wait for: both setups, at nice 19 in the CPU the other tests leave idle. On a
# loaded machine that can be none until they are done (20 minutes is the suite's budget); then
# the build and two installs take 4-5 minutes here. 30 minutes covers both.
SETUP_LIMIT_S = 1800
CLUSTER = "dbfirst"
SMALL_RUN = ("allreduce", "--workers", "2", "--model", "mlp", "--data", "digits", "--steps", "20")


def setups_done(background_setup: BackgroundSetup | None, passed_before: dict | None) -> BackgroundSetup:
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip("this test command's own setup built Horovod from an empty cache minutes ago, and every "
                    "multi-process test runs on that build; a second first run would take the command past 20 min")
    if passed_before is not None:
        pytest.skip(f"passed on this machine at {passed_before['commit']} ({passed_before['date']}) with the same "
                    f"inputs ({', '.join(INPUTS)}, Python, machine, MPI, and the packages a fresh setup resolves on "
                    f"PyPI today); {FORCE_VARIABLE}=always runs it again")
    assert background_setup is not None, "the session did not start the first-time setup"
    code, _, stderr = background_setup.wait(timeout_s=SETUP_LIMIT_S)
    assert code == 0, stderr[-3000:] + (background_setup.second_log.read_text()[-3000:]
                                        if background_setup.second_log.exists() else "")
    return background_setup


def short_run(setup: BackgroundSetup, checkout: Path, name: str, *prefix: str,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """A short Horovod run through `./run_bench.sh` in `checkout`, its results in `name`."""
    run = subprocess.run([*prefix, "./run_bench.sh", *SMALL_RUN, "--output", str(setup.folder / name)], cwd=checkout,
                         env=env or clean_environment(ROOT, setup.cache), capture_output=True, text=True,
                         timeout=RUN_LIMIT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def run_in_second_checkout(setup: BackgroundSetup, name: str, *prefix: str, env: dict | None = None) -> dict:
    """A short run in the second checkout, once the first checkout (whose venv built the wheel)
    is gone: its run.json."""
    shutil.rmtree(setup.clone, ignore_errors=True)
    short_run(setup, setup.second, name, *prefix, env=env)
    [record] = [json.loads(path.read_text()) for path in (setup.folder / name).glob("*/run.json")]
    assert record["status"] == "ok", record["status"]
    return record


def test_setup_and_a_run_in_a_fresh_clone_with_an_empty_cache(background_setup, first_run_passed_before):
    setup = setups_done(background_setup, first_run_passed_before)
    stdout, stderr = setup.stdout.read_text(), setup.stderr.read_text()
    lines = stderr.strip().splitlines()
    assert any("building Horovod" in line for line in lines)  # the first-time path was taken
    assert len(lines) <= SETUP_LINES_AT_MOST and not stdout.strip(), stderr
    assert (setup.clone / ".venv" / "setup.log").stat().st_size > 0
    run = short_run(setup, setup.clone, "results")
    assert ": ok, " in run.stderr.strip().splitlines()[-1]


def test_a_second_checkout_runs_on_the_cached_wheel_once_the_first_is_gone(background_setup, first_run_passed_before):
    setup = setups_done(background_setup, first_run_passed_before)
    log = setup.second_log.read_text()
    assert "from the cached wheel" in log and "building Horovod" not in log, log[-3000:]  # "Horovod (cpu) ..."
    run_in_second_checkout(setup, "results-alone")


@pytest.mark.skipif(NO_SLURM is not None, reason=str(NO_SLURM))
def test_a_second_checkout_runs_horovod_as_slurm_job_steps_once_the_first_is_gone(background_setup,
                                                                                  first_run_passed_before):
    # srun starts the ranks with no mpirun to set LD_LIBRARY_PATH: libmpi is found through the
    # wheel's RUNPATH alone
    setup = setups_done(background_setup, first_run_passed_before)
    with slurm_cluster(CLUSTER, 2, clean_environment(ROOT, setup.cache)) as env:
        record = run_in_second_checkout(setup, "results-srun", "salloc", "-N", "2", env=env)
    placement = record["placement"]
    assert placement["scheduler"] == "slurm" and len({h["node"] for h in placement["hosts"].values()}) == 2
