"""Checks that a finished run recorded where its steps' time went (bench.run.process.breakdown)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd

from bench.run.process.breakdown import BREAKDOWN_FILE, PARTS
from bench.run.process.stamping import stamped
from bench.run.process.tracing import traced_steps

STAMPED_PARTS = ("compute_s", "communication_s", "waiting_s")
# The kernel slews CLOCK_REALTIME (tf.timestamp's clock) against CLOCK_MONOTONIC (the host's step
# clock) by at most MAXFREQ, 500 ppm (include/uapi/linux/timex.h): a step's graph span may read
# that much longer than the host's span around it.
MAX_SLEW = 500e-6


@functools.cache
def timestamp_tick_s() -> float:
    """tf.timestamp's resolution as measured here: the smallest nonzero step between 2,000 chained
    stamps (1 us on this machine: TensorFlow reads the clock in microseconds)."""
    import tensorflow as tf

    @tf.function
    def chain():
        out = [tf.timestamp()]
        for _ in range(2000):
            with tf.control_dependencies(out[-1:]):
                out.append(tf.timestamp())
        return tf.stack(out)

    steps = np.diff(chain().numpy())
    return float(steps[steps > 0].min())


def other_slack_s(step_s: pd.Series) -> pd.Series:
    """How far below zero a step's other_s (host span minus the stamps' span) can read with no
    error of the split: the first and last stamp's ticks, and the two clocks' slew."""
    return 2 * timestamp_tick_s() + MAX_SLEW * step_s
# cnn's steps are long enough that the host's share (dispatch, fetch) is small: the stamped parts
# must cover most of a step (1-3% is left at batch 64; the tests' batch of 8 leaves more), where
# on mlp the host's part is ~40% of a 1 ms step
STAMPED_CNN = 0.8


def assert_time_split(run_dir: Path, exchanges: bool = True, accounted: float = 0.25) -> pd.DataFrame:
    """Every worker's steps that stamping.stamped names, and only those, are split into PARTS that add up to
    the step, none below zero, the three stamped parts account for at least `accounted` of each
    worker's undisturbed step after the warm-up, and a strategy that `exchanges` nothing spends no
    time communicating or waiting."""
    steps = pd.read_csv(run_dir / "steps.csv")
    parts = pd.read_csv(run_dir / BREAKDOWN_FILE)
    record = json.loads((run_dir / "run.json").read_text())
    traced = set(traced_steps(record["config"]["warmup_steps"])) if record["strategy"]["traces_exchange"] else set()
    due = steps["local_step"].map(lambda step: stamped(step) or step in traced)
    assert sorted(zip(parts["worker"], parts["local_step"])) == \
        sorted(zip(steps.loc[due, "worker"], steps.loc[due, "local_step"]))
    assert steps.loc[~due, "compute_s"].isna().all()
    # the stamps are chained (strategies/workers/stamps.py), so their parts are exact differences of
    # ordered readings of one clock; only other_s compares two clocks
    assert (parts[list(STAMPED_PARTS)] >= 0).all().all(), parts.describe()
    assert (parts["other_s"] >= -other_slack_s(parts["step_s"])).all(), parts.describe()
    # compute shows on every worker. Not in every step, nor in the median one: a ps worker's arrival
    # stamp is a leaf the forward pass does not wait for (strategies/workers/ps.py), and on a loaded
    # machine the executor thread that runs it can be preempted while the forward and backward
    # passes run, so the stamp reads within a microsecond of the ready one (a ps-async worker's
    # median compute read 0 beside the background runs); that step's compute counts as communication
    assert (parts.groupby("worker")["compute_s"].max() > 0).all()
    total = parts[list(PARTS)].sum(axis=1)
    assert ((total - parts["step_s"]).abs() < 1e-9).all()
    measured = parts[parts["local_step"] >= record["config"]["warmup_steps"]]
    assert len(measured)
    # Load (other tests' processes) only adds time to a step, to its host part as to its graph's, so
    # each worker's least host time and least step time are its undisturbed ones (timeit's argument for
    # the minimum); the median share once read 0.67 on cnn beside a busy process
    per_worker = measured.groupby("worker")
    share = 1 - per_worker["other_s"].min() / per_worker["step_s"].min()
    assert (share >= accounted).all(), (share, per_worker[["other_s", "step_s"]].describe())
    if not exchanges:
        assert (parts["communication_s"] == 0).all() and (parts["waiting_s"] == 0).all()
    summary = record["summary"]["breakdown"]
    assert set(summary["per_worker"]) == {str(w) for w in steps["worker"].unique()}
    if traced and record["summary"]["exposure"]["traced"]:
        assert_exposure(record, traced)
    return parts


def assert_exposure(record: dict, traced: set[int]) -> None:
    """The traced steps' per-tensor exposed communication: warm-up steps only, tensors named, and
    their sum no more than the split's communication of the same
    steps plus what the split leaves unplaced (its other) and 1 ms (Horovod's cycle, in which the
    timeline's negotiation ends after the last rank is ready)."""
    exposure = record["summary"]["exposure"]
    assert exposure["traced"], exposure
    assert all(set(steps) <= traced for steps in exposure["traced_steps"].values()), exposure["traced_steps"]
    names = {t["name"] for t in exposure["tensors"]}
    assert names and exposure["exposed_communication_s"] >= 0
    assert exposure["exposed_communication_s"] <= (exposure["split_communication_s"] + exposure["split_other_s"]
                                                   + 1e-3), exposure
