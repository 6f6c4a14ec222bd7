"""Runs on CPU as a 4-GPU host would place them (--gpus-per-host 4): each process's own record in run.json
says the GPUs the plan gave it, and TensorFlow, seeing no GPU, computed on the CPU."""

from __future__ import annotations

import pytest

from bench.drivers.gpu_check import placement_problems
from tests.processes import bench, run_record

pytestmark = pytest.mark.slow
SMALL = ("--model", "mlp", "--data", "digits", "--batch-size", "32", "--steps", "20", "--gpus-per-host", "4")


@pytest.mark.parametrize("args, visible", [
    (("--strategy", "ps-sync", "--workers", "2", "--ps", "1"), {"worker 0": "0", "worker 1": "1", "ps 0": "-1"}),
    (("--strategy", "allreduce", "--workers", "2"), {"worker 0": "0", "worker 1": "1"}),
    (("--strategy", "ps-coordinator", "--workers", "2", "--ps", "1"),
     {"worker 0": "0", "worker 1": "1", "ps 0": "-1", "coordinator 0": "-1"}),
    (("--strategy", "mirrored", "--workers", "4"), {"worker 0": "0,1,2,3"}),
])
def test_each_tasks_part_of_run_json_records_the_visibility_the_plan_gave_it(args, visible, results):
    done = bench(*args, *SMALL, "--output", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    record = run_record(results)
    devices = record["devices"]
    assert {label: d["cuda_visible_devices"] for label, d in devices.items()} == visible
    planned = {f"{p['role']} {p['index']}": p["gpus"] for p in record.get("plan") or []} or \
        {"worker 0": [0, 1, 2, 3]}  # a one-process run records no launcher's plan: its own choice is all
    assert {label: d["gpus"] for label, d in devices.items()} == planned
    assert all(d["tensorflow_gpus"] == [] for d in devices.values())  # no GPU here: TensorFlow computed on the CPU
    assert placement_problems(record) == []
