"""Prediction intervals at a stated level (bench.analysis.projection.levels): the formula, how often
they hold a new draw, and how terms combine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.analysis.projection import levels
from tests.processes import bench

NO_TENSORFLOW = True  # conftest: these tests read files and run commands; TensorFlow is not imported for them


def test_a_constant_from_three_repetitions_holds_a_new_one_at_its_level_where_min_max_holds_half():
    rng = np.random.default_rng(7)
    trials, inside, in_range = 4000, 0, 0
    for _ in range(trials):
        draws = np.exp(rng.normal(0.0, 0.2, 4))  # three repetitions and the new measurement
        low, high = levels.prediction_interval(list(draws[:3]), 0.9)
        inside += low <= draws[3] <= high
        in_range += draws[:3].min() <= draws[3] <= draws[:3].max()
    assert inside / trials == pytest.approx(0.9, abs=0.02)
    assert in_range / trials == pytest.approx(0.5, abs=0.03)  # (n - 1) / (n + 1)


def test_the_prediction_interval_is_mean_plus_minus_t_s_sqrt_one_plus_one_over_n_on_the_log_scale():
    samples = [1.0, 2.0, 4.0]  # logs 0, ln 2, 2 ln 2: mean ln 2, s ln 2
    low, high = levels.prediction_interval(samples, 0.95)
    half = 4.302653 * math.log(2) * math.sqrt(1 + 1 / 3)  # t(2, 0.975)
    assert (low, high) == pytest.approx((2 * math.exp(-half), 2 * math.exp(half)))


def test_terms_combine_as_a_root_sum_of_squares_with_welch_satterthwaites_degrees_of_freedom():
    a, b = levels.Term("a", 0.03, 4), levels.Term("b", 0.04, levels.INFINITE)
    u, dof = levels.combined([a, b])
    assert u == pytest.approx(0.05)
    assert dof == pytest.approx(0.05**4 / (0.03**4 / 4))
    assert levels.half_width([a, b], 0.9) == pytest.approx(0.05 * levels.t_quantile(0.95, dof))
    assert levels.half_width([b], 0.9) == pytest.approx(0.04 * 1.644854)  # normal where nothing is sampled
    assert levels.bounds(100.0, [], 0.9) == (100.0, 100.0)
    with pytest.raises(ValueError):
        levels.half_width([a], 1.0)


def test_a_range_is_uniform_on_the_log_scale():
    term = levels.range_term("r", 1.0, math.e)
    assert term.u == pytest.approx(1 / (2 * math.sqrt(3))) and math.isinf(term.dof)
    assert levels.range_term("r", 2.0, 2.0).u == 0


def test_the_model_error_is_what_the_residuals_hold_beyond_the_other_terms_and_never_its_own():
    assert levels.model_error([0.3, -0.3], [0.1, 0.1]).u == pytest.approx(math.sqrt(0.09 - 0.01))
    assert levels.model_error([0.01, -0.01], [0.2, 0.2]).u == 0  # explained already
    assert levels.model_error([0.2, -0.1, 0.4], [0, 0, 0]).dof == 3
    out = levels.left_out([1.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert out[0].u == 0 and out[1].u == pytest.approx(math.sqrt(0.5))  # the first never sees itself


def test_the_level_is_the_users_and_narrows_or_widens_every_interval(tmp_path):
    argv = ["project", "--model", "inception3", "--device-examples-per-s", "134.4", "--batch-size", "64",
            "--devices-per-host", "4", "--link-gbit", "25", "--workers", "16", "--profile", "tf1-2017", "--json"]
    import json

    wide, narrow = (json.loads(bench(*argv, "--level", level).stdout) for level in ("0.95", "0.5"))
    for w, n in zip(wide["projection"], narrow["projection"], strict=True):
        assert (w["level"], n["level"]) == (0.95, 0.5)
        assert w["throughput_examples_per_s"] == pytest.approx(n["throughput_examples_per_s"])
        # the upper bound no higher than linear scaling of one device: where that binds, both stop there
        assert w["throughput_low"] < n["throughput_low"] and n["throughput_high"] <= w["throughput_high"] <= 16 * 134.4
    assert wide["published"]["summary"]["level"] == 0.95
    refused = bench(*argv, "--level", "1.5")
    assert refused.returncode == 2 and "--level" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_a_figures_repeats_never_calibrate_one_another_and_unscored_ones_calibrate_nothing():
    residuals, explained = [0.1, 0.12, -0.3, 0.5], [0.0] * 4
    terms = levels.left_out(residuals, explained, figures=["a", "a", "b", "c"], scored=[True, True, True, False])
    # the first two are one figure measured twice: each is calibrated on b alone (c is not scored)
    assert terms[0].u == terms[1].u == pytest.approx(0.3)
    assert terms[2].u == pytest.approx(math.sqrt((0.1**2 + 0.12**2) / 2))
    assert terms[3].u == pytest.approx(math.sqrt((0.1**2 + 0.12**2 + 0.3**2) / 3))
    assert levels.left_out(residuals, explained)[0].u == pytest.approx(math.sqrt((0.12**2 + 0.3**2 + 0.5**2) / 3))


def test_the_rigs_repeat_error_is_each_measurement_against_its_figures_other_repeats():
    errors = levels.repeat_errors([100.0, 110.0, 90.0, 50.0], ["a", "a", "a", "b"])
    assert errors[:3] == [pytest.approx(0.0), pytest.approx(95 / 110 - 1), pytest.approx(105 / 90 - 1)]
    assert errors[3] is None  # measured once
