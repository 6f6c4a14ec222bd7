"""One rank's pytest run under mpirun / horovodrun: each rank writes its own JSON
(rank 0's is the result) and TensorFlow's collectives get a TF_CONFIG from the rank."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench.run.launch.mpi_environment import world_rank, world_size
from bench.run.launch.slurm.gloo import adopt_slot
from bench.run.launch.tf_config import tf_config


def main() -> int:
    out, name, test_file = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    adopt_slot()  # a Gloo rank of a Slurm step: its Horovod slot (nothing elsewhere)
    rank, size = world_rank() or 0, world_size() or 1
    ports = os.environ.get("DISTBENCH_MICRO_TF_PORTS")
    if ports:
        workers = [f"127.0.0.1:{p}" for p in ports.split(",")[:size]]
        os.environ["TF_CONFIG"] = tf_config({"worker": workers}, "worker", rank)
    target = out / (f"{name}.json" if rank == 0 else f".{name}-rank{rank}.json")
    args = [test_file, "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"--benchmark-json={target}",
            "--benchmark-sort=name"]
    if rank != 0:
        args.append("--benchmark-quiet")
    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main())
