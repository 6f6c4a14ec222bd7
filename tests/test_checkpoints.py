"""Checkpoints: the chief saves the weights, the optimizer's state and the global step in
TensorFlow's own format, keeps the latest few, records what each save cost; a save that
fails fails the run and never becomes the latest."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from bench.cli import main
from bench.config import RunConfig
from bench.errors import UsageError
from bench.run.contract import Worker, worker_class
from bench.run.process.checkpoints import CHECKPOINT_DIR, CHECKPOINTS_FILE
from bench.run.validation import validate
from strategies import registry
from tests.checkpoint_values import assert_holds_the_final_weights, latest
from tests.conftest import ROOT, only_run
from tests.processes import RUN_LIMIT_S, bench, run_record

SHORT = ["--model", "mlp", "--data", "digits", "--optimizer", "momentum", "--save-weights", "--eval-every", "0"]


def test_every_k_steps_the_last_n_kept_with_what_each_save_cost(results):
    assert main(["--strategy", "single", *SHORT, "--steps", "60", "--checkpoint-every-steps", "10",
                 "--checkpoint-keep", "2", "--output", str(results)]) == 0
    run_dir = only_run(results)
    saves = pd.read_csv(run_dir / CHECKPOINTS_FILE)
    assert list(saves["global_step"]) == [10, 20, 30, 40, 50, 60]
    assert (saves["save_s"] > 0).all() and (saves["bytes"] > 100_000).all()
    kept = sorted(p.name for p in (run_dir / CHECKPOINT_DIR).glob("*.index"))
    assert kept == ["ckpt-50.index", "ckpt-60.index"]
    step, values = latest(run_dir)
    assert step == 60
    assert_holds_the_final_weights(run_dir, values)
    summary = run_record(results)["summary"]
    assert summary["checkpoints"] == 6
    assert summary["throughput_between_checkpoints_examples_per_s"] > summary["throughput_examples_per_s"]
    assert 0 < summary["checkpoint_overhead"] < 1


def test_every_t_seconds(results):
    assert main(["--strategy", "single", *SHORT, "--steps", "1500", "--checkpoint-every-s", "0.2",
                 "--output", str(results)]) == 0
    saves = pd.read_csv(only_run(results) / CHECKPOINTS_FILE)
    assert len(saves) >= 3 and saves["global_step"].iloc[-1] == 1500
    periodic = saves.iloc[:-1]  # the last is the save at the end
    began = periodic["wall_s"].to_numpy()
    assert (np.diff(began) >= 0.2).all()


@pytest.mark.parametrize("args", [["--checkpoint-every-steps", "-1"], ["--checkpoint-keep", "0"],
                                  ["--checkpoint-every-steps", "5", "--checkpoint-every-s", "1"]])
def test_bad_checkpoint_settings_are_refused_before_work_starts(results, args):
    out = bench("--steps", "5", "--output", str(results), *args)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert not any(results.iterdir())


@pytest.mark.parametrize("name", list(registry.all_strategies()))
def test_a_strategy_says_whether_it_can_save(name):
    strategy = registry.get(name)
    assert strategy.checkpoints == (worker_class(strategy).save_checkpoint is not Worker.save_checkpoint)


def test_a_strategy_that_cannot_save_refuses_before_work_starts(monkeypatch, tmp_path):
    monkeypatch.setattr(registry.get("single"), "checkpoints", False)
    with pytest.raises(UsageError, match="single cannot save checkpoints"):
        config = RunConfig(checkpoint_every_steps=10, output=str(tmp_path))
        validate(config, registry.get("single"), registry.all_strategies())


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # a checkpoint of mlp is 620 KiB
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG instead of killing us


def test_a_save_that_fails_fails_the_run_and_is_never_the_latest(results):
    launcher = subprocess.run([sys.executable, "-m", "bench", "--strategy", "single", *SHORT, "--steps", "30",
                               "--checkpoint-every-steps", "10", "--output", str(results)], cwd=ROOT,
                              capture_output=True, text=True, preexec_fn=limit_file_size,
                              timeout=RUN_LIMIT_S)  # one 30-step run
    assert launcher.returncode == 1
    record = run_record(results)
    assert record["status"] == "failed: RunFailed: checkpoint at global step 10 not written: File too large"
    run_dir = only_run(results)
    assert tf.train.latest_checkpoint(str(run_dir / CHECKPOINT_DIR)) is None
    assert not any((run_dir / CHECKPOINT_DIR).iterdir())  # nor its unfinished files
    assert len(pd.read_csv(run_dir / "steps.csv")) >= 10  # the steps before it are kept


@pytest.mark.slow
def test_an_asynchronous_chief_saves_at_each_multiple_it_passes(results):
    """The synchronous strategies' saves are checked by tests/test_resume.py's uninterrupted runs."""
    out = bench("--strategy", "ps-async", *SHORT, "--workers", "2", "--steps", "30", "--checkpoint-every-steps",
                "10", "--output", str(results))
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = only_run(results)
    steps = list(pd.read_csv(run_dir / CHECKPOINTS_FILE)["global_step"])
    assert steps[-1] >= 30 and steps == sorted(set(steps))
    # each periodic save is the first step past a new multiple of 10; an asynchronous chief sees
    # the global step jump by the other worker's steps, so it may pass a multiple without a save
    periodic = steps[:-1]
    assert all(s // 10 > p // 10 for p, s in zip([0, *periodic], periodic, strict=False))
    step, _ = latest(run_dir)
    # the saver reads the global step from the ps as it reads the variables: the other worker
    # may have taken a step since the chief named the checkpoint
    assert step >= steps[-1]
