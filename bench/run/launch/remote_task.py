"""`python -m bench.run.launch.remote_task COMMAND...`: a task started on another host over ssh
(bench.run.launch.ssh_hosts), ended with its launcher.

ssh without a terminal does not end the remote command when its connection drops: the launcher
ending (or killing) its ssh client would leave the task running on its host. This guard runs the
task in a process group of its own and ends that group (SIGTERM, SIGKILL after a grace) when its
stdin reaches end of file, which ssh gives it when the connection closes; the launcher holds that
stdin open and never writes to it. SIGTERM and SIGINT to the guard end the group the same way.
Standard library only: it starts before the task imports anything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

GRACE_S = 10.0  # a task's own SIGTERM handling (its records flushed) finishes well within this
SIGNALLED = 128  # a task killed by signal N: the guard exits 128 + N, as a shell reports it (and ssh passes on)


def signal_of(status: int) -> signal.Signals | None:
    """The signal that killed the guard's task, from the guard's exit status (None: it exited by itself)."""
    try:
        return signal.Signals(status - SIGNALLED) if status > SIGNALLED else None
    except ValueError:  # ssh's own failure is 255
        return None


def end_group(process: subprocess.Popen) -> None:
    """SIGTERM the task's group, SIGKILL what is left after GRACE_S."""
    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m bench.run.launch.remote_task COMMAND...", file=sys.stderr)
        return 2
    process = subprocess.Popen(argv, start_new_session=True)
    ending = threading.Event()

    def end(*_: object) -> None:
        if not ending.is_set():
            ending.set()
            threading.Thread(target=end_group, args=(process,), daemon=True).start()

    def watch_stdin() -> None:
        while os.read(0, 4096):  # the raw descriptor: a buffered reader's lock would stall the exit
            pass
        end()

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)
    threading.Thread(target=watch_stdin, daemon=True).start()
    code = process.wait()
    if ending.is_set():
        end_group(process)  # the task ended, but a child of its group may not have
    return code if code >= 0 else SIGNALLED - code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # not through the interpreter's shutdown, which would wait on the stdin watcher
