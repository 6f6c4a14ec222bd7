"""A launcher's Ctrl-C handling under a storm of them: every press after the first only hurries
the ending, whichever instant it lands at, even inside the handler of the one before."""

import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT

# the multi-process launchers' shape: train until interrupted, then end within the interruptible
# block (here: a second of checking whether the ending was hurried, as
# bench.run.launch.processes.end_all does while it waits)
ENDING = """
import time
from bench.run.launch import interrupts
with interrupts.interruptible():
    try:
        print("ready", flush=True)
        while True:
            time.sleep(0.001)
    except interrupts.Interrupted as exc:
        ends = time.monotonic() + 1.0
        while time.monotonic() < ends:
            interrupts.hurried()
        print("ended", exc, interrupts.hurried(), flush=True)
"""
STORM_S = 3.0  # the ending takes 1 s; a hung or dead one shows long before


def test_presses_that_land_inside_the_previous_handler_neither_hang_nor_break_the_ending():
    # Before: the handler set a threading.Event, whose lock a press landing inside that handler
    # waited on forever (the launcher hung in its ending; a suite run timed out on it) or, with
    # more presses, recursed to RecursionError. Here as many presses as one process can send.
    for _ in range(2):
        child = subprocess.Popen([sys.executable, "-c", ENDING], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        sent, start = 0, time.monotonic()
        while child.poll() is None and time.monotonic() - start < STORM_S:
            try:
                os.kill(child.pid, signal.SIGINT)
                sent += 1
            except ProcessLookupError:
                break
        try:
            out, err = child.communicate(timeout=STORM_S)
        finally:
            child.kill()
        assert child.returncode == 0 and out.split() == ["ended", "SIGINT", "True"], (sent, out, err[-2000:])


# a press at every line the handler of the previous press runs, whatever it calls: deterministic
# where the storm above is a matter of timing
NESTED = """
import signal, sys
from bench.run.launch import interrupts
with interrupts.interruptible():
    try:
        signal.raise_signal(signal.SIGINT)
    except interrupts.Interrupted:
        handler, landed = signal.getsignal(signal.SIGINT), []
        def press(frame, event, arg):
            if event == "line":
                landed.append(frame.f_code.co_name)
                handler(signal.SIGINT, None)  # untraced: CPython does not trace inside a tracer
            return press
        sys.settrace(press)
        handler(signal.SIGINT, None)
        sys.settrace(None)
        print(interrupts.hurried(), len(landed) > 0, flush=True)
"""
NESTED_LIMIT_S = 30  # it ends in about 0.1 s; a handler blocked on a lock never would


def test_a_press_inside_the_previous_presses_handler_is_one_more_hurry():
    done = subprocess.run([sys.executable, "-c", NESTED], cwd=ROOT, capture_output=True, text=True,
                          timeout=NESTED_LIMIT_S)
    assert done.returncode == 0 and done.stdout.split() == ["True", "True"], (done.stdout, done.stderr[-2000:])
