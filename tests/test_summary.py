import math

import numpy as np
import pandas as pd
import pytest

from bench import metrics
from bench.run.process import summary


def steps_frame(durations, workers=1, examples=10):
    rows = []
    for w in range(workers):
        t = 0.0
        for i, d in enumerate(durations):
            rows.append({"worker": w, "local_step": i, "global_step": i + 1, "t_start_s": t,
                         "t_end_s": t + d, "examples": examples, "loss": 1.0})
            t += d
    return pd.DataFrame(rows)


def throughput(frame):
    return metrics.throughput(frame, metrics.applied_examples(frame))


def test_constant_rate_has_a_zero_width_interval():
    mean, half = throughput(steps_frame([0.01] * 100))
    assert math.isclose(mean, 1000.0, rel_tol=1e-6) and half < 1e-6


def test_two_workers_double_the_throughput():
    one = throughput(steps_frame([0.01] * 100))[0]
    two = throughput(steps_frame([0.01] * 100, workers=2))[0]
    assert math.isclose(two, 2 * one, rel_tol=1e-6)


def test_interval_reflects_step_time_variation_not_binning():
    # cnn single on main: 100 steps of 24.5-28.2 ms gave "± 0" because every equal time window
    # held the same whole number of steps; the batch-means interval must see the spread
    rng = np.random.default_rng(1)
    durations = rng.uniform(0.0245, 0.0282, 100)
    mean, half = throughput(steps_frame(list(durations)))
    rate = 10 / durations.mean()
    # delta method: sd of the rate estimate = rate * sd(d) / (mean(d) sqrt(n))
    expected = 1.96 * rate * durations.std(ddof=1) / (durations.mean() * math.sqrt(len(durations)))
    assert math.isclose(mean, rate, rel_tol=1e-9)
    assert 0.4 * expected < half < 2.5 * expected


def test_interval_covers_the_true_rate_about_95_percent_of_the_time():
    # step times with a known distribution (mean 10 ms, sd 3 ms): the true rate is 10 / 0.010
    true_rate, covered, trials = 10 / 0.010, 0, 300
    for seed in range(trials):
        durations = np.random.default_rng(seed).normal(0.010, 0.003, 200).clip(0.001)
        mean, half = throughput(steps_frame(list(durations)))
        covered += abs(mean - true_rate) <= half
    assert 0.88 <= covered / trials <= 0.99


def test_dropped_gradients_do_not_count_as_throughput():
    frame = steps_frame([0.01] * 100, workers=3)
    frame["applied"] = np.where(frame["worker"] == 2, 0, 1)  # backup worker: its gradients are dropped
    applied = throughput(frame)[0]
    computed = metrics.throughput(frame, frame["examples"].to_numpy(dtype=float))[0]
    assert math.isclose(applied, 2000.0, rel_tol=1e-6) and math.isclose(computed, 3000.0, rel_tol=1e-6)


def test_time_to_target_is_measured_from_the_first_training_step(tmp_path):
    frame = steps_frame([0.01] * 50)
    frame["t_start_s"] += 8.0  # 8 s of start-up before the first step
    frame["t_end_s"] += 8.0
    frame.to_csv(tmp_path / "steps.csv", index=False)
    pd.DataFrame({"global_step": [20, 40], "wall_s": [8.2, 8.4], "split": "val", "loss": [1.0, 0.5],
                  "accuracy": [0.5, 0.95]}).to_csv(tmp_path / "evals.csv", index=False)
    out = summary.summarize(tmp_path, warmup_steps=5, target_accuracy=0.9)
    assert math.isclose(out["startup_s"], 8.0) and math.isclose(out["time_to_target_s"], 0.4)
    assert out["steps_to_target"] == 40 and out["warmup_steps"] == 5


def test_warmup_rows_are_left_out():
    frame = steps_frame([1.0] * 5 + [0.01] * 100)
    assert len(metrics.measured_steps(frame, 5)) == 100


def test_percentiles_and_ci_of_known_samples():
    frame = steps_frame(list(np.linspace(0.01, 0.02, 101)))
    p = metrics.step_time_percentiles(frame)
    assert math.isclose(p["step_time_p50_s"], 0.015) and p["step_time_p99_s"] > p["step_time_p90_s"]
    mean, half = metrics.mean_and_ci95(np.array([1.0, 2.0, 3.0]))
    assert mean == 2.0 and math.isclose(half, 4.302652729911275 * 1.0 / math.sqrt(3), rel_tol=1e-9)


def test_the_t_quantile_is_scipys_at_every_dof_an_interval_uses():
    from scipy.special import stdtrit

    for dof in [*range(1, 120), 500, 2000]:
        assert math.isclose(metrics.t975(dof), float(stdtrit(dof, 0.975)), rel_tol=1e-12), dof
    with pytest.raises(ValueError):
        metrics.t975(0)


def test_time_to_accuracy_and_scaling_efficiency():
    evals = pd.DataFrame({"global_step": [10, 20, 30], "wall_s": [1.0, 2.0, 3.0],
                          "accuracy": [0.5, 0.91, 0.95]})
    assert metrics.time_to_accuracy(evals, 0.9) == (2.0, 20.0)
    assert all(math.isnan(v) for v in metrics.time_to_accuracy(evals, 0.99))
    assert metrics.scaling_efficiency(300.0, 4, 100.0) == 0.75


def test_a_resumed_run_leaves_out_the_time_between_attempts_and_warms_up_again():
    first = steps_frame([0.01] * 70)  # killed after 70 steps; resumed from step 50, 100 s later
    second = steps_frame([0.02] * 50).assign(local_step=lambda f: f["local_step"] + 50,
                                              t_start_s=lambda f: f["t_start_s"] + 100.7,
                                              t_end_s=lambda f: f["t_end_s"] + 100.7)
    steps = pd.concat([first, second], ignore_index=True)
    restarts = [100.0]
    measured = metrics.measured_steps(steps, 10, restarts)
    assert list(measured["local_step"]) == [*range(10, 70), *range(60, 100)]  # each attempt warms up
    mean, _ = metrics.throughput(measured, metrics.applied_examples(measured), restarts)
    assert math.isclose(mean, 100 * 10 / (60 * 0.01 + 40 * 0.02), rel_tol=1e-6)
    across_the_gap, _ = throughput(metrics.measured_steps(steps, 10))
    assert across_the_gap < mean / 50  # what it would say counting the downtime


@pytest.mark.parametrize("value, shown", [(13191, "13,200"), (775, "775"), (2.08, "2.08"), (2.0849, "2.08"),
                                          (0.012345, "0.0123"), (999.6, "1,000"), (99.96, "100"), (0.0, "0")])
def test_a_figure_is_shown_to_three_significant_digits(value, shown):
    # a Keras ResNet-50 on an AVX2 CPU printed "2 ± 1 examples/s" for 2.08 before
    from bench.metrics import significant

    assert significant(value) == shown


def test_the_one_line_result_keeps_a_slow_runs_digits():
    from bench.run.process.lifecycle import one_line

    record = {"run_id": "r", "status": "ok",
              "summary": {"throughput_examples_per_s": 2.0849, "throughput_ci95_examples_per_s": 0.512}}
    assert one_line(record) == "r: ok, 2.08 ± 0.512 examples/s (95% CI)"
