"""The one end of a run that a launcher (or a hand-started chief) watched: its status as the
scheduler explains it, the workers' own reports (the chief's machine among them), where its
processes ran, then run.json."""

from __future__ import annotations

from typing import Any

from bench.config import RunConfig
from bench.run.contract import Strategy
from bench.run.launch.run_hosts import RunHosts
from bench.run.launch.supervisor import Outcome
from bench.run.process.lifecycle import close_run, exit_status
from bench.run.process.records import RunFolder


def close_watched_run(folder: RunFolder, config: RunConfig, strategy: type[Strategy], status: str, run_start: float,
                      outcome: Outcome | None = None, hosts: RunHosts | None = None, **fields: Any) -> int:
    """Close the run's record; the launcher's exit status for it."""
    status = hosts.kind.explain(status) if hosts else status
    chief = folder.task_reports().get(0, {})
    extra: dict[str, Any] = hosts.closing_record(folder, config, strategy) if hosts else {}
    if chief.get("environment"):  # the machine the chief trained on, wherever the launcher ran: recorded
        folder.update_run(environment=chief["environment"])  # before the summary's MFU reads its peak
    if outcome is not None:
        extra["ended_after_failure_s"] = outcome.ended_after_failure_s
        if outcome.hang is not None:
            extra["hang"] = outcome.hang
        if outcome.failed_at_epoch_s is not None:
            extra["failed_at_s"] = outcome.failed_at_epoch_s - run_start
    close_run(folder, config, status, startup_s=chief.get("startup_s"), runtime=chief.get("runtime"),
              strategy_info=chief.get("strategy_info"), **extra, **fields)
    return exit_status(status)
