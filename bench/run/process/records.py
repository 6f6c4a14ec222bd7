"""One folder per run: run.json, steps.csv and evals.csv, written as the run goes.

Several processes append to the same CSV: each write is one os.write of whole rows on a
file opened with O_APPEND, so rows never interleave. A worker's steps are written in
batches (bench.run.process.step_log); evaluations one row at a time.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

STEP_COLUMNS = ("run_id", "worker", "local_step", "global_step", "t_start_s", "t_end_s",
                "examples", "loss", "staleness_steps", "applied", "arrival_order",
                "compute_s", "exchange_s", "waiting_s", "ready_s")
EVAL_COLUMNS = ("run_id", "global_step", "wall_s", "split", "loss", "accuracy", "eval_s")
STEPS_FILE, EVALS_FILE, RUN_FILE = "steps.csv", "evals.csv", "run.json"
DEVICES_FOLDER = "devices"  # one file per task: the devices it used (run.json's `devices`)
RESUMED_AT = "resumed_at"  # run.json: each later attempt of a resumed run (bench.run.process.resume)
RECOVERIES = "recoveries"  # run.json: each restart --recover made (bench.run.launch.recovery)


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class CsvAppender:
    """Appends rows to a CSV file that already has its header."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, **row: Any) -> None:
        self.write_many([tuple(row.get(c) for c in self.columns)])

    def write_many(self, rows: list[tuple]) -> None:
        """Rows of values in column order, in one write."""
        self.write_text("".join(",".join(map(_format, row)) + "\n" for row in rows))

    def write_text(self, lines: str) -> None:
        """Whole lines, already formatted, in one write."""
        data = lines.encode()
        written = os.write(self._fd, data)
        if written < len(data):
            try:
                os.write(self._fd, data[written:])  # raises the reason: no space left, file too large
            except OSError:
                # keep the whole rows that were written, take the partial one back: the file
                # still ends on a whole row
                whole = data.rfind(b"\n", 0, written) + 1
                os.ftruncate(self._fd, os.fstat(self._fd).st_size - (written - whole))
                raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def ensure_csv(path: Path, columns: tuple[str, ...]) -> None:
    """Create `path` with its header row unless it exists. The header is written to a temporary
    file that is then linked into place, so a concurrent appender never sees a file without it."""
    if path.exists():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(2)}.tmp")
    tmp.write_text(",".join(columns) + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


class RunFolder:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.run_id = self.path.name

    @classmethod
    def create(cls, output: str, label: str) -> RunFolder:
        """A new, empty folder under `output`; never reuses an existing one."""
        root = Path(output)
        root.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        while True:
            path = root / f"{stamp}-{label}-{secrets.token_hex(2)}"
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        folder = cls(path)
        folder.ensure_files()
        return folder

    def ensure_files(self) -> None:
        """The CSV files with their headers (a task started by hand may be the first to arrive)."""
        ensure_csv(self.path / STEPS_FILE, STEP_COLUMNS)
        ensure_csv(self.path / EVALS_FILE, EVAL_COLUMNS)

    def claim(self, role: str, index: int) -> None:
        """Mark this folder as holding task `role` `index`; fails if an earlier run's task already did."""
        (self.path / "workers").mkdir(parents=True, exist_ok=True)  # the run folder too
        os.close(os.open(self.path / "workers" / f"{role}{index}.claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))

    def write_task_report(self, index: int, report: dict[str, Any]) -> None:
        """Worker (or rank) `index`'s own report: how it started, its steps, its error. One file per
        worker, the same on every launch path; the launcher reads them back with task_reports()."""
        (self.path / "workers").mkdir(exist_ok=True)
        write_atomically(self.path / "workers" / f"worker{index}.json", json.dumps(report, default=str))

    def task_reports(self) -> dict[int, dict[str, Any]]:
        """{worker index: its report} of the workers that wrote one."""
        out = {}
        for path in (self.path / "workers").glob("worker*.json"):
            index = path.stem.removeprefix("worker")
            if index.isdigit():
                out[int(index)] = json.loads(path.read_text())
        return dict(sorted(out.items()))

    def write_devices(self, role: str, index: int, record: dict[str, Any]) -> None:
        """The devices task `role` `index` used (bench.run.placement.visible), one file per task of any role."""
        (self.path / DEVICES_FOLDER).mkdir(exist_ok=True)
        write_atomically(self.path / DEVICES_FOLDER / f"{role}{index}.json", json.dumps(record, default=str))

    def device_reports(self) -> dict[str, dict[str, Any]]:
        """{"worker 0": its devices, "ps 0": ...} of the tasks that wrote them, workers first."""
        found = {}
        for path in (self.path / DEVICES_FOLDER).glob("*.json"):
            record = json.loads(path.read_text())
            found[f"{record.get('role')} {record.get('index')}"] = record
        order = {"worker": 0, "chief": 1, "coordinator": 1, "ps": 2}
        return dict(sorted(found.items(), key=lambda kv: (order.get(kv[1].get("role"), 3), kv[1].get("index") or 0)))

    def steps_writer(self) -> CsvAppender:
        return CsvAppender(self.path / STEPS_FILE, STEP_COLUMNS)

    def evals_writer(self) -> CsvAppender:
        return CsvAppender(self.path / EVALS_FILE, EVAL_COLUMNS)

    def read_run(self) -> dict[str, Any]:
        path = self.path / RUN_FILE
        return json.loads(path.read_text()) if path.exists() else {}

    def update_run(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into run.json, replacing the file atomically."""
        record = self.read_run()
        record.update(fields)
        write_atomically(self.path / RUN_FILE, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
        return record


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` by `text` at once: a task of the same run may read it meanwhile (a chief started by hand
    reads every task's report while the others still write theirs; seen: an empty report failed its close)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def last_global_step(run_dir: Path) -> int:
    """The highest global step in the run's steps.csv so far (0 before any step)."""
    try:
        with open(run_dir / STEPS_FILE, newline="") as f:
            rows = csv.DictReader(f)
            return max((int(row["global_step"]) for row in rows if row.get("global_step")), default=0)
    except OSError:
        return 0


def restarts_s(record: dict[str, Any]) -> list[float]:
    """When each later attempt of a run began, in seconds on the run's clock."""
    return [float(a["at_s"]) for a in record.get(RESUMED_AT) or []]
