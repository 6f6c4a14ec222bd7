"""The strategy contract: what the harness needs to drive and time one worker.

A strategy gets the config, its worker context, the model and the data; it owns
placement, gradient exchange and the optimizer step. It never opens result
files, never prints and never parses flags. If it needs processes, it says so
through `launch` and the launcher starts them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.config import RunConfig
from bench.data import Dataset, Split
from bench.options import Option

IN_PROCESS = "in-process"  # one process runs the whole job
TF_CLUSTER = "tf-cluster"  # ps and worker processes of a tf.distribute.Server cluster
MPI = "mpi"  # one process per rank under mpirun / horovodrun


@dataclass(frozen=True)
class WorkerContext:
    """Who this process is within the run."""

    rank: int = 0
    num_workers: int = 1
    is_chief: bool = True
    run_start: float = 0.0  # epoch seconds every process measures from
    cluster: dict[str, list[str]] | None = None  # {"ps": [...], "worker": [...]} for TF clusters


@dataclass(frozen=True)
class StepResult:
    """What one call of Strategy.step did on this worker."""

    loss: float
    examples: int
    global_step: int  # the run's step count after this step (all workers together)
    staleness: int | None = None  # steps the parameters (or the gradient) were behind, where it applies
    applied: bool | None = None  # False: the gradient arrived stale and was dropped (ps-sync backup workers)
    arrival: int | None = None  # order in which this step's gradient reached the parameter servers
    extra: dict[str, Any] = field(default_factory=dict)


class Strategy(ABC):
    name: ClassVar[str]
    launch: ClassVar[str] = IN_PROCESS
    options: ClassVar[tuple[Option, ...]] = ()
    worker_range: ClassVar[tuple[int, int | None]] = (1, None)  # worker counts it runs with (None: no limit)
    description: ClassVar[str] = ""

    def __init__(self, config: RunConfig, context: WorkerContext) -> None:
        self.config = config
        self.context = context

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        """Raise bench.errors.UsageError for a config this strategy cannot run."""

    @classmethod
    def processes(cls, config: RunConfig) -> dict[str, int]:
        """Processes per role that the launcher starts for a local TF_CLUSTER or MPI run."""
        return {"worker": config.workers}

    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        """Process-wide TensorFlow settings (logical devices, GPU memory) made before
        TensorFlow starts its runtime; returns what was done, for run.json."""
        return {}

    @classmethod
    def worker_batch(cls, config: RunConfig) -> int:
        """Examples one worker process feeds per step (all its towers together)."""
        return config.batch_size

    @abstractmethod
    def setup(self, data: Dataset) -> None:
        """Build the model, optimizer and input pipeline; initialise or receive weights."""

    def ready(self) -> None:
        """Block until every worker can start training (start-up ends here)."""

    @abstractmethod
    def step(self) -> StepResult:
        """Run one training step on this worker."""

    @classmethod
    def tolerates_worker_loss(cls, config: RunConfig) -> bool:
        """Whether the run can finish when a non-chief worker dies."""
        return False

    def finished(self, result: StepResult) -> bool:
        """True once the run has done its steps (the default counts global steps)."""
        return result.global_step >= self.config.steps

    @abstractmethod
    def evaluate(self, split: Split) -> tuple[float, float]:
        """(mean loss, accuracy) of the current weights on `split`."""

    @abstractmethod
    def weights(self) -> list[np.ndarray]:
        """Current values of the model's variables, in creation order."""

    def info(self) -> dict[str, Any]:
        """Facts for run.json: devices used, bytes moved per step, placement, ..."""
        return {}

    @classmethod
    def finalize_records(cls, run_dir: Path, config: RunConfig) -> dict[str, Any]:
        """After all workers are done: derive what needs every worker's rows (in steps.csv)."""
        return {}

    def teardown(self) -> None:
        """Release what setup acquired. Called on success and on failure."""
