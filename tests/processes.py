"""Helpers for tests that start real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.conftest import ROOT


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` as a user would run it."""
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def run_record(results: Path) -> dict:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return json.loads((runs[0] / "run.json").read_text())


def leftover_processes(marker: str) -> list[str]:
    """Processes whose command line mentions `marker` (a run folder), after a short grace."""
    deadline = time.monotonic() + 2
    while True:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if any(marker in part for part in proc.info["cmdline"] or []):
                    found.append(" ".join(proc.info["cmdline"]))
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
            task = (Path(cmd[cmd.index("--run-dir") + 1]), cmd[cmd.index("--role") + 1],
                    int(cmd[cmd.index("--index") + 1]))
        except (ValueError, IndexError):
            continue
        found.append((proc, *task))
    return found


def task_process(run_dir: Path, role: str, index: int) -> psutil.Process:
    return next(p for p, folder, r, i in task_processes() if folder == run_dir and (r, i) == (role, index))
