"""Helpers for tests that start real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from tests.conftest import ROOT

# Limits on waiting. Each ends a hung test and never times a working one: it is several times
# what the awaited thing took on this 2-core machine with a busy process beside the suite
# (docs/testing.md's protocol). A test that waits names the limit and what it waits for.
RUN_LIMIT_S = 300  # one run of at most a few hundred steps: 5-35 s here, under 70 s beside a busy process
PRESET_LIMIT_S = 900  # a preset or micro-benchmark of up to a dozen runs: 15-110 s here, under 4 min loaded
TRAINING_LIMIT_S = 120  # a started run's first recorded steps: 5-15 s here (process and graph start-up)
ENDING_LIMIT_S = 60  # a run ending after a kill, a signal or a lost process: promised within seconds
CLUSTER_LIMIT_S = 120  # the emulated cluster up or down: 2-5 s here (its daemons' own ready limit is 30 s)
LEFTOVER_GRACE_S = 5  # an ended run's processes: the launcher ended them; one may still be being reaped

# Processes are started one at a time: two threads of this process (tests that make runs side by
# side) starting children at once failed once with "OSError: [Errno 14] Bad address" (CPython
# starts them with vfork, whose child shares this process's memory until it execs)
STARTING = threading.Lock()


def start_bench(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen:
    """`python -m bench ARGS` started from the repository, its output piped (`prefix`: e.g. nice)."""
    with STARTING:
        return subprocess.Popen([*prefix, sys.executable, "-m", "bench", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def bench(*args: str, timeout: float = RUN_LIMIT_S) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` as a user would run it (subprocess.run's behaviour, safe from threads)."""
    process = start_bench(*args)
    with process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run_record(results: Path) -> dict:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return json.loads((runs[0] / "run.json").read_text())


def run_folder_of(proc: psutil.Process) -> str:
    """The run folder a process was started into by a launcher (from its environment), or ""."""
    from bench.run.process.lifecycle import RUN_DIR_VARIABLE

    try:
        return proc.environ().get(RUN_DIR_VARIABLE, "")
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def leftover_processes(marker: str) -> list[str]:
    """Processes whose command line or run folder mentions `marker` (a results or run folder),
    after a short grace."""
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while True:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                cmd = proc.info["cmdline"] or []
                if any(marker in part for part in cmd) or marker in run_folder_of(proc):
                    found.append(" ".join(cmd))
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def seconds_from_kill_to_end(run_dir: Path, record: dict, worker: int) -> float:
    """From the killed worker's last recorded step to the end of the run."""
    import pandas as pd

    steps = pd.read_csv(run_dir / "steps.csv")
    return record["ended_s"] - steps.loc[steps["worker"] == worker, "t_end_s"].max()


def task_processes() -> list[tuple[psutil.Process, Path, str, int]]:
    """Every running task a launcher started: (process, run folder, role, index)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        try:
            task = json.loads(cmd[cmd.index("--config-json") + 1])
        except (ValueError, IndexError):
            continue
        folder = run_folder_of(proc)
        if folder and task.get("job_name") is not None:
            found.append((proc, Path(folder), task["job_name"], int(task["task_index"])))
    return found


def task_process(run_dir: Path, role: str, index: int) -> psutil.Process:
    return next(p for p, folder, r, i in task_processes() if folder == run_dir and (r, i) == (role, index))


def why_no_emulated_cluster() -> str | None:
    """Why the emulated cluster cannot be made here (it needs root, ip, tc and unshare), or None."""
    import os

    if os.geteuid() != 0:
        return "needs root (network namespaces and tc)"
    for tool in ("ip", "tc", "unshare"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            return f"needs {tool} (iproute2 / util-linux)"
    return None
