import numpy as np
import pandas as pd
import pytest

from tests.background import run_to_end
from tests.equivalence import assert_weights_close, batches_of, config_for, load_weights, sgd_step_on, train_in_process
from tests.processes import bench, leftover_processes, run_record
from tests.time_split import assert_time_split

pytestmark = pytest.mark.slow
B = 16


def run_dir(results):
    return next(p for p in results.iterdir() if p.is_dir())


def background_jobs(item) -> dict:
    """The runs whose weights, placement and accuracy are checked, made in the background (tests/background.py)."""
    name = item.originalname
    if name == "test_ps_sync_step_equals_one_single_step_of_the_whole_batch":
        return {"ps-sync one step": run_to_end("--strategy", "ps-sync", "--workers", "2", "--ps", "1", "--batch-size",
                                               str(B), "--steps", "1", "--warmup-steps", "0", "--no-shuffle",
                                               "--lr", "0.1", "--save-weights")}
    if name == "test_a_ps_sync_worker_of_two_towers_steps_as_one_single_step_of_their_whole_batch":
        return {"ps-sync towers": run_to_end("--strategy", "ps-sync", "--workers", "1", "--ps", "1",
                                             "--gpus-per-worker", "2", "--batch-size", str(B), "--steps", "1",
                                             "--warmup-steps", "0", "--no-shuffle", "--lr", "0.1", "--save-weights")}
    if name == "test_two_ps_tasks_hold_what_the_placement_says":
        placement = item.callspec.params["placement"]
        return {("ps placement", placement): run_to_end("--strategy", "ps-async", "--workers", "1", "--ps", "2",
                                                        "--ps-placement", placement, "--steps", "5",
                                                        "--warmup-steps", "0")}
    if name == "test_large_variables_can_be_partitioned_over_ps_tasks":
        return {"ps partitioned": run_to_end("--strategy", "ps-sync", "--workers", "2", "--ps", "2",
                                             "--ps-partition-mb", "0.1", "--steps", "100")}
    return {}


def test_ps_sync_step_equals_one_single_step_of_the_whole_batch(background):
    results = background.result("ps-sync one step")
    with np.load(run_dir(results) / "weights.npz") as f:
        ps_weights = [f[f"arr_{i}"] for i in range(len(f.files))]
    single = train_in_process(config_for("single", batch_size=2 * B), steps=1)
    assert_weights_close(ps_weights, single)


def test_a_ps_sync_worker_of_two_towers_steps_as_one_single_step_of_their_whole_batch(background):
    # tf_cnn_benchmarks' worker of several GPUs: its towers' gradients averaged on the worker, then pushed; here its
    # towers are two logical CPU devices of the worker's server
    results = background.result("ps-sync towers")
    record = run_record(results)
    assert [t.rsplit("/", 1)[-1] for t in record["strategy_info"]["towers"]] == ["device:CPU:0", "device:CPU:1"]
    single = train_in_process(config_for("single", batch_size=2 * B), steps=1)
    assert_weights_close(load_weights(run_dir(results) / "weights.npz"), single)


def finished_run(results, *args):
    """Run bench with `args`, require success, return (run.json, steps.csv)."""
    done = bench(*args, "--output", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    return run_record(results), pd.read_csv(run_dir(results) / "steps.csv")


def test_ps_async_counts_every_step_and_records_staleness(results):
    record, steps = finished_run(results, "--strategy", "ps-async", "--workers", "2", "--steps", "150",
                                 "--eval-every", "50")
    # every worker step is one update of the global step
    assert steps["global_step"].max() == len(steps) >= 150
    assert sorted(steps["global_step"]) == list(range(1, len(steps) + 1))
    assert steps["staleness_steps"].notna().all() and (steps["staleness_steps"] > 0).any()
    assert record["status"] == "ok" and record["summary"]["best_accuracy"] >= 0.90
    assert not leftover_processes(str(results))
    parts = assert_time_split(run_dir(results))
    assert (parts["waiting_s"] == 0).all()  # nobody waits for anybody


def one_step_with_r(results, workers: int, replicas: int):
    """One global step of ps-sync, unshuffled, plain SGD; (saved weights, steps of global step 1)."""
    record, steps = finished_run(results, "--strategy", "ps-sync", "--workers", str(workers),
                                 "--replicas-to-aggregate", str(replicas), "--batch-size", str(B), "--steps", "1",
                                 "--warmup-steps", "0", "--no-shuffle", "--lr", "0.1", "--save-weights")
    assert record["status"] == "ok"
    return load_weights(run_dir(results) / "weights.npz"), steps[steps["global_step"] == 1]


def expected_update(picks: list[tuple[int, int]], workers: int) -> list[np.ndarray]:
    """One SGD step on exactly the batches `picks` ((worker, its batch number from 0)): the
    average of their gradients, which is what SyncReplicasOptimizer applies."""
    config = config_for("single", batch_size=B)
    return sgd_step_on(config, *batches_of(config, picks, workers))


def test_backup_workers_the_step_is_the_two_batches_marked_applied(results):
    weights, step = one_step_with_r(results, workers=3, replicas=2)
    applied = step[step["applied"] == 1]
    assert len(applied) == 2 and applied["worker"].is_unique
    # every worker's first gradient was computed for step 1; the third arrived stale
    assert sorted(step["worker"]) == [0, 1, 2] and (step["local_step"] == 0).all()
    assert_weights_close(weights, expected_update([(int(k), 0) for k in applied["worker"]], 3))
    dropped = int(step.loc[step["applied"] == 0, "worker"].iloc[0])
    kept = int(applied["worker"].iloc[0])
    with pytest.raises(AssertionError):  # a different pair is a different update
        assert_weights_close(weights, expected_update([(kept, 0), (dropped, 0)], 3))


def test_r_greater_than_n_the_step_takes_several_batches_of_a_worker(results):
    weights, step = one_step_with_r(results, workers=2, replicas=4)
    applied = step[step["applied"] == 1]
    assert len(applied) == 4
    per_worker = applied.groupby("worker").size()
    assert per_worker.sum() == 4 and per_worker.max() >= 2
    picks = [(int(r.worker), int(r.local_step)) for r in applied.itertuples()]
    assert_weights_close(weights, expected_update(picks, 2))


def test_ps_sync_backup_workers_count_the_dropped(results):
    record, steps = finished_run(results, "--strategy", "ps-sync", "--workers", "3", "--replicas-to-aggregate",
                                 "2", "--steps", "60")
    taken = steps[steps["global_step"] <= 60]
    assert len(taken.groupby("global_step")) == 60
    # the hand-in is under one lock: no two gradients share a place in the order of arrival
    assert steps["arrival_order"].is_unique
    dropped = int((steps["applied"] == 0).sum())
    assert dropped > 0 and record["records"]["gradients_dropped"] == dropped
    assert record["records"]["gradients_applied"] == 2 * 60
    # throughput counts the examples whose gradients reached the model, not the dropped ones
    summary = record["summary"]
    assert summary["examples_applied"] == 2 * 60 * record["config"]["batch_size"] < summary["examples"]
    assert summary["throughput_examples_per_s"] < summary["computed_throughput_examples_per_s"]
    # cross-check with the global step each gradient met on arrival: any that arrived after
    # its step had been taken must be among the dropped
    assert (steps.loc[steps["staleness_steps"] > 0, "applied"] == 0).all()


# a killed worker: ps-sync R = N fails fast (tests/test_run_endings.py), backup workers go on
# without it (the stragglers preset, tests/test_stragglers.py), and so does ps-async:


def test_ps_async_goes_on_without_a_killed_worker(results):
    record, _ = finished_run(results, "--strategy", "ps-async", "--workers", "2", "--model", "mlp", "--data",
                             "synthetic", "--steps", "80", "--kill-worker", "1@10")
    assert record["status"] == "ok" and record["lost_workers"] == ["worker 1"]
    assert record["summary"]["global_steps"] >= 80
    assert not leftover_processes(str(results))


def test_ps_sync_converges_on_digits(results):
    done = bench("--strategy", "ps-sync", "--workers", "2", "--steps", "100", "--eval-every", "50",
                 "--output", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    assert run_record(results)["summary"]["best_accuracy"] >= 0.90
    steps = pd.read_csv(run_dir(results) / "steps.csv")
    # R = N: every step took one gradient of each worker (each worker takes only its own token)
    assert (steps["global_step"] == steps["local_step"] + 1).all()
    parts = assert_time_split(run_dir(results))
    assert (parts["waiting_s"] > 0).mean() > 0.5  # a worker waits for its token (the others' gradients)


def simulate(placement: str, sizes: dict[str, int], tasks: int) -> dict[str, int]:
    loads, out = [0] * tasks, {}
    for i, (name, size) in enumerate(sizes.items()):
        task = i % tasks if placement == "round-robin" else loads.index(min(loads))
        out[name] = task
        loads[task] += size
    return out


@pytest.mark.parametrize("placement", ["round-robin", "balanced"])
def test_two_ps_tasks_hold_what_the_placement_says(background, placement):
    results = background.result(("ps placement", placement))
    info = run_record(results)["strategy_info"]
    sizes = {"global_step": 8, "hid_w": 784 * 100 * 4, "hid_b": 400, "sm_w": 4000, "sm_b": 40}
    assert info["variable_ps_task"] == simulate(placement, sizes, 2)
    expected = [sum(s for n, s in sizes.items() if info["variable_ps_task"][n] == t) for t in (0, 1)]
    assert info["bytes_per_ps"] == expected


def test_large_variables_can_be_partitioned_over_ps_tasks(background):
    results = background.result("ps partitioned")
    record = run_record(results)
    tasks = record["strategy_info"]["variable_ps_task"]
    assert {tasks["hid_w/part_0"], tasks["hid_w/part_1"]} == {0, 1}
    assert record["summary"]["best_accuracy"] >= 0.85
