"""Child processes of a run: started so that they die with the launcher, and ended
together (SIGTERM, then SIGKILL) so that none outlives the run."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.run.launch.interrupts import hurried
from bench.run.launch.remote_task import signal_of

TERM_GRACE_S = 3.0
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # If the launcher is killed outright, the kernel sends SIGKILL to this child.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    log: Path
    guarded: bool = False  # a task on another host under bench.run.launch.remote_task (its stdin held)

    @property
    def exited(self) -> bool:
        return self.process.poll() is not None

    def killed_by(self) -> signal.Signals | None:
        """The signal that ended it: this child's own death, or, for a guarded task, its death on its host."""
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return signal.Signals(-code)
        return signal_of(code) if self.guarded else None

    def describe_exit(self) -> str:
        code = self.process.returncode
        if code is None:
            return f"{self.name} is running"
        killer = self.killed_by()
        if killer:
            return f"{self.name} was killed by {killer.name}" + (" on its host" if code > 0 else "")
        last = last_line(self.log)
        return f"{self.name} exited with status {code}" + (f": {last}" if last else "")


def last_line(log: Path) -> str:
    """The last meaningful line of a child's log (its error, usually)."""
    try:
        # Open MPI's help messages end with a NUL byte of their own
        text = log.read_text(errors="replace").replace("\x00", "")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        if not line.startswith(("File ", "^", "~")) and "Traceback" not in line:
            return line[:300]
    return ""


def start(name: str, argv: Sequence[str], log: Path, env: dict[str, str] | None = None,
          echo: bool = False, hold_stdin: bool = False) -> Child:
    """Start a child whose output goes to `log` (and, with `echo`, to our stderr too). With `hold_stdin`
    its stdin is a pipe this process holds open and never writes: it closes when this process ends
    (an ssh client's remote task ends with it: bench.run.launch.remote_task), and an exit status of
    128 + N reads as its task killed by signal N there, as the guard reports it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(list(argv), stdout=subprocess.PIPE if echo else out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.PIPE if hold_stdin else subprocess.DEVNULL,
                                   env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent)
    if echo:
        threading.Thread(target=_tee, args=(process.stdout, log), daemon=True).start()
    return Child(name, process, log, guarded=hold_stdin)


def _tee(stream, log: Path) -> None:
    with open(log, "ab") as out:
        for chunk in iter(lambda: stream.read1(65536), b""):
            out.write(chunk)
            out.flush()
            sys.stderr.buffer.write(chunk)
            sys.stderr.flush()


def end_all(children: Sequence[Child], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM every child still running, SIGKILL whatever is left after `grace_s` (at once when
    the user has signalled again meanwhile: bench.run.launch.interrupts)."""
    alive = [c for c in children if not c.exited]
    for child in alive:
        child.process.terminate()
    deadline = time.monotonic() + grace_s
    while any(not c.exited for c in alive) and time.monotonic() < deadline and not hurried():
        time.sleep(0.05)
    for child in alive:
        if not child.exited:
            child.process.kill()
    for child in alive:
        child.process.wait()
