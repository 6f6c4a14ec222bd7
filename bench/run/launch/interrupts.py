"""SIGINT and SIGTERM as an exception, whatever disposition the process inherited: a run
started with SIGINT ignored (a background job of a script) still ends on Ctrl-C, and a
SIGTERM is recorded rather than killing the launcher mid-write.

Only the first such signal raises. The process is ending from then on, and a second Ctrl-C
(or Slurm's SIGTERM after a user's Ctrl-C) must not abort the ending halfway: it once raised
inside `end_all`, so the launcher exited 1 with a traceback, left run.json saying "running",
and never reached the SIGKILL of what was left. A later signal hurries the ending instead:
`end_all` kills at once rather than waiting out its grace."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Plain flags, not threading.Event: a handler runs between two bytecodes of the main thread, even
# of a handler already running, and Event.set takes a lock. A Ctrl-C landing while the previous
# one's handler held it blocked the nested handler on that lock forever: the launcher hung in its
# ending, or died of RecursionError under a storm of them (found by running the suite).
_state = {"interrupted": False, "hurried": False}


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread; its text is the signal's name."""


def _raise(signum, frame):
    if _state["interrupted"]:  # while the interrupted block ends its children
        _state["hurried"] = True
        return
    _state["interrupted"] = True
    raise Interrupted(signal.Signals(signum).name)


def hurried() -> bool:
    """Whether a signal came again while the process was ending after the first."""
    return _state["hurried"]


@contextmanager
def interruptible() -> Iterator[None]:
    previous = {s: signal.signal(s, _raise) for s in SIGNALS}
    try:
        yield
    finally:
        # once interrupted, the process is ending: what is left (closing its records, exiting)
        # ignores later signals. SIG_IGN, not a Python handler: Python's finalization puts SIG_DFL
        # back in place of a Python handler, and a Ctrl-C then killed the launcher after it had
        # recorded the run, its exit status -SIGINT instead of 130
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if _state["interrupted"] else handler)
