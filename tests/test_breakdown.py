"""The split of step time into compute, communication, waiting and other, on rows written here."""

import pandas as pd
import pytest

from bench.metrics import split_steps as split
from bench.run.process.breakdown import summarize, typical_worker


def rows(*steps):
    """(worker, local_step, t_start, t_end, compute, exchange, waiting, ready) per row."""
    columns = ["worker", "local_step", "t_start_s", "t_end_s", "compute_s", "exchange_s", "waiting_s", "ready_s"]
    return pd.DataFrame(steps, columns=columns)


def test_a_collective_waits_from_its_own_ready_to_the_last_workers():
    parts = split(rows(
        # step 0: worker 1 is ready 30 ms after worker 0; the exchange then takes 5 ms for both
        (0, 0, 0.000, 0.050, 0.010, 0.035, None, 0.010),
        (1, 0, 0.000, 0.052, 0.040, 0.005, None, 0.040),
        # step 1: ready together
        (0, 1, 0.060, 0.080, 0.010, 0.006, None, 0.070),
        (1, 1, 0.060, 0.081, 0.010, 0.006, None, 0.070),
    )).set_index(["worker", "local_step"])
    assert parts.loc[(0, 0), "waiting_s"] == pytest.approx(0.030)
    assert parts.loc[(0, 0), "communication_s"] == pytest.approx(0.005)
    assert parts.loc[(1, 0), "waiting_s"] == pytest.approx(0.0)
    assert parts.loc[(1, 0), "communication_s"] == pytest.approx(0.005)
    assert parts.loc[(0, 1), "waiting_s"] == 0 and parts.loc[(0, 1), "communication_s"] == pytest.approx(0.006)
    assert parts.loc[(0, 0), "other_s"] == pytest.approx(0.050 - 0.010 - 0.035)


def test_the_wait_told_from_clocks_never_exceeds_the_exchange_measured():
    # worker 1's clock is ahead: its ready looks later than worker 0's whole exchange
    parts = split(rows((0, 0, 0.0, 0.02, 0.010, 0.004, None, 0.010),
                       (1, 0, 0.0, 0.02, 0.010, 0.004, None, 0.019)))
    assert parts.loc[0, "waiting_s"] == pytest.approx(0.004) and parts.loc[0, "communication_s"] == 0


def test_waiting_the_worker_measured_itself_is_taken_as_it_is():
    # a ps-sync worker: 8 ms of its 12 ms exchange waiting for its token
    parts = split(rows((0, 0, 0.0, 0.025, 0.010, 0.012, 0.008, None)))
    assert parts.loc[0, "waiting_s"] == pytest.approx(0.008)
    assert parts.loc[0, "communication_s"] == pytest.approx(0.004)
    assert parts.loc[0, "other_s"] == pytest.approx(0.003)


def test_records_without_stamps_have_no_split():
    old = rows((0, 0, 0.0, 0.01, None, None, None, None))
    assert split(old).empty and summarize(split(old)) == {}


def test_the_summary_names_the_slowest_worker_and_by_how_much():
    steps = [(w, s, s * 0.1, s * 0.1 + 0.05, 0.03 if w == 2 else 0.01, 0.02, None, s * 0.1 + 0.01)
             for w in range(3) for s in range(5)]
    summary = summarize(split(rows(*steps)))
    assert summary["slowest_worker"] == 2
    assert summary["slowest_compute_ratio"] == pytest.approx(3.0)
    assert summary["per_worker"]["0"]["compute"]["p50_s"] == pytest.approx(0.01)
    assert typical_worker(summary)["compute_p50_s"] == pytest.approx((0.01 + 0.01 + 0.03) / 3)
