"""Checks that a finished run recorded where its steps' time went (bench.run.breakdown)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from bench.run.breakdown import BREAKDOWN_FILE, PARTS, stamped

CLOCK_SLACK_S = 1e-3  # stamps of two processes, or of the host and the graph, may disagree by this
# cnn's steps are long enough that the host's share (dispatch, fetch) is small: the stamped parts
# must cover most of a step (1-3% is left at batch 64; the tests' batch of 8 leaves more), where
# on mlp the host's part is ~40% of a 1 ms step
STAMPED_CNN = 0.8


def assert_time_split(run_dir: Path, exchanges: bool = True, accounted: float = 0.25) -> pd.DataFrame:
    """Every worker's steps that breakdown.stamped names, and only those, are split into PARTS that add up to
    the step, none below zero, the three stamped parts account for at least `accounted` of each
    worker's median step after the warm-up, and a strategy that `exchanges` nothing spends no
    time communicating or waiting."""
    steps = pd.read_csv(run_dir / "steps.csv")
    parts = pd.read_csv(run_dir / BREAKDOWN_FILE)
    due = steps["local_step"].map(stamped)
    assert sorted(zip(parts["worker"], parts["local_step"])) == \
        sorted(zip(steps.loc[due, "worker"], steps.loc[due, "local_step"]))
    assert steps.loc[~due, "compute_s"].isna().all()
    assert (parts[list(PARTS)] >= -CLOCK_SLACK_S).all().all(), parts.describe()
    # compute is a real part of every worker's steps; one step may show two stamps in the same
    # microsecond (tf.timestamp's resolution) when the executor runs the first one late
    assert (parts.groupby("worker")["compute_s"].median() > 0).all()
    total = parts[list(PARTS)].sum(axis=1)
    assert ((total - parts["step_s"]).abs() < 1e-9).all()
    measured = parts[parts["local_step"] >= json.loads((run_dir / "run.json").read_text())["config"]["warmup_steps"]]
    assert len(measured)
    stamped_parts = measured["compute_s"] + measured["communication_s"] + measured["waiting_s"]
    share = (stamped_parts / measured["step_s"]).groupby(measured["worker"]).median()
    assert (share >= accounted).all(), share
    if not exchanges:
        assert (parts["communication_s"] == 0).all() and (parts["waiting_s"] == 0).all()
    summary = json.loads((run_dir / "run.json").read_text())["summary"]["breakdown"]
    assert set(summary["per_worker"]) == {str(w) for w in steps["worker"].unique()}
    return parts
