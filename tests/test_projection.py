"""The projection's cost terms against hand-computed values, and its calibration
recovering known latency and bandwidth from synthetic timings."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.analysis.projection import costs
from bench.analysis.projection.fit import fit_link, fit_transports, step_spread
from bench.metrics import ALLREDUCE_OP, PS_ROUNDTRIP_OP, messages

LINK = costs.Link(alpha_s=1e-5, bandwidth_bytes_per_s=1e8)
S = 1e6


def test_ring_allreduce_by_hand():
    # 2(n-1) alpha + 2(n-1)/n S/B = 6e-5 + 1.5 x 0.01
    assert costs.ring_allreduce_s(4, S, LINK) == pytest.approx(6e-5 + 0.015)
    assert costs.ring_allreduce_s(1, S, LINK) == 0.0


def test_ps_phases_by_hand():
    # 4 workers on 2 ps tasks: the ps end moves 4 S / 2 = 2 MB, busier than a worker's 1 MB
    assert costs.ps_phase_s(4, 2, S, LINK) == pytest.approx(1e-5 + 0.02)
    assert costs.ps_sync_exchange_s(4, 2, S, LINK) == pytest.approx(2 * (1e-5 + 0.02))
    # as many ps tasks as workers: the worker's own S binds
    assert costs.ps_phase_s(4, 4, S, LINK) == pytest.approx(1e-5 + 0.01)


def test_a_table_is_allgathered_row_by_row_until_the_dense_ring_is_cheaper():
    from bench.analysis.projection.calibrate import ModelCalibration
    from bench.analysis.projection.model import PS_SYNC, RING, RING_DENSE, predict, schemes_for
    from bench.metrics import Gradient

    # the default embedding: 9 KB dense, a 32 MB table, 765 rows of 128 bytes touched per worker step
    table = Gradient(dense_bytes=8968, table_bytes=2**25, rows_touched=765, row_bytes=128)
    model = ModelCalibration("embedding", table, 64, 0.01, 0.0, "test")
    assert schemes_for(model)[-1] == RING_DENSE

    def exchange_s(scheme: str, workers: int) -> float:
        return predict(scheme, model, workers, 1, 1e8, 1e-5).communication_s

    assert costs.allgather_s(4, 1000, LINK) == pytest.approx(3 * (1e-5 + 1e-5))
    assert exchange_s(RING, 4) < exchange_s(RING_DENSE, 4) / 100
    # the allgather grows with n, the dense ring does not: past 2 T / u(r+i) ranks the table goes whole
    crossover = 2 * 2**25 / (765 * 132)
    assert exchange_s(RING, int(crossover * 0.8)) < exchange_s(RING_DENSE, int(crossover * 0.8))
    assert exchange_s(RING, int(crossover * 1.2)) > exchange_s(RING_DENSE, int(crossover * 1.2))
    # a ps moves the touched rows only: at 4 workers and 1 ps it is far from the dense ring's cost
    assert exchange_s(PS_SYNC, 4) < exchange_s(RING_DENSE, 4) / 10


def test_ps_async_is_capped_by_the_workers_or_the_ps_links():
    # a ps link carries B / S = 100 pushes/s one way while it carries as many pulls the other way
    one = costs.ps_async_updates_per_s(1, 1, S, LINK, worker_step_s=0.1)
    assert one == pytest.approx(10.0)  # alone: its own step
    assert 35.0 < costs.ps_async_updates_per_s(4, 1, S, LINK, worker_step_s=0.1) < 40.0  # a little queueing
    assert costs.ps_async_updates_per_s(256, 1, S, LINK, worker_step_s=0.1) == pytest.approx(100.0, rel=0.01)
    assert costs.ps_async_updates_per_s(512, 2, S, LINK, worker_step_s=0.1) == pytest.approx(200.0, rel=0.01)
    # nothing but the links (a worker's step is its push and pull): 2 workers, 2 stations of 10 ms each
    # (mean value analysis by hand: n=1: X 50, queues 0.5 each; n=2: residence 15 ms each, X = 2 / 30 ms)
    assert costs.ps_async_updates_per_s(2, 1, S, LINK, worker_step_s=0.02) == pytest.approx(2 / 0.03)


def test_the_slowest_of_n_matches_sampling():
    rng = np.random.default_rng(0)
    for n in (2, 8, 64):
        sampled = rng.normal(1.0, 0.1, size=(200_000, n)).max(axis=1).mean()
        assert costs.synchronous_compute_s(n, 1.0, 0.1) == pytest.approx(sampled, rel=0.01)
    # one backup worker of 8: the 7th fastest
    sampled = np.sort(rng.normal(1.0, 0.1, size=(200_000, 8)), axis=1)[:, 6].mean()
    assert costs.synchronous_compute_s(8, 1.0, 0.1, backups=1) == pytest.approx(sampled, rel=0.01)
    assert costs.synchronous_compute_s(1, 1.0, 0.1) == 1.0


def test_overlap_hides_communication_up_to_the_compute():
    assert costs.step_s(0.1, 0.05) == pytest.approx(0.15)
    assert costs.step_s(0.1, 0.05, overlap=1.0) == pytest.approx(0.1)
    assert costs.step_s(0.01, 0.05, overlap=1.0) == pytest.approx(0.05)


def test_the_byteps_crossover_is_where_a_ps_phase_beats_the_ring():
    free = costs.Link(0.0, 1e9)
    for n in range(2, 65):
        k_star = costs.byteps_crossover_ps_tasks(n)
        for k in range(1, 2 * n):
            ps_wins = costs.ps_phase_s(n, k, S, free) < costs.ring_allreduce_s(n, S, free)
            assert ps_wins == (k > k_star + 1e-9), (n, k)
    assert costs.byteps_crossover_ps_tasks(4) == pytest.approx(16 / 6)


@pytest.mark.parametrize("kind,processes", [(ALLREDUCE_OP, 2), (ALLREDUCE_OP, 4), (PS_ROUNDTRIP_OP, 2)])
def test_the_fit_recovers_latency_and_bandwidth(kind, processes):
    rng = np.random.default_rng(1)
    alpha, bandwidth = 50e-6, 2e9
    sizes = np.array([4 * 1024 * 4**k for k in range(8)], dtype=float)
    from bench.metrics import bus_factor

    exact = messages(kind, processes) * alpha + bus_factor(kind, processes) * sizes / bandwidth
    link, error = fit_link(sizes, exact * rng.normal(1.0, 0.02, size=len(sizes)), kind, processes)
    assert link.alpha_s == pytest.approx(alpha, rel=0.1)
    assert link.bandwidth_bytes_per_s == pytest.approx(bandwidth, rel=0.05)
    assert error < 0.05


def test_a_fit_needs_two_sizes_and_never_gives_a_negative_latency():
    with pytest.raises(ValueError):
        fit_link([1e6, 1e6], [0.01, 0.011], ALLREDUCE_OP, 2)
    link, _ = fit_link([1e3, 1e6], [1e-7, 1e-3], ALLREDUCE_OP, 2)  # the line would cross below zero
    assert link.alpha_s == 0.0 and link.bandwidth_bytes_per_s > 0


def test_fit_transports_reads_a_micro_summary():
    sizes = [65536, 4 * 2**20]
    table = pd.DataFrame([{"transport": "mpi4py", "kind": ALLREDUCE_OP, "processes": 2, "bytes": b,
                           "median_s": 2 * 10e-6 + b / 1e9} for b in sizes]
                         + [{"transport": "copy-once", "kind": ALLREDUCE_OP, "processes": 2, "bytes": 8,
                             "median_s": 1e-6}])
    fitted = fit_transports(table)
    assert list(fitted["transport"]) == ["mpi4py"]  # one size cannot be fitted
    row = fitted.iloc[0]
    assert row["alpha_us"] == pytest.approx(10.0, rel=1e-6) and row["bandwidth_gb_per_s"] == pytest.approx(1.0)


def test_step_spread_pools_the_workers_own_variance():
    rows = [{"worker": w, "local_step": i, "t_start_s": 0.0, "t_end_s": base + (0.01 if i % 2 else -0.01)}
            for w, base in ((0, 0.1), (1, 0.3)) for i in range(12)]
    mean, sd = step_spread(pd.DataFrame(rows), warmup_steps=2)
    assert mean == pytest.approx(0.2)
    # each worker's own steps vary by +-0.01; the gap between workers is not noise
    assert sd == pytest.approx(0.01 * math.sqrt(10 / 9), rel=1e-6)


def test_the_cost_per_tensor_is_the_slope_over_tensors_of_the_same_bytes_per_message():
    from bench.analysis.micro_summary import tensor_costs

    # 64 KB round trips: 1 ms in one tensor, +0.2 ms per tensor more (0.1 ms per message: push and pull)
    rows = [{"transport": "ps-1ps", "kind": PS_ROUNDTRIP_OP, "processes": 2, "bytes": 65536, "tensors": t,
             "median_s": 1e-3 + (t - 1) * 2e-4} for t in (1, 16, 64)]
    sweep = [{"transport": "ps-1ps", "kind": PS_ROUNDTRIP_OP, "processes": 2, "bytes": 2**22, "tensors": 1,
              "median_s": 5e-3}]
    table = pd.DataFrame(rows + sweep)
    [cost] = tensor_costs(table).to_dict("records")
    assert cost["message_us"] == pytest.approx(100.0) and cost["tensors"] == [1, 16, 64]
    # the size fit sees only one tensor per task: 64 KB and 4 MB
    assert fit_transports(table).iloc[0]["sizes"] == 2
