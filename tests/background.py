"""Runs whose tests check only what the runs computed (weights, records, exit statuses), never how
fast: started when the test session begins, two at a time at the lowest CPU priority, so they take
the CPU the other tests leave idle while those wait on start-ups, links, Slurm and time limits.

A test module declares what its tests need with `background_jobs(item) -> {key: job}`; a job is a
function of its own empty folder and of `run` (a `python -m bench` at nice 19). The tests that
declare jobs run after the others (tests/conftest.py) and wait for whatever is not done."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.processes import start_bench

NICE = ("nice", "-n", "19")
# What a background run waits for: the CPU the other tests leave idle. On a loaded machine that can
# be none until they are done (20 minutes is their budget, about 40 beside a busy process:
# docs/testing.md's protocol), and then its own time (under a minute for the largest here). An hour
# covers both; a run's own start-up and stall limits are set to the same by `PATIENT`, so the
# product's limits never fire first on a starved run.
LIMIT_S = 3600
PATIENT = ("--startup-timeout-s", str(LIMIT_S), "--stall-timeout-s", str(LIMIT_S))

Run = Callable[..., subprocess.CompletedProcess]
Job = Callable[[Path, Run], Any]


class BackgroundRuns:
    """Every declared job, in the order given, each in a folder of its own."""

    def __init__(self, jobs: dict[Hashable, Job]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="distbench-background-"))
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._ended = False
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._jobs: dict[Hashable, Future] = {}
        for number, (key, job) in enumerate(jobs.items()):
            folder = self.folder / str(number)
            folder.mkdir()
            self._jobs[key] = self._pool.submit(job, folder, self.run)

    def result(self, key: Hashable) -> Any:
        """What the job returned (its exception raised here), once it is done."""
        assert key in self._jobs, f"no test of this session declared the background job {key}"
        return self._jobs[key].result()

    def run(self, *args: str) -> subprocess.CompletedProcess:
        """`python -m bench ARGS` at nice 19, as a job runs it."""
        with self._lock:
            if self._ended:
                raise RuntimeError("the test session ended before this run started")
            process = start_bench(*args, prefix=NICE)
            self._running.add(process)
        try:
            stdout, stderr = process.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        finally:
            with self._lock:
                self._running.discard(process)
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def end(self) -> None:
        """Stop what still runs (an interrupted session) and remove the jobs' folders."""
        with self._lock:
            self._ended = True
            for process in self._running:
                process.terminate()  # as Ctrl-C would: the launcher ends the run's processes, then itself
        self._pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def declared_jobs(item) -> dict[Hashable, Job]:
    """The background jobs a collected test needs, from its module's `background_jobs`."""
    declare = getattr(item.module, "background_jobs", None)
    return declare(item) if declare is not None else {}


def run_to_end(*args: str) -> Job:
    """The job of one `python -m bench ARGS` that must end ok: its results folder."""
    def job(folder: Path, run: Run) -> Path:
        results = folder / "results"
        done = run(*args, *PATIENT, "--output", str(results))
        assert done.returncode == 0, done.stderr[-3000:]
        return results
    return job
