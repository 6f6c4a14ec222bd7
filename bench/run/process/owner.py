"""Who owns a run: the process that opened run.json and must close it.

A run whose owner was killed outright (SIGKILL, a lost host) never records its end, so
run.json says `running` forever. The owner is recorded (host, boot, pid, process start
time) so that a reader on the same host can tell a live run from a dead one; a run
whose owner is gone is then closed as failed with the last step it recorded.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import psutil

from bench.run.process.records import STEPS_FILE, RunFolder

BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")
OWNER_GONE = "failed: launcher gone (no end recorded)"
START_TIME_TOLERANCE_S = 1.0


def boot_id() -> str | None:
    try:
        return BOOT_ID_FILE.read_text().strip()
    except OSError:
        return None


def describe_owner() -> dict[str, Any]:
    """This process, as the owner of a run."""
    process = psutil.Process(os.getpid())
    return {"host": socket.gethostname(), "boot_id": boot_id(), "pid": process.pid,
            "process_started_epoch_s": process.create_time()}


def owner_state(owner: dict[str, Any] | None) -> str:
    """"alive", "gone", or "unknown" (no owner recorded, or another host: it cannot be checked from here)."""
    if not owner or owner.get("host") != socket.gethostname():
        return "unknown"
    if owner.get("boot_id") and owner.get("boot_id") != boot_id():
        return "gone"  # the machine was restarted since
    try:
        process = psutil.Process(int(owner["pid"]))
        same = abs(process.create_time() - float(owner["process_started_epoch_s"])) < START_TIME_TOLERANCE_S
        return "alive" if same and process.status() != psutil.STATUS_ZOMBIE else "gone"
    except (psutil.NoSuchProcess, KeyError, TypeError, ValueError):
        return "gone"


def last_step(run_dir: Path) -> int | None:
    """The highest global step recorded in steps.csv (None before the first)."""
    import pandas as pd

    try:
        steps = pd.read_csv(run_dir / STEPS_FILE, usecols=["global_step"])
    except (OSError, ValueError):
        return None
    return int(steps["global_step"].max()) if len(steps) else None


def settle_if_abandoned(run_dir: Path, record: dict[str, Any]) -> dict[str, Any]:
    """A run still marked running whose owner is gone is closed as failed, with its last step and
    the summary of what it recorded; run.json is updated where it can be written."""
    if record.get("status") != "running" or owner_state(record.get("owner")) != "gone":
        return record
    from bench.run.process.summary import summarize

    config = record.get("config") or {}
    fields: dict[str, Any] = {"status": OWNER_GONE, "last_step": last_step(run_dir), "closed_by": "report"}
    try:
        fields["summary"] = summarize(run_dir, int(config.get("warmup_steps") or 0),
                                      float(config.get("target_accuracy") or 1.0))
    except Exception:  # noqa: BLE001 - records cut off mid-row: the status is what matters
        pass
    try:
        return RunFolder(run_dir).update_run(**fields)
    except OSError:
        return {**record, **fields}
