"""The worker's step log: rows kept in memory and written in batches, with the same columns
and values as one row per step would have had."""

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from bench.run.contract import StepResult, StepTimes
from bench.run.process import step_log
from bench.run.process.records import STEP_COLUMNS, STEPS_FILE, RunFolder
from bench.run.process.stamping import stamped
from bench.run.process.step_log import FLUSH_S, STACK, StepLog, read_losses
from strategies.workers.eager import StampedOutput


def folder_with_log(tmp_path, run_start=100.0):
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    folder.ensure_files()
    writer = folder.steps_writer()
    return folder, writer, StepLog(writer, folder.run_id, 1, run_start)


def test_rows_keep_every_column_and_value(tmp_path):
    folder, writer, log = folder_with_log(tmp_path)
    times = StepTimes(compute_s=0.25, exchange_s=0.5, waiting_s=None, ready_at=100.75)
    log.add(0, 1.0, 2.0, StepResult(tf.constant(0.5), 64, 3, staleness=2, applied=False, arrival=7, times=times),
            slept=0.125)
    log.add(1, 2.0, 3.5, StepResult(np.float32(0.25), 64, 4))
    log.add(2, 3.5, 4.0, StepResult(tf.constant(0.75), 64, 5, times=lambda: StepTimes(0.1, 0.2, 0.3)))
    written = log.flush(10.0)
    writer.close()
    rows = pd.read_csv(folder.path / STEPS_FILE)
    assert list(rows.columns) == list(STEP_COLUMNS) and len(rows) == 3
    first = rows.iloc[0]
    assert (first["worker"], first["local_step"], first["global_step"], first["examples"]) == (1, 0, 3, 64)
    assert (first["loss"], first["staleness_steps"], first["applied"], first["arrival_order"]) == (0.5, 2, 0, 7)
    # a straggler's sleep counts as compute; ready_s is on the run's clock
    assert (first["compute_s"], first["exchange_s"], first["ready_s"]) == (0.375, 0.5, 0.75)
    assert np.isnan(first["waiting_s"])
    assert rows.iloc[1][["compute_s", "exchange_s", "waiting_s", "ready_s", "staleness_steps"]].isna().all()
    assert rows.iloc[2][["compute_s", "exchange_s", "waiting_s"]].tolist() == [0.1, 0.2, 0.3]
    assert rows["t_end_s"].tolist() == [2.0, 3.5, 4.0]
    # the progress line: the last step, examples over the span of the batch
    assert (written.global_step, written.loss) == (5, 0.75) and written.examples_per_s == 3 * 64 / 3.0


def test_flush_is_due_every_interval_and_empty_flushes_write_nothing(tmp_path):
    folder, writer, log = folder_with_log(tmp_path)
    assert log.due(0.0)
    assert log.flush(5.0) is None
    assert not log.due(5.0 + FLUSH_S / 2) and log.due(5.0 + FLUSH_S)
    writer.close()
    assert len(pd.read_csv(folder.path / STEPS_FILE)) == 0


def test_losses_are_read_back_exactly_whatever_they_are():
    values = [tf.constant(0.1), 0.2, np.float64(0.3), tf.constant(0.4, tf.float64), tf.constant(0.5)]
    assert read_losses(values) == [float(np.float32(0.1)), 0.2, 0.3, 0.4, float(np.float32(0.5))]


@pytest.mark.parametrize("on_device", [False, True], ids=["host-memory", "device-memory"])
def test_more_losses_than_one_stack_are_read_back_in_order(monkeypatch, on_device):
    # no GPU here: losses on the CPU stand for device-resident ones, which are read in stacks
    if on_device:
        monkeypatch.setattr(step_log, "in_host_memory", lambda device: False)
    count = 2 * STACK + 7  # two full stacks and a padded one, mixed with values that are not tensors
    values = [tf.constant(float(i)) if i % 9 else float(i) for i in range(count)]
    assert read_losses(values) == [float(i) for i in range(count)]


def test_a_stamped_output_is_read_once_into_loss_and_times():
    out = StampedOutput(tf.constant([0.5, 10.0, 10.25, 10.5, 11.0, 11.5], tf.float64), collective=False)
    assert float(out) == 0.5
    times = out.times()
    # two replicas ready at 10.25 and 10.5: compute is their mean time plus the update after the exchange
    assert times.compute_s == 0.375 + 0.5 and times.waiting_s == 0.125
    assert times.exchange_s == (11.0 - 10.5) + 0.125


def test_stamped_steps_are_dense_first_then_sparse():
    steps = range(400)
    chosen = [s for s in steps if stamped(s)]
    assert chosen[:3] == [0, 5, 10] and 195 in chosen and 205 not in chosen and 250 in chosen
    assert len(chosen) == 40 + 4
