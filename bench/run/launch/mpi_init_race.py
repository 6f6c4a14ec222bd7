"""Open MPI 5's start-up race, and the one relaunch it gets.

A rank can die by SIGSEGV inside MPI_Init: a peer that leaves the PMIx fence first sends
its first message while this rank still waits in that fence, before MPI_COMM_WORLD exists
in its PML (the race as open-mpi/ompi#13559 describes it; the crash reported as
open-mpi/ompi#12495, Open MPI 5.0.3 under srun, open). Here it ended one Slurm run of the
busy-machine test order (Open MPI 5.0.11, srun --mpi=pmix; the log's tail is
tests/data/ompi_init_segfault.log). Nothing has trained when it happens, so the launcher
starts the ranks once more in the same run folder, and run.json's `relaunched` says why.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.run.launch.rank_failures import log_since, srun_cause
from bench.run.launch.supervisor import Outcome

RELAUNCHES = 1  # a crash that comes back is not a race: the run then fails as it would have
# frames of Open MPI's backtrace (opal/util/stacktrace.c prints one for a rank a signal kills) in MPI_Init
INIT_FRAME = re.compile(r"\((?:ompi_mpi_init|PMPI_Init(?:_thread)?)\+0x[0-9a-f]+\)")
SIGNALLED = re.compile(r"\[(?P<host>[^\]:]+):\d+\] Signal: (?P<signal>[A-Za-z ]+?) \(\d+\)")


def died_in_mpi_init(log: Path, since: int = 0) -> str | None:
    """A rank killed by a signal inside MPI_Init, as the ranks' log tells it from byte `since` (this
    launch's part of the log), in one line; None when no rank died there."""
    text = log_since(log, since)
    if not INIT_FRAME.search(text):
        return None
    by_rank, by_srun = SIGNALLED.search(text), srun_cause(text)
    if by_rank is not None:  # the rank's own backtrace comes before srun's lines
        who = f"a rank on {by_rank['host']}: {by_rank['signal']}"
    elif by_srun is not None and not by_srun[2].startswith("Exited"):
        node, task, how = by_srun
        who = f"rank {task} on {node}: {how}"
    else:
        who = "a rank was killed"
    return f"{who} inside MPI_Init (Open MPI's start-up race, open-mpi/ompi#12495)"


def relaunching(launch: Callable[[], Outcome], log: Path, progress: Callable[[], int], run_start: float,
                record: Callable[[list[dict[str, Any]]], None]) -> tuple[Outcome, int]:
    """`launch` the ranks (it starts them, writing to `log`, and watches them to their end); once
    more when they fail with no step recorded because a rank died inside MPI_Init, after
    `record`ing the relaunches so far (run.json's `relaunched`: when, and why). The last launch's
    outcome, and where its part of the log begins."""
    relaunched: list[dict[str, Any]] = []
    while True:
        since, before = (log.stat().st_size if log.exists() else 0), progress()
        outcome = launch()
        failed_at_start = outcome.status.startswith("failed") and progress() == before
        why = died_in_mpi_init(log, since) if failed_at_start else None
        if why is None or len(relaunched) >= RELAUNCHES:
            return outcome, since
        relaunched.append({"at_s": round(time.time() - run_start, 3), "why": why})
        record(relaunched)
