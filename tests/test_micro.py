import json

import pandas as pd
import pytest

from bench.micro.bandwidth import busbw
from tests.processes import bench

pytestmark = pytest.mark.slow


def test_nccl_bandwidth_definitions():
    assert busbw("allreduce", 1000, 1.0, 4) == 1500.0  # 2(n-1)/n
    assert busbw("ps_roundtrip", 1000, 1.0, 2) == 2000.0
    assert busbw("copy", 1000, 1.0, 1) == 1000.0


def test_fast_micro_run_measures_every_transport(tmp_path):
    done = bench("micro", "--output", str(tmp_path), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = next(tmp_path.glob("micro-*"))
    result = json.loads((folder / "mpi4py-np2.json").read_text())
    assert result["machine_info"] and result["benchmarks"]
    info = result["benchmarks"][0]["extra_info"]
    assert {"algbw_bytes_per_s", "busbw_bytes_per_s", "processes", "transport"} <= set(info)
    table = pd.read_csv(folder / "micro-summary.csv")
    expected = {"mpi4py", "horovod-mpi", "horovod-gloo", "tf-collective", "ps-1ps", "ps-2ps", "memory-copy"}
    assert set(table["transport"]) == expected
    assert (table["busbw_gb_per_s"] > 0).all()
    mpi = table[table["transport"] == "mpi4py"]
    assert (mpi["fraction_of_mpi4py"] == 1.0).all()
