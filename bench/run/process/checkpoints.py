"""Periodic checkpoints of a run, saved by the chief: when one is due, the time each takes,
and checkpoints.csv.

The strategy's Worker writes the checkpoint itself (Worker.save_checkpoint: TensorFlow's own
formats, written to temporary files that are renamed into place, the `checkpoint` state file
last), so a failed write never leaves a half-written checkpoint as the latest.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.config import RunConfig
from bench.errors import RunFailed
from bench.run.process.records import CsvAppender, RunFolder, ensure_csv

if TYPE_CHECKING:
    from bench.run.contract import Worker

CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_NAME = "ckpt"  # a checkpoint's files are checkpoints/ckpt-<global step>.*
CHECKPOINTS_FILE = "checkpoints.csv"
CHECKPOINT_COLUMNS = ("run_id", "global_step", "wall_s", "save_s", "bytes")


def reason(exc: Exception) -> str:
    """The cause in a TensorFlow error's message ("{{function_node ...}} PATH; File too large [Op:SaveV2]")."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return re.sub(r"\s*\[Op:\w+\]$", "", text.split("; ")[-1])


def latest_checkpoint(directory: Path) -> Path | None:
    """The latest complete checkpoint in `directory`: the one its `checkpoint` state file names
    (written last, after the checkpoint's files), when its index is there."""
    try:
        state = (directory / "checkpoint").read_text()
    except OSError:
        return None
    named = re.search(r'^model_checkpoint_path:\s*"(.+)"\s*$', state, re.MULTILINE)
    if not named:
        return None
    prefix = directory / named.group(1)  # relative to the folder, unless written absolute
    return prefix if prefix.with_name(prefix.name + ".index").exists() else None


def checkpoint_step(prefix: Path | str) -> int:
    """The global step a checkpoint was saved at, from its name (CHECKPOINT_NAME-<global step>)."""
    return int(Path(prefix).name.rsplit("-", 1)[1])


def checkpoint_bytes(prefix: str) -> int:
    """Bytes of the files of the checkpoint at `prefix` (its index and data shards)."""
    path = Path(prefix)
    return sum(f.stat().st_size for f in path.parent.glob(path.name + ".*"))


class Checkpoints:
    """Saves a checkpoint every `checkpoint_every_steps` global steps or `checkpoint_every_s`
    seconds, and at the end; records each save in checkpoints.csv."""

    def __init__(self, config: RunConfig, folder: RunFolder, clock: Callable[[], float]) -> None:
        self.every_steps = config.checkpoint_every_steps
        self.every_s = config.checkpoint_every_s
        self.directory = folder.path / CHECKPOINT_DIR
        self.directory.mkdir(exist_ok=True)
        self.run_id = folder.run_id
        self.clock = clock
        ensure_csv(folder.path / CHECKPOINTS_FILE, CHECKPOINT_COLUMNS)
        self.writer = CsvAppender(folder.path / CHECKPOINTS_FILE, CHECKPOINT_COLUMNS)
        self.last_step = config.resume_step
        self.last_time = clock()

    @classmethod
    def for_run(cls, config: RunConfig, folder: RunFolder, clock: Callable[[], float],
                is_chief: bool) -> Checkpoints | None:
        if not is_chief or not config.checkpointing:
            return None
        return cls(config, folder, clock)

    def due(self, global_step: int, now: float) -> bool:
        if self.every_steps:
            return global_step // self.every_steps > self.last_step // self.every_steps
        return now - self.last_time >= self.every_s

    def save(self, worker: Worker, global_step: int) -> None:
        started = self.clock()
        try:
            prefix = worker.save_checkpoint(str(self.directory), global_step)
        except Exception as exc:
            for partial in self.directory.glob("*_temp"):  # TensorFlow's unfinished shards
                shutil.rmtree(partial, ignore_errors=True)
            raise RunFailed(f"checkpoint at global step {global_step} not written: {reason(exc)}") from exc
        ended = self.clock()
        self.writer.write(run_id=self.run_id, global_step=global_step, wall_s=started, save_s=ended - started,
                          bytes=checkpoint_bytes(prefix))
        self.last_step, self.last_time = global_step, ended

    def close(self) -> None:
        self.writer.close()
