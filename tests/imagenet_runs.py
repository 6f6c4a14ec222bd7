"""The ImageNet models' short runs of tests/test_imagenet_models.py, started in the background
when the test session begins, two at a time and at the lowest CPU priority: a run spends its
time building and tracing a large graph (Python on one core, no timing checked), so they fill
the CPU time the other tests leave idle while those wait on start-ups, links and time limits.
The tests that check them run last and wait for whatever is not done."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from bench.run import models
from tests.processes import start_bench

STRATEGIES = ["single", "multi-tower", "ps-sync", "allreduce"]
# ResNet-101 and -152 are ResNet-50's class with more bottleneck blocks of the same code
# (bench/run/models/resnet_imagenet.py): what a family's run proves of ResNet-50 it proves of them,
# so they run under `single` only (their parameters are checked in process by the fast test). The
# two largest graphs of the suite were 6 of its 20 runs and most of their time (ResNet-152 under
# ps-sync alone: 39 s on idle cores).
SAME_CODE_AS = {"resnet101": "resnet50", "resnet152": "resnet50"}


def cases() -> list[tuple[str, str]]:
    """(model, strategy) of every short run."""
    return [(name, strategy) for name in models.IMAGENET for strategy in STRATEGIES
            if name not in SAME_CODE_AS or strategy == "single"]
TEST = "tests/test_imagenet_models.py::test_one_short_run_of_each_model_ends_ok_in_each_family"
# What a short run waits for: the CPU the other tests leave idle (nice 19). On a loaded machine that
# can be none until they are done, so a run's start-up, the building of a large graph, may last as
# long as the rest of the suite (20 minutes is its budget) and then its own time on idle cores
# (39 s for the largest, ResNet-152 under ps-sync, alone here). 30 minutes covers both; the run's own
# start-up limit is the same, so the product's limit is never the first to fire on a starved run.
TIMEOUT_S = 1800
NICE = ("nice", "-n", "19")


def short_run_args(name: str, strategy: str, results: Path) -> list[str]:
    # Two towers trace at once (a bug of AutoGraph's showed only so); a ps-sync worker and an
    # allreduce rank build the same graph whatever their number, so one of each (a second worker
    # doubles the run's CPU and proves nothing more; 2-worker exchanges are proven on the small models)
    workers = {"single": [], "multi-tower": ["--workers", "2"]}.get(strategy, ["--workers", "1"])
    return ["--strategy", strategy, *workers, "--model", name,
            "--image-size", str(models.MIN_IMAGE_SIZE[name]), "--data", "synthetic", "--batch-size", "2",
            "--steps", "1", "--warmup-steps", "0", "--eval-every", "0", "--startup-timeout-s", str(TIMEOUT_S),
            "--output", str(results)]


class ShortRuns:
    """Every short run of `cases()`, each in a results folder of its own."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="distbench-imagenet-"))
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._ended = False
        self._pool = ThreadPoolExecutor(max_workers=2)
        self.runs: dict[tuple[str, str], tuple[Future, Path]] = {
            (name, strategy): (self._pool.submit(self._run, short_run_args(name, strategy, out)), out)
            for name, strategy in cases() for out in [self.folder / f"{name}-{strategy}"]}

    def _run(self, args: list[str]) -> subprocess.CompletedProcess:
        with self._lock:
            if self._ended:
                raise RuntimeError("the test session ended before this run started")
            process = start_bench(*args, prefix=NICE)
            self._running.add(process)
        try:
            stdout, stderr = process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        finally:
            with self._lock:
                self._running.discard(process)
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def end(self) -> None:
        """Stop what still runs (an interrupted session) and remove the runs' folders."""
        with self._lock:
            self._ended = True
            for process in self._running:
                process.terminate()  # as Ctrl-C would: the launcher ends the run's processes, then itself
        self._pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.folder, ignore_errors=True)
