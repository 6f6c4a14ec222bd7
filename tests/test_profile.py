"""`python -m bench profile`'s figures folded into a transport profile, and its refusals. Its
run across two Slurm nodes, with the projection and report after it: tests/test_slurm.py."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest

from bench.analysis.projection import profile
from bench.drivers.profile import fold
from bench.drivers.profile.ps_rate import (
    EVERY_WORKER,
    MANY,
    MANY_TENSORS,
    ONE_TENSOR,
    concurrency,
    parts,
    rate_part,
    workers_of,
)
from bench.drivers.profile.run import last_line, parser, rate_sizes
from tests.processes import bench


def test_each_measured_constant_is_the_median_of_its_repetitions_and_keeps_them_for_its_interval():
    rounds = [{"mpi.process_bytes_per_s": 1.0e9, "grpc.message_s": 40e-6},
              {"mpi.process_bytes_per_s": 0.8e9, "grpc.message_s": 30e-6},
              {"mpi.process_bytes_per_s": 1.2e9, "grpc.message_s": 50e-6}]
    data = fold.fold(rounds, "two test nodes", "tensorflow x", "./run_bench.sh profile --repeats 3, today", 2**26)
    mpi = data["constants"]["mpi.process_bytes_per_s"]
    assert mpi["value"] == 1.0e9 and mpi["samples"] == [1.0e9, 0.8e9, 1.2e9]
    # its range shown: where a fourth repetition falls 90 % of the time, far wider than the three's min-max
    # (which holds a new one half the time); mean of logs +- t(2) s sqrt(1 + 1/3)
    logs = np.log([1.0e9, 0.8e9, 1.2e9])
    half = 2.919986 * logs.std(ddof=1) * math.sqrt(1 + 1 / 3)
    assert (mpi["low"], mpi["high"]) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert mpi["low"] < 0.6e9 and mpi["high"] > 1.6e9
    assert mpi["source"].startswith("measured: ./run_bench.sh profile --repeats 3")
    assert mpi["software"] == "tensorflow x" and "over MPI at 64 MiB;" in mpi["measures"]
    nccl = data["constants"]["nccl.flow_share"]  # NCCL does not run here: documented, and said so
    assert nccl["source"].startswith(f"not measured by ./run_bench.sh profile; as documented in profile "
                                     f"{profile.DEFAULT}")
    loaded = profile.parse(data, "test")  # a valid profile, every constant the default one has but its host's
    assert set(loaded.constants) == set(profile.load(profile.DEFAULT).constants) - set(fold.OF_THE_HOST)


def test_a_rate_measured_at_several_buffers_keeps_each_buffers_median_as_its_curve():
    # Open MPI picks its allreduce algorithm by the buffer's size: a step's 3.4 MB buffer may move
    # slower than the 4 MiB one the rate is named by
    at = fold.AT
    rounds = [{"mpi.process_bytes_per_s": r4, f"mpi.process_bytes_per_s{at}{2**20}": r1,
               f"mpi.process_bytes_per_s{at}{2**21}": r2, f"mpi.process_bytes_per_s{at}{2**22}": r4}
              for r1, r2, r4 in ((10e6, 8e6, 12e6), (12.5e6, 9e6, 11e6), (11e6, 7e6, 13e6))]
    data = fold.fold(rounds, "two test nodes", "tensorflow x", "./run_bench.sh profile, today", 2**22)
    mpi = data["constants"]["mpi.process_bytes_per_s"]
    # 2 MiB's repetitions (7-9) lie apart from 4 MiB's (11-13): its own median; 1 MiB's (10-12.5) do not
    assert mpi["by_bytes"] == [[2.0**20, 12e6], [2.0**21, 8e6], [2.0**22, 12e6]] and mpi["value"] == 12e6
    assert "by_bytes" not in data["constants"]["gloo.process_bytes_per_s"]  # not measured here: documented
    transport = profile.parse(data, "test").transports()["mpi"]
    assert transport.message_rate(2**21) == pytest.approx(8e6)
    assert transport.network_bytes_per_s(10, nbytes=2**21) == pytest.approx(8e6)  # the buffer's own rate binds
    assert transport.network_bytes_per_s(10) == pytest.approx(12e6)


def test_sizes_whose_repetitions_overlap_the_rate_buffers_make_no_curve():
    at = fold.AT
    rounds = [{"gloo.process_bytes_per_s": r4, f"gloo.process_bytes_per_s{at}{2**20}": r1,
               f"gloo.process_bytes_per_s{at}{2**22}": r4} for r1, r4 in ((9.6e7, 1.12e8), (1.39e8, 1.16e8),
                                                                          (1.2e8, 1.15e8))]
    data = fold.fold(rounds, "two test nodes", "tensorflow x", "./run_bench.sh profile, today", 2**22)
    assert "by_bytes" not in data["constants"]["gloo.process_bytes_per_s"]


def test_the_rate_sweep_starts_at_1_mib_in_steps_of_sqrt_2_and_ends_at_the_rate_buffer():
    assert rate_sizes(2**22) == (2**20, 1482752, 2**21, 2965504, 2**22)
    assert rate_sizes(2**20) == (2**20,)
    assert rate_sizes(int(2**20 * 1.02)) == (int(2**20 * 1.02),)  # within 5%: the rate buffer alone


def test_the_grpc_figures_are_the_ps_tasks_rate_at_each_concurrency_and_its_cost_per_message(tmp_path):
    (tmp_path / "ps-worker0.json").write_text(json.dumps({
        rate_part(1): {"start": 0.0, "end": 2.0, "bytes": 500, "tensors": 1, "round_s": [0.4] * 5},
        rate_part(2): {"start": 10.0, "end": 12.0, "bytes": 400, "tensors": 1, "round_s": [0.4] * 5},
        ONE_TENSOR: {"start": 0, "end": 1, "bytes": 1, "tensors": 1, "round_s": [1e-3, 1e-3, 2e-3]},
        MANY_TENSORS: {"start": 0, "end": 1, "bytes": 1, "tensors": MANY,
                       "round_s": [1e-3 + 2 * (MANY - 1) * 5e-5] * 3},
    }))
    (tmp_path / "ps-worker1.json").write_text(json.dumps({rate_part(2): {"start": 10.5, "end": 13.0, "bytes": 600,
                                                                         "tensors": 1, "round_s": [0.5] * 5}}))
    figures = fold.grpc_figures(tmp_path)
    assert figures[f"grpc.process_bytes_per_s{fold.WITH}1"] == pytest.approx(250.0)  # one worker alone
    assert figures[f"grpc.process_bytes_per_s{fold.WITH}2"] == pytest.approx(1000 / 3.0)  # both, over the span
    assert figures["grpc.process_bytes_per_s"] == pytest.approx(1000 / 3.0)  # the constant: every worker at once
    assert figures["grpc.message_s"] == pytest.approx(5e-5)  # a push and a pull per tensor


def test_the_ps_rate_is_measured_with_1_2_4_workers_each_moving_its_share_of_the_buffer():
    assert concurrency(4) == (1, 2, 4) and concurrency(6) == (1, 2, 4, 6) and concurrency(1) == (1,)
    rates = [p for p in parts(2**26, 4) if workers_of(p[0])]
    assert [(workers_of(name), nbytes, who) for name, nbytes, _, who in rates] == [
        (1, 2**26, 1), (2, 2**25, 2), (4, 2**24, 4)]
    assert [p[3] for p in parts(2**26, 4) if not workers_of(p[0])] == [1, 1]  # the message cost: worker 0 alone


def test_a_ps_tasks_rate_that_rises_with_its_workers_is_kept_as_a_curve():
    name = "grpc.process_bytes_per_s"
    rounds = [{name: r4, f"{name}{fold.WITH}1": r1, f"{name}{fold.WITH}2": r2, f"{name}{fold.WITH}4": r4}
              for r1, r2, r4 in ((1.0e8, 1.6e8, 2.0e8), (1.1e8, 1.7e8, 2.1e8), (0.9e8, 1.5e8, 1.9e8))]
    data = fold.fold(rounds, "two test nodes", "tensorflow x", "./run_bench.sh profile, today", 2**22)
    grpc = data["constants"][name]
    assert grpc["by_workers"] == [[1.0, 1.0e8], [2.0, 1.6e8], [4.0, 2.0e8]]
    transport = profile.parse(data, "test").transports()["grpc"]
    assert transport.concurrency_share(4) == pytest.approx(1.0) and transport.concurrency_share(1) == 0.5
    assert transport.concurrency_share(8) == pytest.approx(1.0)  # flat beyond the last point: no extrapolation
    assert transport.concurrency_share(3) == pytest.approx(math.exp(math.log(0.8) + math.log(1.25) * math.log(1.5)
                                                                    / math.log(2)))


def message_json(folder, idle, busy):
    """What collective_test.test_message_as_a_step_pays_it records: rank 0's rounds (the others record none)."""
    (folder / "mpi4py-np2.json").write_text(json.dumps({"benchmarks": [{"stats": {"median": 1.0}, "extra_info": {
        "transport": "mpi4py", "kind": "message as a step pays it", "processes": 2, "bytes": 1024,
        "message_idle_rounds_s": idle, "message_busy_rounds_s": busy}}]}))
    (folder / ".mpi4py-np2-rank1.json").write_text(json.dumps({"benchmarks": [{"stats": {"median": 1.0},
                                                                               "extra_info": {}}]}))


def test_a_messages_cost_is_the_wires_and_what_a_busy_cpu_adds_every_round_kept_and_pooled(tmp_path):
    message_json(tmp_path, [50e-6, 60e-6, 70e-6], [1e-3, 2e-3, 60e-6])
    figures = fold.allreduce_figures(tmp_path, (4194304,))
    assert figures["latency_s"] == [50e-6, 60e-6, 70e-6]
    assert figures[fold.BUSY_CPU] == pytest.approx([940e-6, 1940e-6, 0.0])  # less the idle mean, 60 us
    other = {"latency_s": [40e-6, 40e-6, 40e-6], fold.BUSY_CPU: [0.0, 0.0, 0.0]}
    data = fold.fold([figures, other], "two test nodes", "tensorflow x", "./run_bench.sh profile", 2**22)
    wire, busy = data["constants"]["latency_s"], data["constants"][fold.BUSY_CPU]
    assert wire["rounds"] == [[50e-6, 60e-6, 70e-6], [40e-6, 40e-6, 40e-6]]
    assert wire["value"] == pytest.approx(50e-6) and wire["low"] <= 50e-6 <= wire["high"]
    assert busy["value"] == pytest.approx(2880e-6 / 6) and "6 rounds in 2 repetitions" in busy["source"]
    transport = profile.parse(data, "test").transports()["mpi"]
    assert (transport.latency_s, transport.busy_latency_s()) == (pytest.approx(50e-6), pytest.approx(530e-6))


def test_one_stalled_round_moves_the_mean_by_its_weight_and_widens_the_interval_no_more():
    rng = np.random.default_rng(7)
    rounds = list(rng.lognormal(math.log(50e-6), 0.2, 360))
    stall = 300 * 50e-6
    # six repetitions of 60 rounds, as a profile keeps them
    calm, stalled = (profile.Constant("latency_s", statistics.fmean(r), 0, 1, "s", "x", "x", "x",
                                      rounds=tuple(tuple(r[i:i + 60]) for i in range(0, 360, 60)))
                     for r in (rounds, [*rounds[:-1], stall]))
    weight = stall / len(rounds)  # what the one stalled round adds to the pooled mean
    assert stalled.value - calm.value == pytest.approx(weight - rounds[-1] / len(rounds))
    width = [float(np.ptp(c.quantile(np.array([0.05, 0.95])))) for c in (calm, stalled)]
    # at the 5 % and 95 % quantiles a resample holds the stalled round's repetition at most twice, and in it the
    # round at most twice: its weight, 4 times at most
    assert width[1] - width[0] <= 4 * weight


def test_an_older_profiles_latency_while_computing_loads_as_what_a_busy_cpu_adds():
    data = json.loads((profile.SHIPPED / "loopback-2026.json").read_text())
    data["constants"].pop(profile.LATENCY_BUSY_CPU, None)
    data["constants"]["latency_s"] = {**data["constants"]["latency_s"], "value": 50e-6}
    data["constants"][profile.OLD_BUSY] = {"value": 8.1e-7, "low": 7e-11, "high": 0.39, "unit": "s",
                                           "samples": [8.1e-7, 2.5e-4, 7.9e-7], "measures": "x", "software": "x",
                                           "source": "measured: test"}
    old = profile.parse(data, "old")
    busy = old.constants[profile.LATENCY_BUSY_CPU]
    assert profile.OLD_BUSY not in old.constants and busy.value == 0.0  # 0.8 us is less than the wire's 50
    assert busy.rounds == ((0.0,), (pytest.approx(2.0e-4),), (0.0,))
    assert old.transports()["mpi"].busy_latency_s() == pytest.approx(50e-6)


def test_a_ranks_cpu_while_its_allreduce_flies_is_the_rate_buffers_share(tmp_path):
    # collective_test.py's cpu_share: the rank's CPU time over wall time while its calls were in flight
    sizes = (2**20, 2**22)
    for transport, shares in (("horovod-mpi", (0.99, 0.97)), ("horovod-gloo", (0.35, 0.21))):
        benchmarks = [{"stats": {"median": 0.1}, "extra_info": {
            "transport": transport, "kind": "allreduce", "processes": 2, "bytes": b,
            "algbw_bytes_per_s": b / 0.1, "busbw_bytes_per_s": b / 0.1, "cpu_share": share}}
            for b, share in zip(sizes, shares, strict=True)]
        (tmp_path / f"{transport}-np2.json").write_text(json.dumps({"benchmarks": benchmarks}))
    figures = fold.allreduce_figures(tmp_path, sizes)
    assert (figures["mpi.wait_cpu_share"], figures["gloo.wait_cpu_share"]) == (0.97, 0.21)
    data = fold.fold([figures, figures, figures], "two test nodes", "tensorflow x", "./run_bench.sh profile", 2**22)
    assert data["constants"]["gloo.wait_cpu_share"]["value"] == 0.21
    assert "over Gloo is in flight" in data["constants"]["gloo.wait_cpu_share"]["measures"]


def test_the_compute_stretch_and_the_rate_share_computing_are_the_means_over_the_ranks(tmp_path):
    # collective_test.py's compute beside Horovod's loop, and its allreduce beside a computing thread:
    # rank 0's JSON and the hidden others'
    for transport, stretches, shares in (("horovod-mpi", (2.0, 1.6), (0.5, 0.7)),
                                         ("horovod-gloo", (1.1, 1.0), (0.2, 0.3))):
        for rank, (stretch, share) in enumerate(zip(stretches, shares, strict=True)):
            name = f"{transport}-np2.json" if rank == 0 else f".{transport}-np2-rank{rank}.json"
            (tmp_path / name).write_text(json.dumps({"benchmarks": [
                {"stats": {"median": 0.1 / share}, "extra_info": {
                    "transport": transport, "kind": "allreduce while computing", "processes": 2, "bytes": 2**22,
                    "alone_s": 0.1, "rate_share_computing": share}},
                {"stats": {"median": 0.1 * stretch}, "extra_info": {
                    "transport": transport, "kind": "compute", "processes": 2, "compute_alone_s": 0.1,
                    "compute_stretch": stretch}}]}))
    figures = fold.compute_figures(tmp_path)
    assert figures == {"mpi.compute_stretch": pytest.approx(1.8), "gloo.compute_stretch": pytest.approx(1.05),
                       "mpi.rate_share_computing": pytest.approx(0.6), "gloo.rate_share_computing": pytest.approx(0.25)}
    assert fold.allreduce_figures(tmp_path, (2**22,)) == figures  # no allreduce rows: these alone
    data = fold.fold([figures, {**figures, "mpi.compute_stretch": 2.2}, figures], "two test nodes", "tensorflow x",
                     "./run_bench.sh profile", 2**22)
    stretch = data["constants"]["mpi.compute_stretch"]
    assert stretch["value"] == pytest.approx(1.8) and stretch["samples"] == pytest.approx([1.8, 2.2, 1.8])
    assert stretch["low"] < 1.8 and stretch["high"] > 2.2
    assert "while Horovod's loop runs over MPI" in stretch["measures"] and stretch["source"].startswith("measured: ")


def test_a_profile_repeats_each_measurement_six_times_unless_told():
    # six, not the least three: on throttled hosts two 3-repetition profiles of the same nodes gave
    # checks of 30 and 53 figures inside, two 6-repetition ones 55 and 55 (DEFAULT_REPEATS's comment)
    assert parser().parse_args([]).repeats == 6
    assert parser().parse_args(["--repeats", "3"]).repeats == 3


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "2"], "--repeats must be >= 3"),
    (["--ranks-per-node", "0"], "--ranks-per-node must be >= 1"),
    (["--bytes", "65536"], "--bytes must be >= 1048576 (1 MiB)"),
    (["--ps-cores", "0"], "--ps-cores must be >= 1"),
])
def test_bad_input_is_refused_in_one_line(argv, message):
    done = bench("profile", *argv)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_failed_measurement_is_reported_with_the_last_line_of_its_log(tmp_path):
    (tmp_path / "profile.log").write_text("starting\nTraceback (most recent call last):\n"
                                          "tensorflow.python.framework.errors_impl.UnknownError: Could not start "
                                          "gRPC server\n\n")
    assert last_line(tmp_path / "profile.log").endswith("Could not start gRPC server")
    assert last_line(tmp_path / "missing.log") == "no log"


def test_the_rate_buffer_is_a_quarter_second_of_the_probed_rate_between_1_mib_and_64_mib():
    from bench.drivers.profile.run import LEAST_RATE_BYTES, RATE_BYTES, TARGET_CALL_S, sized_bytes

    slow_link = 100e6 / 8 * 0.94  # 100 Mbit/s, TCP's goodput
    assert sized_bytes(slow_link) == int(slow_link * TARGET_CALL_S) // 4096 * 4096
    assert 2**20 < sized_bytes(slow_link) < 4 * 2**20
    assert sized_bytes(3e9) == RATE_BYTES and sized_bytes(1e5) == LEAST_RATE_BYTES and sized_bytes(None) == RATE_BYTES


def test_repetitions_go_past_the_least_three_only_while_the_budget_holds_the_next():
    from bench.drivers.profile.run import another_fits

    assert another_fits(0, 6, 0.0, 300) and another_fits(2, 6, 400.0, 300)  # the least an interval needs
    assert another_fits(3, 6, 150.0, 300) and not another_fits(3, 6, 240.0, 300)  # 240 + 80 > 300
    assert not another_fits(6, 6, 10.0, 300)


def test_a_ps_tasks_share_beside_a_computing_process_is_taken_by_tasks_on_a_cpu_workers_host_only(tmp_path):
    alone = {"grpc.process_bytes_per_s": 2.0e8}
    assert fold.share_computing(alone, {"grpc.process_bytes_per_s": 1.5e8}) == {fold.SHARE_COMPUTING: 0.75}
    assert fold.share_computing(alone, {}) == {}  # the computing part failed: no share
    assert [p[3] for p in parts(2**24, 4, EVERY_WORKER)] == [4]  # beside the neighbour: every worker only
    name = "grpc.process_bytes_per_s"
    rounds = [{name: r4, fold.SHARE_COMPUTING: share} for r4, share in ((2.0e8, 0.5), (2.1e8, 0.55), (1.9e8, 0.45))]
    data = fold.fold(rounds, "two test nodes", "tensorflow x", "./run_bench.sh profile, today", 2**22)
    assert data["constants"][fold.SHARE_COMPUTING]["value"] == 0.5
    transport = profile.parse(data, "test").transports()["grpc"]
    assert transport.message_rate(2**20, computing=True) == pytest.approx(0.5 * transport.message_rate(2**20))
    from bench.analysis.projection.cluster import Cluster
    from bench.analysis.projection.parameter_servers import Layout

    on = ((0, 1, 2, 0), (1, 3))  # task 0 beside worker 1, task 1 on a host of its own
    cpus = Layout(Cluster(4, 1, 1.0, 1e12, 1, float("inf"), on_host=True), 2, True, False, on=on)
    assert cpus.computing_beside(0) and not cpus.computing_beside(1)
    gpus = Layout(Cluster(4, 1, 1.0, 1e12, 1, float("inf")), 2, True, False, on=on)
    assert not gpus.computing_beside(0)  # a GPU worker's compute leaves its host's CPU to the task
