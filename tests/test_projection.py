"""The projection's terms against hand-computed values (an embedding table's rows, the wait
for the slowest worker, CPU workers), and the micro-benchmark fit recovering known latency
and bandwidth from synthetic timings."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from bench.analysis.projection import allreduce, costs, profile, schemes
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.fit import fit_link, fit_transports, step_spread
from bench.analysis.projection.parameter_servers import ROUND_ROBIN
from bench.analysis.projection.schemes import PS_ASYNC, PS_SYNC, RING, RING_DENSE, PsSetup
from bench.analysis.projection.transports import Transport
from bench.metrics import ALLREDUCE_OP, PS_ROUNDTRIP_OP, Gradient, messages, ps_worker_bytes, ring_factor
from bench.run.models.tensors import ModelTensors, Tensor

S = 1e6
# 0.8 Gbit/s: 1e8 bytes/s; one message 10 us; no Horovod cycle nor fusion (each tensor at once, alone)
WIRE = Transport("test", flow_share=1.0, process_bytes_per_s=None, host_copies=True, source="test", latency_s=1e-5)
# the default embedding: 9 KB dense, a 32 MB table, 765 rows of 128 bytes touched per worker step
TABLE = Gradient(dense_bytes=8968, table_bytes=2**25, rows_touched=765, row_bytes=128)
EMBEDDING = ModelTensors("embedding", (Tensor("embedding", 2**25, 1.0, table=True), Tensor("dense", 8968, 0.5)), 1e-3)


def cpu_workers(n: int, compute_s: float = 0.01, sd_s: float = 0.0) -> Cluster:
    return Cluster(n, 1, 0.8, 64 / compute_s, 64, 1e10, sd_s, on_host=True)


def step_of(scheme: str, tensors: ModelTensors, cluster: Cluster, ps: int = 1) -> StepTerms:
    return schemes.predict(scheme, WIRE, tensors, cluster, PsSetup(ps, False, ROUND_ROBIN))[1]


def test_a_tables_tensors_take_the_runs_bytes_as_bench_metrics_counts_them():
    shaped = EMBEDDING.sized(dataclasses.replace(TABLE, dense_bytes=2 * 8968, table_bytes=2**26))
    assert shaped.nbytes == 2 * 8968 + 2**26 and shaped.sparse and not shaped.dense().sparse
    sent, received = ps_worker_bytes(dataclasses.replace(TABLE, dense_bytes=2 * 8968, table_bytes=2**26))
    assert sum(t.push_bytes for t in shaped.tensors) == pytest.approx(sent)
    assert sum(t.pull_bytes for t in shaped.tensors) == pytest.approx(received)


def test_a_table_is_allgathered_row_by_row_until_the_dense_ring_is_cheaper():
    shaped = EMBEDDING.sized(TABLE)
    assert schemes.combinations(cpu_workers(4), profile.load("loopback-2026"), shaped).count((RING_DENSE, "mpi")) == 1

    def ring_s(scheme: str, n: int) -> float:
        return step_of(scheme, shaped, cpu_workers(n)).step_s

    # 4 ranks: each receives 3 ranks' rows, u(r+i) = 765 x 132 bytes, once the backward pass reached the table (its
    # end); the dense layer's ring, 2 x 3 x 10 us + 1.5 x 8968 B / 1e8 B/s, was done halfway through the backward pass
    allgathered = 3 * (1e-5 + 765 * 132 / 1e8)
    assert ring_s(RING, 4) == pytest.approx(0.01 + allgathered, rel=1e-6)
    assert ring_s(RING, 4) < ring_s(RING_DENSE, 4) / 10
    # the allgather grows with n, the dense ring does not: past 2 T / u(r+i) ranks the table goes whole
    crossover = 2 * 2**25 / (765 * 132)
    assert ring_s(RING, int(crossover * 0.8)) < ring_s(RING_DENSE, int(crossover * 0.8))
    assert ring_s(RING, int(crossover * 1.2)) > ring_s(RING_DENSE, int(crossover * 1.2))
    # a ps moves the touched rows only: at 4 workers and 1 ps it is far from the dense ring's cost
    assert step_of(PS_SYNC, shaped, cpu_workers(4)).step_s < ring_s(RING_DENSE, 4) / 10


def test_a_synchronous_step_waits_for_the_slowest_worker_and_an_asynchronous_one_does_not():
    small = ModelTensors("small", (Tensor("w", 1000, 0.5),), 1e-3)
    for scheme in (RING, PS_SYNC):
        steady, spread = step_of(scheme, small, cpu_workers(64)), step_of(scheme, small, cpu_workers(64, sd_s=0.002))
        slowest = costs.synchronous_compute_s(64, 0.01, 0.002)
        assert spread.waiting_s == pytest.approx(slowest - 0.01) and steady.waiting_s == 0.0
        assert spread.step_s - steady.step_s == pytest.approx(slowest - 0.01, rel=1e-6)
        assert spread.compute_s == steady.compute_s == pytest.approx(0.01)
    assert step_of(PS_ASYNC, small, cpu_workers(64, sd_s=0.002)) == step_of(PS_ASYNC, small, cpu_workers(64))


def test_cpu_workers_copy_nothing_to_host_memory_and_have_no_gpu_transport():
    gpus = dataclasses.replace(cpu_workers(4), on_host=False)
    assert allreduce.buffer_s(S, gpus, WIRE, False) == pytest.approx(
        allreduce.buffer_s(S, cpu_workers(4), WIRE, False) + 2 * S / 1e10)
    loopback = profile.load("loopback-2026")
    assert "nccl" in loopback.transport_names
    assert all(t != "nccl" for _, t in schemes.combinations(cpu_workers(4), loopback, EMBEDDING))
    assert any(t == "nccl" for _, t in schemes.combinations(gpus, loopback, EMBEDDING))


def test_the_slowest_of_n_matches_sampling():
    rng = np.random.default_rng(0)
    for n in (2, 8, 64):
        sampled = rng.normal(1.0, 0.1, size=(200_000, n)).max(axis=1).mean()
        assert costs.synchronous_compute_s(n, 1.0, 0.1) == pytest.approx(sampled, rel=0.01)
    # one backup worker of 8: the 7th fastest
    sampled = np.sort(rng.normal(1.0, 0.1, size=(200_000, 8)), axis=1)[:, 6].mean()
    assert costs.synchronous_compute_s(8, 1.0, 0.1, backups=1) == pytest.approx(sampled, rel=0.01)
    assert costs.synchronous_compute_s(1, 1.0, 0.1) == 1.0


def test_the_byteps_crossover_is_where_a_ps_phase_beats_the_ring():
    for n in range(2, 65):
        k_star = costs.byteps_crossover_ps_tasks(n)
        for k in range(1, 2 * n):
            ps_wins = max(S, n * S / k) < ring_factor(n) * S  # one direction's bytes at the busier end
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
    from bench.analysis.runs.micro_summary import tensor_costs

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
