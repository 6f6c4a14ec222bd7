"""ps-coordinator: TensorFlow 2's ParameterServerStrategy with a ClusterCoordinator, as real ps,
worker and coordinator processes. One worker's scheduled steps are single's steps; with two, both
workers run functions, every update lands on the ps tasks, and the steps are recorded as the
workers' that ran them, with the coordinator's dispatch in their split."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.cli import main
from tests.background import run_to_end
from tests.conftest import ROOT, only_run
from tests.equivalence import assert_weights_close, config_for, load_weights, train_in_process
from tests.processes import bench, leftover_processes, run_record
from tests.time_split import assert_time_split

pytestmark = pytest.mark.slow
B = 16
WIDE_DEEP = str(ROOT / "examples" / "wide_deep.py") + ":build"
ONE_WORKER = {"mlp": ("mlp", "digits", "momentum"), "keras-wide-deep": (WIDE_DEEP, "synthetic", "sgd")}


def background_jobs(item) -> dict:
    # the one-worker runs, made in the background (tests/background.py): only their weights and
    # records are checked
    if item.originalname != "test_one_workers_scheduled_steps_are_singles_steps":
        return {}
    case = item.callspec.params["case"]
    model, data, optimizer = ONE_WORKER[case]
    return {("one worker", case): run_to_end(
        "--strategy", "ps-coordinator", "--workers", "1", "--ps", "1", "--model", model, "--data", data,
        "--batch-size", str(B), "--steps", "6", "--steps-per-function", "4", "--warmup-steps", "0",
        "--no-shuffle", "--optimizer", optimizer, "--lr", "0.1", "--save-weights")}


@pytest.mark.parametrize("case", ONE_WORKER)
def test_one_workers_scheduled_steps_are_singles_steps(background, case):
    # a run takes whole functions: 6 steps in functions of 4 are 8 steps, as single's 8
    results = background.result(("one worker", case))
    model, data, optimizer = ONE_WORKER[case]
    single = train_in_process(config_for("single", model=model, data=data, batch_size=B, optimizer=optimizer),
                              steps=8)
    assert_weights_close(load_weights(only_run(results) / "weights.npz"), single)
    record = run_record(results)
    assert record["summary"]["global_steps"] == 8
    assert set(record["strategy_info"]["variable_devices"]) == {"/job:ps/replica:0/task:0/device:CPU:0"}


def test_two_workers_share_the_functions_and_each_step_is_recorded_as_its_workers(results):
    done = bench("--strategy", "ps-coordinator", "--workers", "2", "--ps", "2", "--steps", "480", "--eval-every",
                 "240", "--steps-per-function", "8", "--warmup-steps", "16", "--output", str(results))
    assert done.returncode == 0, done.stderr[-3000:]
    folder, record = only_run(results), run_record(results)
    assert record["status"] == "ok" and record["strategy"]["launch"] == "tf-cluster"
    assert record["summary"]["best_accuracy"] >= 0.90
    steps = pd.read_csv(folder / "steps.csv")
    assert sorted(steps["worker"].unique()) == [0, 1]
    assert len(steps) == 480 // 8 and (steps["examples"] == 8 * 64).all()  # a row is a function of 8 steps
    # every update has a global step of its own, and a function's last is its row's
    assert sorted(steps["global_step"]) == sorted(set(steps["global_step"])) and steps["global_step"].max() == 480
    for _, rows in steps.groupby("worker"):  # a worker's rows tile its time, in steps of 8
        assert list(rows["local_step"]) == list(range(0, 8 * len(rows), 8))
        assert (rows["t_start_s"].iloc[1:].to_numpy() == rows["t_end_s"].iloc[:-1].to_numpy()).all()
    assert steps["staleness_steps"].notna().all() and steps["staleness_steps"].max() > 0  # asynchronous
    parts = assert_time_split(folder)
    assert (parts["waiting_s"] > 0).all()  # the dispatch before each function's first stamp
    assert len(set(record["strategy_info"]["variable_devices"])) == 2  # both ps tasks hold variables
    assert json.loads((folder / "run.json").read_text())["cluster"]["chief"]
    assert not leftover_processes(str(results))


def test_a_straggler_which_acts_in_a_workers_own_loop_is_refused(capsys, results):
    assert main(["--strategy", "ps-coordinator", "--workers", "2", "--straggler", "1:3", "--output", str(results)]) == 2
    assert "--straggler acts in a worker's own step loop" in capsys.readouterr().err


def test_a_killed_worker_is_tensorflows_rescheduling_case_and_its_restart_rejoins(results):
    # 4,000 steps last ~16 s here, the restarted worker's start-up (a Python process importing
    # TensorFlow, a server) ~6 s: a busy machine slows both alike, so the run outlives the restart
    done = bench("--strategy", "ps-coordinator", "--workers", "2", "--ps", "1", "--model", "mlp", "--data", "digits",
                 "--steps", "4000", "--eval-every", "0", "--kill-worker", "1@80", "--recover", "--output", str(results))
    assert done.returncode == 0, done.stderr[-3000:]
    folder, record = only_run(results), run_record(results)
    assert "killing worker 1 (--kill-worker)" in done.stderr
    [restart] = record["summary"]["recoveries"]
    assert restart["how"] == "worker restarted" and restart["what"] == "worker 1 was killed by SIGKILL"
    steps = pd.read_csv(folder / "steps.csv")
    worker_1 = steps[steps["worker"] == 1]
    # it died at the end of the function that took it to its step 80, then served again after its restart
    assert (worker_1["t_end_s"] < restart["at_s"]).any() and (worker_1["t_start_s"] > restart["at_s"]).any()
    assert restart["downtime_s"] > 0 and restart["time_lost_s"] is not None
    # the coordinator went on with worker 0 meanwhile, and ran the lost worker's functions there
    between = steps[(steps["t_start_s"] > restart["at_s"]) & (steps["t_end_s"] < restart["at_s"]
                                                                + restart["downtime_s"])]
    assert (between["worker"] == 0).sum() > 0
    assert record["summary"]["global_steps"] >= 4000 and record["lost_workers"] == []
    info = record["strategy_info"]
    assert info["steps_run_again"] == record["summary"]["global_steps"] - 4000 >= 0
    assert not leftover_processes(str(results))


def test_a_killed_ps_fails_the_run_within_seconds_with_its_reason_and_nothing_left(results):
    done = bench("--strategy", "ps-coordinator", "--workers", "2", "--ps", "1", "--model", "mlp", "--data", "digits",
                 "--steps", "3000", "--eval-every", "0", "--kill-ps", "0@200", "--output", str(results))
    assert done.returncode == 1
    record = run_record(results)
    assert record["status"] == "failed: ps 0 was killed by SIGKILL while workers were still training"
    # ended as soon as it was seen (the supervisor's CAUSE_GRACE_S of 1 s to name the cause, then SIGTERM);
    # 10 s only fails a run left to its stall limit
    assert record["ended_after_failure_s"] < 10
    assert not leftover_processes(str(results))


def test_a_short_run_gets_shorter_functions_so_each_worker_has_rows_to_measure():
    from bench.config import RunConfig
    from strategies.ps_coordinator import steps_per_function

    def k(steps: int, workers: int, asked: int | None = None) -> int:
        return steps_per_function(RunConfig(strategy="ps-coordinator", steps=steps, workers=workers,
                                            options={"steps_per_function": asked}))

    assert k(1600, 2) == 8 and k(60, 2) == 3 and k(60, 4) == 1 and k(5, 4) == 1  # 8 functions a worker
    assert k(60, 4, asked=16) == 16  # asked for, as asked
