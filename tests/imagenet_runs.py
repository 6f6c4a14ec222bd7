"""The ImageNet models' short runs of tests/test_imagenet_models.py, started in the background
when the test session begins, two at a time and at the lowest CPU priority: a run spends its
time building and tracing a large graph (Python on one core, no timing checked), so they fill
the CPU time the other tests leave idle while those wait on start-ups, links and time limits.
The tests that check them run last and wait for whatever is not done.

Every run is started from pytest's own thread, between tests (conftest's hooks call `poll`),
never from a thread of its own: a child started while another thread starts one can fail
("OSError: [Errno 14] Bad address": CPython starts children with vfork)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import models
from tests.conftest import ROOT

STRATEGIES = ["single", "multi-tower", "ps-sync", "allreduce"]
TEST = "tests/test_imagenet_models.py::test_one_short_run_of_each_model_ends_ok_in_each_family"
AT_ONCE = 2
TIMEOUT_S = 1800  # at nice 19 a run waits for every other test's CPU


def short_run_argv(name: str, strategy: str, results: Path) -> list[str]:
    # Two towers trace at once (a bug of AutoGraph's showed only so); a ps-sync worker and an
    # allreduce rank build the same graph whatever their number, so one of each (a second worker
    # doubles the run's CPU and proves nothing more; 2-worker exchanges are proven on the small models)
    workers = {"single": [], "multi-tower": ["--workers", "2"]}.get(strategy, ["--workers", "1"])
    return ["nice", "-n", "19", sys.executable, "-m", "bench", "--strategy", strategy, *workers, "--model", name,
            "--image-size", str(models.MIN_IMAGE_SIZE[name]), "--data", "synthetic", "--batch-size", "2",
            "--steps", "1", "--warmup-steps", "0", "--eval-every", "0", "--output", str(results)]


class ShortRuns:
    """Every model's short run under every strategy, each in a results folder of its own."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="distbench-imagenet-"))
        self._waiting = [(name, strategy) for name in models.IMAGENET for strategy in STRATEGIES]
        self._running: dict[tuple[str, str], tuple[subprocess.Popen, float]] = {}
        self._codes: dict[tuple[str, str], int] = {}
        self.poll()

    def results(self, name: str, strategy: str) -> Path:
        return self.folder / f"{name}-{strategy}"

    def _stderr(self, key: tuple[str, str]) -> Path:
        return self.folder / f"{key[0]}-{key[1]}.stderr"

    def poll(self) -> None:
        """Note the runs that ended (killing one past its time), start the next ones."""
        for key, (process, started) in list(self._running.items()):
            if process.poll() is None and time.monotonic() - started > TIMEOUT_S:
                process.kill()
            if process.poll() is not None:
                self._codes[key] = process.returncode
                del self._running[key]
        while self._waiting and len(self._running) < AT_ONCE:
            key = self._waiting.pop(0)
            with self._stderr(key).open("wb") as err:
                process = subprocess.Popen(short_run_argv(*key, self.results(*key)), cwd=ROOT,
                                           stdout=subprocess.DEVNULL, stderr=err)
            self._running[key] = (process, time.monotonic())

    def wait(self, name: str, strategy: str) -> tuple[int, str]:
        """(exit status, stderr) of one run, starting the others as slots free up meanwhile."""
        key = (name, strategy)
        while key not in self._codes:
            self.poll()
            time.sleep(0.1)
        return self._codes[key], self._stderr(key).read_text(errors="replace")

    def end(self) -> None:
        """Stop what still runs (an interrupted session) and remove the runs' folders."""
        self._waiting.clear()
        for process, _ in self._running.values():
            process.terminate()  # as Ctrl-C would: the launcher ends the run's processes, then itself
        for process, _ in self._running.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
