"""Runs whose tests check only what the runs computed (weights, records, exit statuses), never how
fast: started when the test session begins, two at a time at the lowest CPU priority, so they take
the CPU the other tests leave idle while those wait on start-ups, links, Slurm and time limits.

A test module declares what its tests need with `background_jobs(item) -> {key: job}`; a job is a
function of its own empty folder and of `run` (a `python -m bench` at nice 19). The tests that
declare jobs run after the others (tests/conftest.py) and wait for whatever is not done."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from bench.run.launch.hang import rows_said
from tests.processes import start_bench

NICE = ("nice", "-n", "19")
# What a background run waits for: the CPU the other tests leave idle, at nice 19 (weight 15 against a
# test's 1024). Until the tests that wait on it are reached (the foreground then idles) that can be next to
# nothing: the foreground takes about 25 minutes, 40 beside a busy process (docs/testing.md's protocol),
# and the largest run builds for 40 CPU-s (ResNet-152 under ps-sync). Once it steps, a 1-step run has
# under 2 CPU-s left (its weights, its done tokens). Its own limits are what end it if it hangs, so that
# its record (run.json's `hang`: each process's phase and call, their stacks in their logs) is what its
# test fails with.
STARTUP_LIMIT_S = 2400
STALL_LIMIT_S = 900
PATIENT = ("--startup-timeout-s", str(STARTUP_LIMIT_S), "--stall-timeout-s", str(STALL_LIMIT_S))
# This session's own limit on one run, from its launch: after the run's own start-up and stall limits and
# its ending, so the product's account of a hang is what a test reports, never this kill.
LIMIT_S = STARTUP_LIMIT_S + STALL_LIMIT_S + 600
LOG_LINES = 40  # of each process's log, in a failed run's message: a stack is 20-30 lines


class Run(Protocol):
    """What a job is handed: `run(*ARGS)` makes `python -m bench ARGS` at nice 19."""

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
    """The job of one `python -m bench ARGS` that must end ok: its results folder. A run that fails or hangs
    fails its test at once with its account (never made again: a hang is a bug to find), its folder kept."""
    def job(folder: Path, run: Run) -> Path:
        results = folder / "results"
        done = run(*args, *PATIENT, "--output", str(results))
        if done.returncode != 0:
            kept = Path(tempfile.mkdtemp(prefix="distbench-failed-run-"))
            shutil.copytree(results, kept, dirs_exist_ok=True)
            raise AssertionError(f"python -m bench {' '.join(args)}: {account(results, done)}\n"
                                 f"its folder is kept: {kept}")
        return results
    return job


def account(results: Path, done: subprocess.CompletedProcess) -> str:
    """A failed run as its record (status, and a hang's processes with their phases), the files it got to
    write, each process's log (the last lines: a hung process's stack) and its launcher tell it."""
    records = list(results.glob("*/run.json"))
    record = json.loads(records[0].read_text()) if len(records) == 1 else {}
    lines = [f"exit status {done.returncode}; run.json status: {record.get('status')}"]
    lines += rows_said(record)
    for run_dir in (r.parent for r in records):
        steps = (run_dir / "steps.csv").read_text().count("\n") - 1 if (run_dir / "steps.csv").exists() else None
        written = sorted(str(p.relative_to(run_dir)) for p in [*run_dir.glob("workers/*.json"),
                                                               *run_dir.glob("weights*.npz")])
        lines.append(f"steps.csv rows: {steps}; written: {', '.join(written) or 'no worker report, no weights'}")
    for log in sorted(results.glob("*/logs/*.log")):
        tail = log.read_text(errors="replace").splitlines()[-LOG_LINES:]
        lines += [f"--- {log.name}", *tail]
    return "\n".join([*lines, "--- launcher", done.stderr[-3000:]])
