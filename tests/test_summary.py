import math

import numpy as np
import pandas as pd

from bench import summary


def steps_frame(durations, workers=1, examples=10):
    rows = []
    for w in range(workers):
        t = 0.0
        for i, d in enumerate(durations):
            rows.append({"worker": w, "local_step": i, "global_step": i + 1, "t_start_s": t,
                         "t_end_s": t + d, "examples": examples, "loss": 1.0})
            t += d
    return pd.DataFrame(rows)


def test_constant_rate_has_a_zero_width_interval():
    frame = steps_frame([0.01] * 100)
    mean, half = summary.mean_and_ci95(summary.window_throughputs(frame))
    assert math.isclose(mean, 1000.0, rel_tol=1e-6) and half < 1e-6


def test_two_workers_double_the_throughput():
    one = summary.mean_and_ci95(summary.window_throughputs(steps_frame([0.01] * 100)))[0]
    two = summary.mean_and_ci95(summary.window_throughputs(steps_frame([0.01] * 100, workers=2)))[0]
    assert math.isclose(two, 2 * one, rel_tol=1e-6)


def test_warmup_rows_are_left_out():
    frame = steps_frame([1.0] * 5 + [0.01] * 100)
    assert len(summary.measured_steps(frame, 5)) == 100


def test_percentiles_and_ci_of_known_samples():
    frame = steps_frame(list(np.linspace(0.01, 0.02, 101)))
    p = summary.step_time_percentiles(frame)
    assert math.isclose(p["step_time_p50_s"], 0.015) and p["step_time_p99_s"] > p["step_time_p90_s"]
    mean, half = summary.mean_and_ci95(np.array([1.0, 2.0, 3.0]))
    assert mean == 2.0 and math.isclose(half, 4.302652729911275 * 1.0 / math.sqrt(3), rel_tol=1e-9)


def test_time_to_accuracy_and_scaling_efficiency():
    evals = pd.DataFrame({"global_step": [10, 20, 30], "wall_s": [1.0, 2.0, 3.0],
                          "accuracy": [0.5, 0.91, 0.95]})
    assert summary.time_to_accuracy(evals, 0.9) == (2.0, 20.0)
    assert all(math.isnan(v) for v in summary.time_to_accuracy(evals, 0.99))
    assert summary.scaling_efficiency(300.0, 4, 100.0) == 0.75
