"""--recover: what a multi-process run does when a process dies.

A dead non-chief worker of a strategy that lets one rejoin (its launch kind's
TfCluster.worker_loss) is restarted into the running job by the supervisor, and the others
go on meanwhile. Any other failure (the chief, a ps task, an allreduce rank) ends the
attempt; the whole job then starts again from its latest checkpoint, in its own folder
(bench.run.process.resume). Each recovery is an entry of run.json's `recoveries`; what it cost is
derived from the step records (bench.metrics).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.config import RunConfig
from bench.errors import UsageError
from bench.run.process.lifecycle import exit_status
from bench.run.process.records import RECOVERIES, RunFolder, last_global_step

RECOVERY_LIMIT = 3  # recoveries per run: a fault that comes back every time is not recovered from
WORKER_RESTARTED = "worker restarted"
JOB_RESTARTED = "job restarted from checkpoint"

Attempt = Callable[[RunConfig], tuple[int, RunFolder]]


def recoveries_left(folder: RunFolder) -> int:
    return RECOVERY_LIMIT - len(folder.read_run().get(RECOVERIES) or [])


def recovery(at_s: float, what: str, how: str, step_at_failure: int, restart_step: int,
             worker: int | None = None) -> dict[str, Any]:
    """One entry of run.json's `recoveries`: when the failure was seen (run clock), what died, what
    was restarted, the global step reached and the one the run went on from."""
    return {"at_s": at_s, "what": what, "how": how, "worker": worker, "step_at_failure": step_at_failure,
            "restart_step": restart_step}


def rejoin_config(config: RunConfig, run_dir: Path) -> RunConfig:
    """A restarted worker's config: it rejoins the running job (no start-up barrier), its step
    counter and input go on from the run's global step, and the injected faults are not repeated."""
    return config.replace(rejoin=True, resume_step=last_global_step(run_dir), resume_from=None,
                          kill_worker=None, kill_ps=None)


def recovering(config: RunConfig, attempt: Attempt) -> int:
    """Run `attempt`; with --recover, while it fails and recoveries are left, start the whole job
    again from its latest checkpoint. The exit status is the last attempt's."""
    from bench.run.process.resume import resume_config

    code, folder = attempt(config)
    while config.recover and code == exit_status("failed") and recoveries_left(folder) > 0:
        record = folder.read_run()
        try:
            again = resume_config(str(folder.path), {})
        except UsageError as exc:  # no checkpoint yet, most often
            print(f"{folder.run_id}: not recovered: {exc}", file=sys.stderr, flush=True)
            folder.update_run(not_recovered=str(exc))
            break
        at_s = record.get("failed_at_s", record.get("ended_s"))
        entry = recovery(at_s, str(record.get("status", "")).removeprefix("failed: "), JOB_RESTARTED,
                         # its rows since the last flush died with it; the checkpoint's step was reached
                         max(last_global_step(folder.path), again.resume_step), again.resume_step)
        folder.update_run(**{RECOVERIES: [*(record.get(RECOVERIES) or []), entry]})
        print(f"{folder.run_id}: recovering: {entry['what']}; starting again from global step "
              f"{again.resume_step}", file=sys.stderr, flush=True)
        code, folder = attempt(again)
    return code
