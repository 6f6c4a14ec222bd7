"""The ImageNet models' short runs of tests/test_imagenet_models.py, made in the background
(tests/background.py): a run spends its time building and tracing a large graph (Python on one
core, no timing checked)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.run import models
from tests.background import PATIENT, Job, Run

STRATEGIES = ["single", "multi-tower", "ps-sync", "allreduce"]
# ResNet-101 and -152 are ResNet-50's class with more bottleneck blocks of the same code
# (bench/run/models/resnet_imagenet.py): what a family's run proves of ResNet-50 it proves of them,
# so they run under `single` only (their parameters are checked in process by the fast test). The
# two largest graphs of the suite were 6 of its 20 runs and most of their time (ResNet-152 under
# ps-sync alone: 39 s on idle cores).
SAME_CODE_AS = {"resnet101": "resnet50", "resnet152": "resnet50"}


def cases() -> list[tuple[str, str]]:
    """(model, strategy) of every short run."""
    return [(name, strategy) for name in models.IMAGENET for strategy in STRATEGIES
            if name not in SAME_CODE_AS or strategy == "single"]


TEST = "tests/test_imagenet_models.py::test_one_short_run_of_each_model_ends_ok_in_each_family"


def short_run_args(name: str, strategy: str, results: Path) -> list[str]:
    # Two towers trace at once (a bug of AutoGraph's showed only so); a ps-sync worker and an
    # allreduce rank build the same graph whatever their number, so one of each (a second worker
    # doubles the run's CPU and proves nothing more; 2-worker exchanges are proven on the small models)
    workers = {"single": [], "multi-tower": ["--workers", "2"]}.get(strategy, ["--workers", "1"])
    return ["--strategy", strategy, *workers, "--model", name,
            "--image-size", str(models.MIN_IMAGE_SIZE[name]), "--data", "synthetic", "--batch-size", "2",
            "--steps", "1", "--warmup-steps", "0", "--eval-every", "0", *PATIENT, "--output", str(results)]


def short_run(name: str, strategy: str) -> Job:
    """The background job of one short run: its exit and its results folder."""
    def job(folder: Path, run: Run) -> tuple[subprocess.CompletedProcess, Path]:
        return run(*short_run_args(name, strategy, folder)), folder
    return job
