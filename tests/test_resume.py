"""--resume: a run killed after a checkpoint goes on from it in its own folder and ends where an
uninterrupted run ends; bad folders are refused before anything is written."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.cli import main
from bench.config import RunConfig
from bench.run.contract import local_steps_at
from bench.run.process.checkpoints import CHECKPOINT_DIR
from strategies import registry
from tests.background import PATIENT, Run
from tests.checkpoint_values import assert_same_weights, assert_saved_the_chief_s_state
from tests.conftest import only_run
from tests.processes import bench
from tests.reference_runs import COMMON, SAVE_EVERY, STEPS, uninterrupted_run

KILL_AT = 70
# the strategies whose 100 steps are the same computation however they are cut (what differs is
# the order of float sums); local-sgd averages every 10 steps, so the checkpoint at 50 holds what
# every rank has; local-sgd-ps's other workers keep no slots in the chief's checkpoint: plain SGD
DETERMINISTIC = {
    "single": [],
    "multi-tower": ["--workers", "2"],
    "mirrored": ["--workers", "2"],
    "allreduce-tf": ["--workers", "2"],
    "local-sgd": ["--workers", "2", "--sync-period", "10", "--average-optimizer-state", "true"],
    "local-sgd-ps": ["--workers", "2", "--sync-period", "10", "--optimizer", "sgd"],
}
# restarted from their checkpoints by --recover in tests/test_recovery.py (the job restart takes
# the config --resume takes, bench.run.process.resume.resume_config) and compared there with the
# same uninterrupted runs; --resume's own path is the same for every strategy of a launch kind
# (TF cluster: allreduce-tf, local-sgd-ps; MPI ranks: local-sgd), so they are not run again here
RESTORED_BY_RECOVERY = ("allreduce", "ps-sync")


def test_every_strategy_that_saves_checkpoints_is_covered():
    # the others refuse --checkpoint-every-* before anything starts (bench.run.validation)
    covered = set(DETERMINISTIC) | {"ps-async"} | set(RESTORED_BY_RECOVERY)
    assert covered == {name for name, cls in registry.all_strategies().items() if cls.checkpoints}


def background_jobs(item) -> dict:
    """A deterministic strategy's killed and resumed run and its uninterrupted one: what they
    compute is checked, not how fast (tests/background.py)."""
    if item.originalname != "test_a_killed_run_resumed_ends_with_the_weights_of_an_uninterrupted_one":
        return {}
    strategy = item.callspec.params["strategy"]
    extra = DETERMINISTIC[strategy]

    def resumed(folder, run: Run):
        return killed_then_resumed(folder, strategy, [*extra, *PATIENT], run=run)
    return {**uninterrupted_run(strategy, extra), ("resumed", strategy): resumed}


def killed_then_resumed(results, strategy: str, extra: list[str], kill_at: int | None = None, run: Run = bench):
    """Run with a checkpoint at step 50 and the chief killed at about step 70 (or at its own
    step `kill_at`), then resume."""
    kill_at = kill_at or local_steps(strategy, workers(extra), KILL_AT)
    killed = run("--strategy", strategy, *COMMON, *extra, "--kill-worker", f"0@{kill_at}", "--output", str(results))
    assert killed.returncode != 0, killed.stderr[-2000:]
    run_dir = only_run(results)
    assert json.loads((run_dir / "run.json").read_text())["status"] != "ok"
    assert not (run_dir / "weights.npz").exists()
    resumed = run("--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return run_dir


def workers(extra: list[str]) -> int:
    return int(extra[extra.index("--workers") + 1]) if "--workers" in extra else 1


def local_steps(strategy: str, workers: int, global_step: int) -> int:
    return local_steps_at(registry.get(strategy), RunConfig(strategy=strategy, workers=workers), global_step)


def assert_attempts_recorded(run_dir) -> None:
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "ok"
    [attempt] = record["resumed_at"]
    saved = attempt["global_step"]  # an asynchronous chief saves at the first step it sees past 50
    assert saved == SAVE_EVERY or (record["strategy"]["asynchronous"] and SAVE_EVERY < saved < SAVE_EVERY + 5)
    assert attempt["checkpoint"] == f"{CHECKPOINT_DIR}/ckpt-{saved}"
    assert record["summary"]["attempts"] == 2 and record["summary"]["global_steps"] >= STEPS
    steps = pd.read_csv(run_dir / "steps.csv")
    after = steps[steps["t_start_s"] >= attempt["at_s"]]
    assert len(after) and len(steps) > len(after)  # appended to the first attempt's rows
    chief = after[after["worker"] == 0]
    assert chief["global_step"].min() == saved + 1 or record["strategy"]["asynchronous"]
    config = record["config"]
    assert chief["local_step"].min() == local_steps(config["strategy"], config["workers"], saved)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", list(DETERMINISTIC))
def test_a_killed_run_resumed_ends_with_the_weights_of_an_uninterrupted_one(strategy, uninterrupted, background):
    straight = uninterrupted(strategy, DETERMINISTIC[strategy])
    assert_saved_the_chief_s_state(straight)
    run_dir = background.result(("resumed", strategy))
    assert_attempts_recorded(run_dir)
    assert_same_weights(run_dir, straight)


@pytest.mark.slow
def test_an_asynchronous_run_resumed_goes_on_from_its_loss(tmp_path):
    # plain SGD: with momentum, stale gradients make its early losses too noisy to compare.
    # Asynchronous workers split the steps as the CPU falls: beside a busy process a starved
    # chief once did 9 steps while the other worker took the run to its 100th, and was never
    # killed. So the other worker sleeps 4 step-times after each step (leaving the CPU to the
    # chief) and the chief is killed at its own step 52: the global step is then at least 52,
    # past the save at 50 whatever the split, and the other worker would need 48 of its
    # 5x-long steps to end the run first.
    slowed = ["--workers", "2", "--optimizer", "sgd", "--straggler", "1:5"]
    run_dir = killed_then_resumed(tmp_path, "ps-async", slowed, kill_at=SAVE_EVERY + 2)
    assert_attempts_recorded(run_dir)
    steps = pd.read_csv(run_dir / "steps.csv").sort_values("t_start_s")
    [attempt] = json.loads((run_dir / "run.json").read_text())["resumed_at"]
    first = steps[steps["t_start_s"] < attempt["at_s"]]
    # the first attempt's other worker went on alone after the chief died: compare with its
    # losses around the checkpoint's step, not with its last ones
    near = first[(first["global_step"] - attempt["global_step"]).abs() <= 10]["loss"].mean()
    at_start = first["loss"].head(4).mean()
    resumed = steps[steps["t_start_s"] >= attempt["at_s"]]["loss"].head(10).mean()
    assert near < 0.7 * at_start  # it had learned something by the checkpoint ...
    assert abs(resumed - near) < abs(resumed - at_start)  # ... and goes on from there, not from scratch


@pytest.fixture()
def finished_run(results):
    assert main(["--strategy", "single", *COMMON, "--steps", "20", "--checkpoint-every-steps", "10",
                 "--output", str(results)]) == 0
    return only_run(results)


def refused(results, *args: str) -> str:
    before = {p: p.stat().st_mtime_ns for p in results.rglob("*")}
    out = bench(*args)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert {p: p.stat().st_mtime_ns for p in results.rglob("*")} == before  # nothing written
    return out.stderr


def test_a_finished_run_is_not_resumed(results, finished_run):
    assert "finished" in refused(results, "--resume", str(finished_run))


def test_a_folder_that_is_not_a_run_is_refused(results):
    (results / "empty").mkdir()
    assert "not a run folder" in refused(results, "--resume", str(results / "empty"))
    assert "not a run folder" in refused(results, "--resume", str(results / "nowhere"))


def test_a_run_of_another_strategy_or_model_is_refused(results, finished_run):
    record = json.loads((finished_run / "run.json").read_text())
    (finished_run / "run.json").write_text(json.dumps({**record, "status": "failed: killed"}))
    assert "a run of --strategy single, not mirrored" in refused(results, "--resume", str(finished_run),
                                                                 "--strategy", "mirrored")
    assert "a run of --model mlp, not cnn" in refused(results, "--resume", str(finished_run), "--model", "cnn")
    assert "drop --steps" in refused(results, "--resume", str(finished_run), "--steps", "50")


def test_a_run_without_a_checkpoint_is_refused(results, finished_run):
    record = json.loads((finished_run / "run.json").read_text())
    (finished_run / "run.json").write_text(json.dumps({**record, "status": "failed: killed"}))
    for path in (finished_run / CHECKPOINT_DIR).iterdir():
        path.unlink()
    assert "has no checkpoint" in refused(results, "--resume", str(finished_run))
