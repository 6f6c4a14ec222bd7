"""What a ranks' log says of how they ended: the failure mpirun, srun or horovodrun reported,
read from the part of the log one launch wrote."""

from __future__ import annotations

import re
import signal
from pathlib import Path


def log_since(log: Path, since: int = 0) -> str:
    """The log from byte `since` on (a launch's part of it); empty when there is no log."""
    try:
        with open(log, "rb") as stream:
            stream.seek(since)
            return stream.read().decode(errors="replace")
    except OSError:
        return ""


def srun_cause(text: str) -> tuple[str, str, str] | None:
    """(node, task, how) of the task srun reported ending badly that is the cause: one a signal killed
    before one that exited (srun names each on a line of its own)."""
    found = re.findall(r"^srun: error: (\S+): task (\d+): (.+?)\s*$", text, re.MULTILINE)
    return min(found, key=lambda task: task[2].startswith("Exited")) if found else None


def which_rank_failed(log: Path, since: int = 0) -> str | None:
    """The first rank failure that mpirun, srun or horovodrun reported in the log from byte `since`
    (the last launch's part), as one line."""
    raw = log_since(log, since)
    text = " ".join(raw.split())
    mpi = re.search(r"noticed that process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)", text)
    if mpi:
        return f"rank {mpi.group(1)} was killed by {signal.Signals(int(mpi.group(2))).name}"
    mpi = re.search(r"noticed that process rank (\d+) with PID \d+ on node \S+ exited with status (\d+)", text)
    if mpi:
        return f"rank {mpi.group(1)} exited with status {mpi.group(2)}"
    # Open MPI's TCP transport: a rank saw its peer's connection close before mpirun saw the peer end
    peer = re.search(r"peer process has unexpectedly disconnected.*?Local host: (\S+) .*?Peer host: (\S+)", text)
    if peer:
        return f"the rank on {peer.group(2)} disconnected (its peer on {peer.group(1)} saw it go)"
    # the same seen by Open MPI 5 as an error on a socket: the rank that saw it aborts the job, and mpirun
    # names only that rank (the one that went is in no line of the log)
    aborted = re.search(r"An error occurred in Socket closed .*?prterun has exited due to process rank (\d+) "
                        r"with PID \d+ on node (\S+) calling \"abort\"", text)
    if aborted:
        return f"rank {aborted.group(1)} on {aborted.group(2)} aborted: a peer's connection closed (Socket closed)"
    by_srun = srun_cause(raw)
    if by_srun:
        node, task, how = by_srun
        return f"rank {task} on {node}: {how[0].lower()}{how[1:]}"
    by_horovodrun = horovodrun_cause(text)
    if by_horovodrun:
        rank, code = by_horovodrun
        how = f"was killed by {signal.Signals(code - 128).name}" if code > 128 else f"exited with status {code}"
        return f"rank {rank} {how}"
    return None


def horovodrun_cause(text: str) -> tuple[str, int] | None:
    """(rank, exit code) of the process horovodrun --gloo reported ending badly that is the cause: one a
    signal killed (its shell's code 128 + the signal) before one that exited. horovodrun prints a line per
    process in the order it saw them end, and the rank whose peer was killed can be seen first."""
    found = [(rank, int(code)) for rank, code in re.findall(r"Process (\d+) exit with status code (\d+)", text)]
    return min(found, key=lambda process: process[1] <= 128) if found else None
