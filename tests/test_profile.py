"""`python -m bench profile`'s figures folded into a transport profile, and its refusals. Its
run across two Slurm nodes, with the projection and report after it: tests/test_slurm.py."""

from __future__ import annotations

import json

import pytest

from bench.analysis.projection import profile
from bench.drivers.profile import fold
from bench.drivers.profile.ps_rate import MANY, MANY_TENSORS, ONE_TENSOR, RATE
from tests.processes import bench


def test_each_measured_constant_is_the_median_of_its_repetitions_and_its_range_what_they_gave():
    rounds = [{"mpi.process_bytes_per_s": 1.0e9, "grpc.message_s": 40e-6},
              {"mpi.process_bytes_per_s": 0.8e9, "grpc.message_s": 30e-6},
              {"mpi.process_bytes_per_s": 1.2e9, "grpc.message_s": 50e-6}]
    data = fold.fold(rounds, "two test nodes", "tensorflow x", "./run_bench.sh profile --repeats 3, today", 2**26)
    mpi = data["constants"]["mpi.process_bytes_per_s"]
    assert (mpi["value"], mpi["low"], mpi["high"]) == (1.0e9, 0.8e9, 1.2e9)
    assert mpi["source"].startswith("measured: ./run_bench.sh profile --repeats 3")
    assert mpi["software"] == "tensorflow x" and mpi["measures"].endswith("at 64 MiB")
    nccl = data["constants"]["nccl.flow_share"]  # NCCL does not run here: documented, and said so
    assert nccl["source"].startswith(f"not measured by ./run_bench.sh profile; as documented in profile "
                                     f"{profile.DEFAULT}")
    loaded = profile.parse(data, "test")  # a valid profile, every constant the default one has
    assert set(loaded.constants) == set(profile.load(profile.DEFAULT).constants)


def test_the_grpc_figures_are_the_ps_tasks_rate_with_every_worker_and_its_cost_per_message(tmp_path):
    (tmp_path / "ps-worker0.json").write_text(json.dumps({
        RATE: {"start": 10.0, "end": 12.0, "bytes": 400, "tensors": 1, "round_s": [0.4] * 5},
        ONE_TENSOR: {"start": 0, "end": 1, "bytes": 1, "tensors": 1, "round_s": [1e-3, 1e-3, 2e-3]},
        MANY_TENSORS: {"start": 0, "end": 1, "bytes": 1, "tensors": MANY,
                       "round_s": [1e-3 + 2 * (MANY - 1) * 5e-5] * 3},
    }))
    (tmp_path / "ps-worker1.json").write_text(json.dumps({RATE: {"start": 10.5, "end": 13.0, "bytes": 600,
                                                                 "tensors": 1, "round_s": [0.5] * 5}}))
    figures = fold.grpc_figures(tmp_path)
    assert figures["grpc.process_bytes_per_s"] == pytest.approx(1000 / 3.0)  # both workers' bytes over the span
    assert figures["grpc.message_s"] == pytest.approx(5e-5)  # a push and a pull per tensor


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "2"], "--repeats must be >= 3"),
    (["--ranks-per-node", "0"], "--ranks-per-node must be >= 1"),
    (["--bytes", "65536"], "--bytes must be >= 1048576 (1 MiB)"),
])
def test_bad_input_is_refused_in_one_line(argv, message):
    done = bench("profile", *argv)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1
