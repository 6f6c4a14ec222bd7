"""Runs whose tests check only what the runs computed (weights, records, exit statuses), never how
fast: started when the test session begins, two at a time at the lowest CPU priority, so they take
the CPU the other tests leave idle while those wait on start-ups, links, Slurm and time limits.

A test module declares what its tests need with `background_jobs(item) -> {key: job}`; a job is a
function of its own empty folder and of `run` (a `python -m bench` at nice 19). The tests that
declare jobs run after the others (tests/conftest.py) and wait for whatever is not done."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from tests.processes import start_bench

NICE = ("nice", "-n", "19")
# What a background run waits for: the CPU the other tests leave idle. On a loaded machine that can
# be none until they are done (20 minutes is their budget, about 40 beside a busy process:
# docs/testing.md's protocol), and then its own time (under a minute for the largest here). An hour
# covers both; a run's own start-up and stall limits are set to the same by `PATIENT`, so the
# product's limits never fire first on a starved run.
LIMIT_S = 3600
# The run's own limits fire first, so that a hung run ends with its record saying so (run.json's status)
# and its processes' logs kept for the message.
RUN_LIMIT_S = LIMIT_S - 600
PATIENT = ("--startup-timeout-s", str(RUN_LIMIT_S), "--stall-timeout-s", str(RUN_LIMIT_S))
LOG_LINES = 12  # of each process's log, in a failed run's message

class Run(Protocol):
    """What a job is handed: `run(*ARGS)` makes `python -m bench ARGS` at nice 19; `hung_once` collects what
    each run that hung and then ended ok said the first time (the session's summary prints it)."""

    hung_once: list[str]

    def __call__(self, *args: str) -> subprocess.CompletedProcess: ...


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
        self.hung_once: list[str] = []  # what each run that hung and then ended ok said the first time
        for number, (key, job) in enumerate(jobs.items()):
            folder = self.folder / str(number)
            folder.mkdir()
            self._jobs[key] = self._pool.submit(job, folder, self)

    def result(self, key: Hashable) -> Any:
        """What the job returned (its exception raised here), once it is done."""
        assert key in self._jobs, f"no test of this session declared the background job {key}"
        return self._jobs[key].result()

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
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
    """The job of one `python -m bench ARGS` that must end ok: its results folder.

    A run that hung (its stall or start-up limit ended it, or this session's) is made once more, and the
    session's summary says what the first one's record and logs said: one such run, ps-sync's 1-step
    embedding run over 2 ps tasks, hung once in CI at nice 19 beside the other tests, its worker 0 past
    its step, and was not seen again in 34 runs (idle and beside CPU hogs). A run that fails otherwise,
    or hangs twice, fails its test with the same account."""
    def job(folder: Path, run: Run) -> Path:
        first = folder / "results"
        done = run(*args, *PATIENT, "--output", str(first))
        if done.returncode == 0:
            return first
        said = account(first, done)
        if not hung(first, done):
            raise AssertionError(said)
        again = folder / "again"
        done = run(*args, *PATIENT, "--output", str(again))
        assert done.returncode == 0, f"hung, then failed again:\n{account(again, done)}\nthe first time:\n{said}"
        run.hung_once.append(f"python -m bench {' '.join(args)}\n{said}")
        return again
    return job


def hung(results: Path, done: subprocess.CompletedProcess) -> bool:
    """The run was ended by a limit on its time: its own stall or start-up limit, or this session's kill."""
    return done.returncode == -signal.SIGKILL or "hung" in str(status_of(results))


def status_of(results: Path) -> str | None:
    records = list(results.glob("*/run.json"))
    return json.loads(records[0].read_text()).get("status") if len(records) == 1 else None


def account(results: Path, done: subprocess.CompletedProcess) -> str:
    """A failed run as its record, each of its processes' logs (their last lines) and its launcher tell it."""
    lines = [f"exit status {done.returncode}; run.json status: {status_of(results)}"]
    for log in sorted(results.glob("*/logs/*.log")):
        tail = log.read_text(errors="replace").splitlines()[-LOG_LINES:]
        lines += [f"--- {log.name}", *tail]
    return "\n".join([*lines, "--- launcher", done.stderr[-3000:]])
