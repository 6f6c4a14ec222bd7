import json

import numpy as np
import pytest

from bench.cli import main
from tests.conftest import only_run
from tests.equivalence import assert_weights_close, config_for, initial_weights, train_in_process
from tests.time_split import STAMPED_CNN, assert_time_split

B = 16


@pytest.mark.parametrize("strategy", ["multi-tower", "mirrored"])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
def test_two_towers_step_equals_one_single_step_of_the_whole_batch(strategy, optimizer):
    towers = train_in_process(config_for(strategy, workers=2, batch_size=B, optimizer=optimizer), steps=1)
    single = train_in_process(config_for("single", batch_size=2 * B, optimizer=optimizer), steps=1)
    assert_weights_close(towers, single)
    moved = [np.abs(w - w0).max() for w, w0 in zip(towers, initial_weights(config_for("single")), strict=True)]
    assert min(moved) > 0  # the step did change every variable


@pytest.mark.parametrize("strategy", ["multi-tower", "mirrored"])
def test_one_tower_behaves_like_single(strategy):
    one = train_in_process(config_for(strategy, workers=1, batch_size=B), steps=5)
    single = train_in_process(config_for("single", batch_size=B), steps=5)
    assert_weights_close(one, single)


def test_multi_tower_converges_on_digits_and_records_its_devices(results):
    assert main(["--strategy", "multi-tower", "--workers", "2", "--model", "mlp", "--data", "digits",
                 "--steps", "300", "--eval-every", "100", "--output", str(results)]) == 0
    record = json.loads((only_run(results) / "run.json").read_text())
    assert record["status"] == "ok" and record["summary"]["best_accuracy"] >= 0.90
    info = record["strategy_info"]
    assert len(info["towers"]) == 2 and info["parameter_device"]
    assert_time_split(only_run(results))
    assert record["runtime"]["kind"] == "cpu" and record["runtime"]["logical_cpu_devices"] >= 2
    # no GPU found or declared: the process's placement changed nothing, and says so
    assert record["devices"]["worker 0"]["gpus"] == [] and record["devices"]["worker 0"]["memory"] is None


def test_mirrored_runs_the_cnn_and_records_its_gpu_memory_policy(results):
    assert main(["--strategy", "mirrored", "--workers", "2", "--model", "cnn", "--data", "synthetic",
                 "--steps", "12", "--warmup-steps", "2", "--gpu-memory-fraction", "0.5", "--output", str(results)]) == 0
    record = json.loads((only_run(results) / "run.json").read_text())
    assert record["status"] == "ok" and record["config"]["gpu_memory_fraction"] == 0.5
    assert_time_split(only_run(results), accounted=STAMPED_CNN)
