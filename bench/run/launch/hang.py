"""The account of a hung run, taken before anything is ended: every live process is asked for its stack
(it writes it to its log: bench.run.phase), then what each process was doing is read from the
phase files beside the logs. The record goes into run.json under `hang`."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from bench.run.launch.processes import Child
from bench.run.phase import STACK_SIGNAL, read_phases

STACK_WAIT_S = 1.5  # faulthandler writes at once; this covers a starved process being scheduled at nice 19


def ask_for_stacks(children: list[Child]) -> None:
    """SIGUSR1 to each live child: a `python -m bench` here, or a launcher that passes it on to its tasks
    (mpirun and srun do). Not a task on another host reached over ssh: the signal would end its ssh client."""
    for child in children:
        if not child.exited and not child.guarded:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.process.pid, STACK_SIGNAL)


def account(children: list[Child], logs: Path) -> dict[str, Any]:
    """Each process: alive or how it ended, its phase and call and for how long, where its stack is. A
    phase file no child's log matches (an MPI rank under one `mpirun` child) is listed as it is."""
    phases, now, rows = read_phases(logs), time.time(), []
    for child in children:
        rows.append(_row(child.name, phases.pop(child.log.stem, None), now, child.log, logs,
                         alive=not child.exited, exit=None if not child.exited else child.describe_exit()))
    for task, phase in phases.items():
        own = logs / f"{task}.log"
        # an MPI rank writes to its launcher's log (one `mpirun` child: its ranks' stacks are there)
        log = own if own.exists() or len(children) != 1 else children[0].log
        rows.append(_row(task, phase, now, log, logs, alive=None, exit=None))
    return {"processes": rows}


def _row(name: str, phase: dict | None, now: float, log: Path, logs: Path, alive: bool | None,
         exit: str | None) -> dict[str, Any]:
    phase = phase or {}
    since = phase.get("since_epoch_s")
    return {"process": name, "alive": alive, "exit": exit, "phase": phase.get("phase"), "call": phase.get("call"),
            "stuck": bool(phase.get("stuck")),
            "in_phase_s": None if since is None else round(now - since, 1), "host": phase.get("host"),
            "stack_in": str(Path(logs.name) / log.name)}


def stuck_line(record: dict[str, Any]) -> str:
    """The live processes as a status names them: `worker 1 stepping (step) for 12 s; ps 0 serving ...`."""
    parts = []
    for row in record["processes"]:
        if row["alive"] is False:
            continue
        where = row["phase"] or "no phase recorded"
        if row["call"]:
            where += f" ({row['call']})"
        if row["in_phase_s"] is not None:
            where += f" for {row['in_phase_s']:.0f} s"
        parts.append(f"{row['process']} {where}")
    return "; ".join(parts) or "no process alive"


def rows_said(record: dict[str, Any], run_dir: Path | None = None) -> list[str]:
    """A hang record's processes, a line each, as a reader of a failed run wants them (its stack's log under
    `run_dir` when given)."""
    return [f"  {row['process']}: alive {row['alive']}, {row['phase']} ({row['call']}), stack in "
            f"{run_dir / row['stack_in'] if run_dir else row['stack_in']}"
            for row in (record.get("hang") or {}).get("processes", [])]


def hang_account(logs: Path):
    """What the supervisor calls on a stall: ask, wait, read."""
    def taken(children: list[Child]) -> dict[str, Any]:
        ask_for_stacks(children)
        time.sleep(STACK_WAIT_S)
        return account(children, logs)
    return taken
