"""--resume RUN_DIR: a run that was interrupted or failed goes on from its latest checkpoint,
in its own folder, with the config it was started with.

The new attempt appends to the run's records on the run's own clock (times keep counting
from the first start), and run.json's `resumed_at` lists each attempt, so the summary can
leave the downtime and each attempt's warm-up out of throughput. The injected kills
(--kill-worker, --kill-ps) belonged to the attempt that died and are not repeated.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.config import RunConfig, check_output
from bench.errors import UsageError
from bench.run.process.checkpoints import CHECKPOINT_DIR, checkpoint_step, latest_checkpoint
from bench.run.process.owner import describe_owner, owner_state
from bench.run.process.records import RESUMED_AT, RUN_FILE, RunFolder

FINISHED = "ok"


def read_record(run_dir: Path) -> dict[str, Any]:
    """run.json of `run_dir`, or {} when there is none or it cannot be read."""
    if not (run_dir / RUN_FILE).is_file():
        return {}
    try:
        record = RunFolder(run_dir).read_run()
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def resume_config(run_dir: str, typed: Mapping[str, Any]) -> RunConfig:
    """The config of the run in `run_dir`, set to go on from its latest checkpoint; raises
    UsageError (nothing written) for a folder that is not a run, a run of another strategy or
    model than `typed` names, a finished or live run, or one with no checkpoint."""
    path = Path(run_dir)
    record = read_record(path)
    if not isinstance(record.get("config"), dict):
        raise UsageError(f"--resume {run_dir}: not a run folder (no readable run.json)")
    config = RunConfig.from_dict(record["config"])
    for flag in ("strategy", "model"):
        if typed.get(flag) is not None and typed[flag] != getattr(config, flag):
            raise UsageError(f"--resume {run_dir}: a run of --{flag} {getattr(config, flag)}, not {typed[flag]}")
    status = str(record.get("status"))
    if status == FINISHED:
        raise UsageError(f"--resume {run_dir}: the run finished (status ok); nothing to resume")
    if status == "running" and owner_state(record.get("owner")) == "alive":
        raise UsageError(f"--resume {run_dir}: the run is still going (pid {record['owner']['pid']})")
    prefix = latest_checkpoint(path / CHECKPOINT_DIR)
    if prefix is None:
        raise UsageError(f"--resume {run_dir}: it has no checkpoint (start runs with --checkpoint-every-steps K "
                         "or --checkpoint-every-s T to resume them)")
    step = checkpoint_step(prefix)
    if step >= config.steps:
        raise UsageError(f"--resume {run_dir}: its latest checkpoint is at its last step ({step}); nothing to resume")
    check_output(str(path))
    return config.replace(resume_from=str(prefix.resolve()), resume_step=step, kill_worker=None, kill_ps=None)


def resumed_run_dir(config: RunConfig) -> Path:
    """The run folder a resumed config goes on in (its checkpoint is in checkpoints/ there)."""
    return Path(config.resume_from).parent.parent


def reopen_run(config: RunConfig) -> tuple[RunFolder, float]:
    """The resumed run's folder and first start (epoch seconds); the attempt is added to `resumed_at`."""
    folder = RunFolder(resumed_run_dir(config))
    record = folder.read_run()
    run_start = float(record["run_start_epoch_s"])
    attempt = {"at_s": time.time() - run_start, "global_step": config.resume_step,
               "checkpoint": str(Path(config.resume_from).relative_to(folder.path)),
               "previous_status": record.get("status")}
    folder.update_run(status="running", owner=describe_owner(), **{RESUMED_AT: [*record.get(RESUMED_AT, []), attempt]})
    return folder, run_start

