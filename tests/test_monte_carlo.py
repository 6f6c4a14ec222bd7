"""Projected intervals from joint draws of the profile's constants: no figure above linear scaling, strategies
that share a constant moving together in a ratio, and the break-even of the constant a family answer turns on."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from bench.analysis.projection import draws, family_cells, levels, profile, table
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.parameter_servers import ROUND_ROBIN
from bench.analysis.projection.schemes import PsSetup
from bench.run.models.tensors import ModelTensors, Tensor

LOOPBACK = profile.load(profile.DEFAULT)
# a small dense model, as mlp: 1.1 MB of gradient in 4 tensors, 0.5 ms of compute a step at batch 64
SMALL = ModelTensors("small", tuple(Tensor(f"t{i}", b, r) for i, (b, r) in
                                    enumerate(((400_000, 1.0), (1000, 0.9), (700_000, 0.3), (1000, 0.1)))), 0.01)


def cpu_cluster(workers: int, link_gbit: float = 10.0) -> Cluster:
    return Cluster(workers, 1, link_gbit, device_examples_per_s=128_000, batch_size=64,
                   intra_host_bytes_per_s=1e10, compute_sd_s=2e-5, on_host=True)


def figures(used: profile.Profile, workers: int, compute: levels.Term | None = None) -> list[table.Figure]:
    return table.figures("small", SMALL, cpu_cluster(workers), PsSetup(max(1, workers // 4), False, ROUND_ROBIN),
                         used, compute=compute)


def wide_latency(used: profile.Profile) -> profile.Profile:
    """The wire's latency anywhere from 1 us to 10 ms: the message cost decides a small model's ring."""
    wide = dataclasses.replace(used.constants["latency_s"], low=1e-6, high=1e-2, samples=(), rounds=(), candidates=())
    return dataclasses.replace(used, constants={**used.constants, "latency_s": wide})


def test_no_projected_figure_goes_above_linear_scaling_of_one_worker():
    used = wide_latency(LOOPBACK)
    for workers in (16, 128):
        linear = workers * 128_000
        for f in figures(used, workers):
            assert f.found.high <= linear * (1 + 1e-9), f.row["scheme"]
            assert (f.found.drawn <= linear * (1 + 1e-9)).all()
        compute = levels.Term("compute", 0.05, 4)
        top = math.exp(levels.half_width([compute], levels.DEFAULT_LEVEL))
        for f in figures(used, workers, compute):
            assert f.found.high <= linear * top * (1 + 1e-9), f.row["scheme"]
            assert f.found.low <= f.found.point <= f.found.high


def test_the_same_draws_move_every_scheme_and_a_ratio_is_taken_draw_by_draw():
    used = wide_latency(LOOPBACK)
    found = figures(used, 128)
    rings = [f for f in found if f.row["transport"] == "mpi"]
    ps = [f for f in found if f.row["transport"] == "grpc"]
    # a ring's rate falls as the shared latency rises: its draws order as the latency's draws
    latency = used.constants["latency_s"].drawn()
    assert np.corrcoef(np.log(latency), np.log(rings[0].found.drawn))[0, 1] < -0.9
    # the cell's ratio interval is narrower than one end of either interval against the other's
    cell = family_cells.cells(found, used)[0]
    ring, best_ps = max(rings, key=lambda f: f.found.point), max(ps, key=lambda f: f.found.point)
    assert cell["high"] / cell["low"] < (ring.found.high / best_ps.found.low) / (ring.found.low / best_ps.found.high)
    # the draws are fixed by each input's name: the same projection made twice has the same bounds
    again = family_cells.cells(figures(used, 128), used)[0]
    assert (again["low"], again["high"]) == (cell["low"], cell["high"])


def test_a_cell_that_holds_1_names_the_constant_it_turns_on_and_its_break_even():
    used = wide_latency(LOOPBACK)
    found = figures(used, 128)
    cell = family_cells.cells(found, used)[0]
    assert cell["low"] < 1 < cell["high"] and cell["turns_on"] == "latency_s"
    value = cell["break_even"]
    assert 1e-6 < value < 1e-2 and cell["ahead_below"] == family_cells.ALLREDUCE_AHEAD
    ring, ps = (next(f for f in found if cell[side] == family_cells.name_of(f.row))
                for side in ("allreduce", "parameter_servers"))
    # at the break-even the two points meet; below it the ring is ahead, above it the parameter servers
    for factor, ahead in ((1.0, None), (0.5, True), (2.0, False)):
        moved = used.with_value("latency_s", value * factor)
        lead = ring.again(moved) / ps.again(moved)
        if ahead is None:
            assert lead == pytest.approx(1.0, rel=1e-3)
        else:
            assert (lead > 1) == ahead


def test_a_stated_latency_is_exact_and_named():
    stated = LOOPBACK.stated("latency_s", 31e-6, "stated: --latency-us 31")
    constant = stated.constants["latency_s"]
    assert (constant.value, constant.low, constant.high) == (31e-6, 31e-6, 31e-6)
    assert "latency_s" not in stated.varied("mpi") and (constant.drawn() == 31e-6).all()
    assert stated.transports()["mpi"].latency_s == 31e-6


def test_each_constants_draws_are_one_in_each_slice_of_its_distribution():
    p = draws.uniforms("latency_s")
    assert sorted(p) == pytest.approx([(i + 0.5) / draws.DRAWS for i in range(draws.DRAWS)])
    assert not np.array_equal(draws.uniforms("latency_s"), draws.uniforms("grpc.message_s"))
    ranged = profile.Constant("x", 2.0, 1.0, 4.0, "s", "x", "x", "x")
    drawn = np.sort(ranged.drawn())
    assert drawn[0] > 1.0 and drawn[-1] < 4.0
    assert np.median(np.log(drawn)) == pytest.approx(math.log(2.0), abs=0.05)  # uniform on the log scale
