"""TensorBoard: every run's chief writes event files into its run folder, read back here with
TensorBoard's own reader, as `tensorboard --logdir results/` would."""

from __future__ import annotations

import glob

import pandas as pd
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer

from bench.cli import main
from bench.run.process import events
from bench.run.process.step_log import Written
from tests.conftest import only_run
from tests.processes import bench


def scalars(folder, tag: str) -> list[tuple[int, float]]:
    reader = EventAccumulator(str(folder))
    reader.Reload()
    return [(e.step, e.value) for e in reader.Scalars(tag)] if tag in reader.Tags()["scalars"] else []


def test_what_is_written_is_what_tensorboard_reads(tmp_path):
    writer = events.RunEvents(tmp_path)
    writer.train(Written(global_step=50, loss=0.5, examples_per_s=1000.0, mean_loss=0.75, step_time_s=0.01,
                         staleness_steps=None))
    writer.train(Written(60, 0.25, 2000.0, 0.3, 0.02, 1.5))
    writer.evaluation(60, loss=0.4, accuracy=0.875)
    writer.close()
    assert scalars(tmp_path, events.LOSS) == [(50, 0.75), (60, pytest.approx(0.3))]
    assert scalars(tmp_path, events.EXAMPLES_PER_S) == [(50, 1000.0), (60, 2000.0)]
    assert scalars(tmp_path, events.STALENESS) == [(60, 1.5)]  # none recorded at step 50
    assert scalars(tmp_path, events.VAL_ACCURACY) == [(60, 0.875)]


def test_a_run_s_events_follow_its_records_and_tensorboard_lists_every_run(results):
    assert main(["--strategy", "single", "--model", "mlp", "--data", "digits", "--steps", "300",
                 "--eval-every", "100", "--output", str(results)]) == 0
    run = only_run(results)
    evals = pd.read_csv(run / "evals.csv")
    accuracy = scalars(run, events.VAL_ACCURACY)
    assert [s for s, _ in accuracy] == [100, 200, 300]
    assert [v for _, v in accuracy] == pytest.approx(evals["accuracy"].tolist())
    losses = scalars(run, events.LOSS)
    assert losses and losses[-1][0] == 300 and all(v > 0 for _, v in losses)
    assert scalars(run, events.STEP_TIME) and scalars(run, events.EXAMPLES_PER_S)
    assert not scalars(run, events.STALENESS)
    # a second run in the same results folder: TensorBoard shows both, each by its folder's name
    assert main(["--strategy", "single", "--model", "mlp", "--data", "synthetic", "--steps", "20",
                 "--output", str(results)]) == 0
    board = EventMultiplexer().AddRunsFromDirectory(str(results))
    board.Reload()
    assert sorted(board.Runs()) == sorted(p.name for p in results.iterdir() if p.is_dir())


@pytest.mark.slow
def test_only_the_chief_writes_and_ps_async_records_staleness(results):
    done = bench("--strategy", "ps-async", "--workers", "2", "--model", "mlp", "--data", "digits", "--steps", "200",
                 "--eval-every", "100", "--output", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    run = only_run(results)
    assert len(glob.glob(str(run / "**" / "*tfevents*"), recursive=True)) == 1
    staleness = scalars(run, events.STALENESS)
    assert staleness and all(v >= 0 for _, v in staleness)
    assert [s for s, _ in scalars(run, events.VAL_ACCURACY)] == pd.read_csv(run / "evals.csv")["global_step"].tolist()
