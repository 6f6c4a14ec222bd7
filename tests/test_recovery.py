"""--recover: a dead ps worker rejoins its running job; anything else restarts the whole job
from its latest checkpoint; each recovery is recorded with what it cost."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.cli import main
from bench.metrics import recovery_costs
from bench.run.launch.recovery import JOB_RESTARTED, WORKER_RESTARTED
from tests.checkpoint_values import assert_same_weights, assert_saved_the_chief_s_state
from tests.conftest import only_run
from tests.processes import bench
from tests.reference_runs import COMMON, SAVE_EVERY, uninterrupted_run

TWO = ["--workers", "2"]
COMPARED_WITH = {  # the test and the uninterrupted run it compares with (tests/reference_runs.py)
    "test_a_ps_sync_worker_restarted_into_the_run_ends_it_with_the_uninterrupted_weights": "ps-sync",
    "test_a_killed_allreduce_rank_restarts_the_job_from_its_checkpoint": "allreduce",
    "test_a_killed_ps_restarts_the_job_and_the_chief_restores_the_parameters": "ps-sync",
}


def background_jobs(item) -> dict:
    strategy = COMPARED_WITH.get(item.originalname)
    return uninterrupted_run(strategy, TWO) if strategy else {}


def recovered(results, strategy: str, *args: str) -> tuple[dict, pd.DataFrame]:
    out = bench("--strategy", strategy, *COMMON, *args, "--recover", "--output", str(results))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "recovering: " in out.stderr
    run_dir = only_run(results)
    return json.loads((run_dir / "run.json").read_text()), pd.read_csv(run_dir / "steps.csv")


@pytest.mark.slow
def test_a_ps_sync_worker_restarted_into_the_run_ends_it_with_the_uninterrupted_weights(results, uninterrupted):
    # R = N: the step the worker died in waits for its gradient; the new worker computes it from
    # the same batch (its input goes on at the global step), so nothing differs but the wait
    record, steps = recovered(results, "ps-sync", *TWO, "--kill-worker", "1@30")
    [rec] = record["summary"]["recoveries"]
    assert (rec["how"], rec["worker"], rec["what"]) == (WORKER_RESTARTED, 1, "worker 1 was killed by SIGKILL")
    assert rec["restart_step"] == rec["step_at_failure"] == 30 and rec["steps_lost"] == 0
    assert 0 < rec["downtime_s"] <= rec["time_lost_s"] + 0.5  # the others waited for it
    again = steps[(steps["worker"] == 1) & (steps["t_start_s"] > rec["at_s"])]
    assert again["local_step"].min() == 30 and again["global_step"].min() == 31
    assert "resumed_at" not in record and record["summary"]["attempts"] == 1  # the job itself went on
    assert_same_weights(only_run(results), uninterrupted("ps-sync", TWO))


@pytest.mark.slow
def test_a_ps_async_worker_rejoins_while_the_other_goes_on(results):
    record, steps = recovered(results, "ps-async", *TWO, "--optimizer", "sgd", "--steps", "400",
                              "--kill-worker", "1@10")
    [rec] = record["summary"]["recoveries"]
    assert (rec["how"], rec["worker"], rec["steps_lost"]) == (WORKER_RESTARTED, 1, 0)
    assert record["lost_workers"] == [] and rec["downtime_s"] > 0
    before = steps[steps["t_start_s"] < rec["at_s"]]
    assert before[before["worker"] == 1]["local_step"].max() == 9
    again = steps[(steps["worker"] == 1) & (steps["t_start_s"] > rec["at_s"])]
    assert len(again) and again["local_step"].min() == rec["restart_step"] // 2  # an asynchronous count
    assert (before["worker"] == 0).sum() + (steps[steps["t_start_s"] > rec["at_s"]]["worker"] == 0).sum() \
        == (steps["worker"] == 0).sum()  # the chief never stopped


@pytest.mark.slow
def test_a_killed_allreduce_rank_restarts_the_job_from_its_checkpoint(results, uninterrupted):
    record, steps = recovered(results, "allreduce", *TWO, "--kill-worker", "1@70")
    [rec] = record["summary"]["recoveries"]
    assert (rec["how"], rec["what"], rec["restart_step"]) == (JOB_RESTARTED, "rank 1 was killed by SIGKILL",
                                                             SAVE_EVERY)
    assert rec["step_at_failure"] >= 70 and rec["steps_lost"] == rec["step_at_failure"] - SAVE_EVERY
    assert rec["time_lost_s"] >= rec["downtime_s"] > 0
    [attempt] = record["resumed_at"]
    assert attempt["global_step"] == SAVE_EVERY and attempt["at_s"] > rec["at_s"]
    straight = uninterrupted("allreduce", TWO)
    assert_saved_the_chief_s_state(straight)
    assert_same_weights(only_run(results), straight)


@pytest.mark.slow
def test_a_killed_ps_restarts_the_job_and_the_chief_restores_the_parameters(results, uninterrupted):
    record, _ = recovered(results, "ps-sync", *TWO, "--kill-ps", "0@55")
    [rec] = record["summary"]["recoveries"]
    assert rec["how"] == JOB_RESTARTED and rec["what"].startswith("ps 0 was killed by SIGKILL")
    # the workers held at step 55 until the launcher's kill: no step after it, however fast the model
    assert rec["restart_step"] == SAVE_EVERY and rec["step_at_failure"] == 55
    straight = uninterrupted("ps-sync", TWO)
    assert_saved_the_chief_s_state(straight)
    assert_same_weights(only_run(results), straight)


@pytest.mark.parametrize("args, says", [
    (["--strategy", "allreduce", "--workers", "2", "--recover"], "--recover needs --checkpoint-every-steps"),
    (["--strategy", "single", "--recover", "--checkpoint-every-steps", "5"], "runs in this one process"),
    (["--strategy", "ps-async", "--kill-ps", "1@5"], "ps task 1 is not a process"),
    (["--strategy", "allreduce", "--workers", "2", "--kill-ps", "0@5"], "ps task 0 is not a process"),
    (["--strategy", "ps-async", "--kill-ps", "first"], "--kill-ps: expected P@S"),
    (["--strategy", "ps-sync", "--steps", "50", "--kill-ps", "0@50"], "global step 50 is not inside the run"),
])
def test_recovery_flags_that_cannot_work_are_refused(results, capsys, args, says):
    assert main([*args, "--output", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert list(results.iterdir()) == []


def test_the_cost_of_a_recovery_is_read_from_the_step_rows():
    rows = [(0, 1, 0.0, 1.0), (0, 2, 1.0, 2.0), (0, 3, 2.0, 3.0),   # failure seen at 3.5, step 3 reached
            (0, 2, 9.0, 10.0), (1, 2, 9.0, 10.5), (0, 3, 10.0, 11.0), (0, 4, 11.0, 12.0)]
    steps = pd.DataFrame(rows, columns=["worker", "global_step", "t_start_s", "t_end_s"])
    job = {"at_s": 3.5, "worker": None, "step_at_failure": 3, "restart_step": 1}
    [cost] = recovery_costs(steps, [job])
    assert (cost["downtime_s"], cost["steps_lost"], cost["time_lost_s"]) == (6.5, 2, 8.5)
    [alone] = recovery_costs(steps, [{**job, "worker": 1, "restart_step": 3}])
    assert (alone["downtime_s"], alone["steps_lost"]) == (7.0, 0)
    [never] = recovery_costs(steps, [{**job, "at_s": 20.0}])
    assert never["downtime_s"] is None and never["time_lost_s"] is None
