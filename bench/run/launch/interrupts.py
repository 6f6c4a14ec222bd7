"""SIGINT and SIGTERM as an exception, whatever disposition the process inherited: a run
started with SIGINT ignored (a background job of a script) still ends on Ctrl-C, and a
SIGTERM is recorded rather than killing the launcher mid-write."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread; its text is the signal's name."""


def _raise(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


@contextmanager
def interruptible() -> Iterator[None]:
    previous = {s: signal.signal(s, _raise) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
