from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.metrics import averaging_bytes, ring_allreduce_bytes
from strategies.local_sgd import AVERAGE, LOCAL, SYNC, step_kind
from tests.background import run_to_end
from tests.equivalence import assert_weights_close, config_for, load_weights, train_in_process
from tests.processes import run_record
from tests.test_allreduce import assert_ranks_hold_the_same_weights, run_dir

B = 16
# 2-worker runs without shuffling (a later --strategy replaces local-sgd), made in the background
# (tests/background.py): their tests check only the weights and records they wrote
RUNS = {
    "h=1": ("--sync-period", "1", "--steps", "3"),
    "synchronous start": ("--sync-period", "4", "--local-sgd-start", "3", "--steps", "3", "--optimizer", "momentum"),
    "drift": ("--sync-period", "4", "--steps", "8", "--optimizer", "momentum", "--average-optimizer-state", "true"),
    "ps h=1": ("--strategy", "local-sgd-ps", "--sync-period", "1", "--steps", "3"),
    "allreduce h=4": ("--sync-period", "4", "--steps", "10", "--optimizer", "momentum"),
    "ps h=4": ("--strategy", "local-sgd-ps", "--sync-period", "4", "--steps", "10", "--optimizer", "momentum"),
}
TEST_RUNS = {
    "test_with_h_1_and_plain_sgd_it_equals_the_synchronous_step_of_the_whole_batch": ["h=1"],
    "test_its_synchronous_start_is_the_allreduce_step_with_any_optimizer": ["synchronous start"],
    "test_local_steps_drift_apart_and_the_average_brings_the_ranks_to_one_model": ["drift"],
    "test_over_parameter_servers_with_h_1_it_equals_the_synchronous_step": ["ps h=1"],
    "test_over_parameter_servers_and_over_allreduce_it_averages_alike": ["allreduce h=4", "ps h=4"],
}


def background_jobs(item) -> dict:
    return {("local-sgd", key): run_to_end("--strategy", "local-sgd", "--workers", "2", "--batch-size", str(B),
                                           "--no-shuffle", "--warmup-steps", "0", "--lr", "0.1", "--save-weights",
                                           *RUNS[key])
            for key in TEST_RUNS.get(item.originalname, [])}


def local_sgd(background, key: str) -> tuple[Path, Path]:
    """The results folder of one of RUNS and its run's folder."""
    results = background.result(("local-sgd", key))
    return results, run_dir(results)


def test_the_schedule_averages_every_h_steps_after_the_synchronous_start_and_at_the_end():
    config = config_for("local-sgd", steps=11, options={"sync_period": 4, "local_sgd_start": 2})
    kinds = [step_kind(config, k) for k in range(1, 12)]
    assert kinds == [SYNC, SYNC, LOCAL, LOCAL, LOCAL, AVERAGE, LOCAL, LOCAL, LOCAL, AVERAGE, AVERAGE]


def test_bytes_per_step_fall_by_the_period():
    every = averaging_bytes(1e6, 4, period=1, steps=400)
    assert every == ring_allreduce_bytes(1e6, 4)
    assert averaging_bytes(1e6, 4, period=4, steps=400) == every // 4
    assert averaging_bytes(1e6, 4, period=16, steps=400) == every // 16
    # synchronous steps ring-allreduce the gradient, whatever the period
    assert averaging_bytes(1e6, 4, period=16, steps=400, sync_steps=400, gradient_bytes=1e6) == every


@pytest.mark.slow
def test_with_h_1_and_plain_sgd_it_equals_the_synchronous_step_of_the_whole_batch(background):
    results, folder = local_sgd(background, "h=1")
    single = train_in_process(config_for("single", batch_size=2 * B), steps=3)
    assert_weights_close(load_weights(folder / "weights.npz"), single)
    assert run_record(results)["strategy"]["family"] == "parameter-averaging"


@pytest.mark.slow
def test_its_synchronous_start_is_the_allreduce_step_with_any_optimizer(background):
    _, folder = local_sgd(background, "synchronous start")
    single = train_in_process(config_for("single", batch_size=2 * B, optimizer="momentum"), steps=3)
    assert_weights_close(load_weights(folder / "weights.npz"), single)


@pytest.mark.slow
def test_local_steps_drift_apart_and_the_average_brings_the_ranks_to_one_model(background):
    results, folder = local_sgd(background, "drift")
    assert_ranks_hold_the_same_weights(folder)  # step 8 averaged
    # it is not the synchronous run: the ranks took local steps in between
    synchronous = train_in_process(config_for("single", batch_size=2 * B, optimizer="momentum"), steps=8)
    averaged = load_weights(folder / "weights.npz")
    assert max(np.abs(a - s).max() for a, s in zip(averaged, synchronous, strict=True)) > 1e-4
    record = run_record(results)
    assert record["strategy_info"]["averaged_variables"] == 8  # 4 weights, 4 momentum slots
    steps = pd.read_csv(folder / "steps.csv")
    assert sorted(steps["worker"].unique()) == [0, 1] and len(steps) == 16


@pytest.mark.slow
def test_over_parameter_servers_with_h_1_it_equals_the_synchronous_step(background):
    _, folder = local_sgd(background, "ps h=1")
    single = train_in_process(config_for("single", batch_size=2 * B), steps=3)
    assert_weights_close(load_weights(folder / "weights.npz"), single)


@pytest.mark.slow
def test_over_parameter_servers_and_over_allreduce_it_averages_alike(background):
    # H = 4 with momentum over 10 steps (averages at 4, 8 and the last): the model deltas pushed to
    # a ps and averaged there give the weights Horovod's allreduce of the weights gives
    (_, allreduce), (ps_results, ps) = local_sgd(background, "allreduce h=4"), local_sgd(background, "ps h=4")
    assert_weights_close(load_weights(ps / "weights.npz"), load_weights(allreduce / "weights.npz"))
    record = run_record(ps_results)
    assert record["strategy_info"]["averages"] == 3 and record["strategy"]["family"] == "parameter-averaging"
