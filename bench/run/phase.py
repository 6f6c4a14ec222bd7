"""Where a process of a run is, for the account of a hang: its phase and the call it waits in, kept in a
file beside its log (`logs/<task>.phase.json`), and its stack written to its log when the launcher asks
(STACK_SIGNAL) or when its own limit passes (a task started by hand has no launcher to ask)."""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

STACK_SIGNAL = signal.SIGUSR1
PHASE_SUFFIX = ".phase.json"
# A task started by hand ends itself this long after its session deadlines would have failed it: the
# deadlines name the call; this catches a wait outside TensorFlow's calls (faulthandler, exit status 1).
OWN_LIMIT_EXTRA_S = 30.0

_stack_out = None  # the log's descriptor, duplicated: TensorFlow's quiet import points fd 2 elsewhere for a while


def listen_for_stack_requests() -> None:
    """From here on STACK_SIGNAL writes every thread's stack to this process's stderr (its log) and the
    process goes on. Called first thing in every `python -m bench`: the signal's default would kill it."""
    global _stack_out
    if _stack_out is None:
        _stack_out = os.fdopen(os.dup(sys.stderr.fileno()), "w")
    faulthandler.register(STACK_SIGNAL, file=_stack_out, all_threads=True, chain=False)


def end_after(limit_s: float | None) -> None:
    """Dump every stack and end this process (status 1) unless called again within `limit_s`
    (None: never). For a task started by hand, re-armed at every step."""
    if limit_s is None:
        faulthandler.cancel_dump_traceback_later()
        return
    faulthandler.dump_traceback_later(limit_s, repeat=False, file=_stack_out or sys.stderr, exit=True)


def phase_file(logs: Path, task: str) -> Path:
    return logs / f"{task.replace(' ', '')}{PHASE_SUFFIX}"


class Phase:
    """Records this process's phase (starting, stepping, evaluating, saving, teardown, done tokens,
    serving) and the call it is in; `Phase(None)` records nothing (a run in one process has no other to
    wait on)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.now: dict[str, Any] = {}
        self.held = False  # a call stuck in the recorded phase: what follows (teardown) does not replace it

    @classmethod
    def of_task(cls, run_dir: Path, role: str, index: int) -> Phase:
        return cls(phase_file(run_dir / "logs", f"{role}{index}"))

    def __call__(self, phase: str, call: str | None = None) -> None:
        if self.held:
            return
        self.now = {"phase": phase, "call": call, "since_epoch_s": time.time(), "pid": os.getpid(),
                    "host": socket.gethostname()}
        self._write()

    def stuck(self) -> None:
        """The call of the recorded phase passed its deadline: say so, and keep this phase on record."""
        self.now = {**self.now, "stuck": True}
        self._write()
        self.held = True

    def _write(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.now))
        os.replace(tmp, self.path)

    def where(self) -> str:
        """`phase (call)`, as a failure line names it."""
        phase, call = self.now.get("phase", "starting"), self.now.get("call")
        return f"{phase} ({call})" if call else phase


def read_phases(logs: Path) -> dict[str, dict[str, Any]]:
    """Every task's last recorded phase in a run's logs folder, by task file name (`worker0`, `ps1`)."""
    phases = {}
    for path in sorted(logs.glob(f"*{PHASE_SUFFIX}")):
        try:
            phases[path.name[:-len(PHASE_SUFFIX)]] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return phases
