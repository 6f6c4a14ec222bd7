"""The first-time setup of tests/test_first_run.py, started in the background when the test
session begins and at the lowest CPU priority: a fresh clone with an empty cache builds
Horovod (minutes of compiling) on the CPU time the other tests leave idle (they wait on
process start-ups, links and time limits), so it barely slows them; then a second clone
sets up from the wheel the first one cached. The tests, run last, wait for it and check
what it did."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SKIP_VARIABLE = "DISTBENCH_SETUP_BUILT_HOROVOD"  # set by run_bench.sh when its own setup built Horovod


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

