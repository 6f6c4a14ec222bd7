"""The README's first command on a new machine: a fresh clone, an empty cache, so Horovod is
built from source; then one short run through it. Every other test has the wheel cached, which
once hid a setup that failed on every first run."""

import os
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
SETUP_LINES_AT_MOST = 20


def clean_environment(cache: str) -> dict[str, str]:
    """This machine's environment without the outer venv (its mpicxx would pass for a system MPI)."""
    venv_bin = str(ROOT / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["XDG_CACHE_HOME"] = cache
    return env


def test_setup_and_a_run_in_a_fresh_clone_with_an_empty_cache(tmp_path):
    if os.environ.get("DISTBENCH_SETUP_BUILT_HOROVOD") == "1":
        pytest.skip("this test command's own setup built Horovod from an empty cache minutes ago, and every "
                    "multi-process test runs on that build; a second first run would take the command past 20 min")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = clean_environment(str(tmp_path / "cache"))
    setup = subprocess.run(["./run_bench.sh", "setup"], cwd=clone, env=env, capture_output=True, text=True,
                           timeout=1200)
    assert setup.returncode == 0, setup.stderr[-3000:]
    lines = setup.stderr.strip().splitlines()
    assert any("building Horovod" in line for line in lines)  # the first-time path was taken
    assert len(lines) <= SETUP_LINES_AT_MOST and not setup.stdout.strip(), setup.stderr
    assert (clone / ".venv" / "setup.log").stat().st_size > 0
    run = subprocess.run(["./run_bench.sh", "allreduce", "--workers", "2", "--model", "mlp", "--data", "digits",
                          "--steps", "20", "--output", str(tmp_path / "results")], cwd=clone, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert ": ok, " in run.stderr.strip().splitlines()[-1]
