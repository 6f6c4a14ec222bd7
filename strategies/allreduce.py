"""allreduce: Horovod ring allreduce, one process per rank under mpirun or horovodrun.

Every rank holds all the weights; after each backward pass the gradients are
averaged across ranks (ring allreduce, fused into few large buffers) and every
rank applies the same update.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from bench.config import RunConfig
from bench.errors import UsageError
from bench.metrics import (
    Gradient,
    allgather_bytes,
    compressed_fraction,
    ring_allreduce_bytes,
    sparse_allreduce_bytes,
    topk_allgather_bytes,
)
from bench.options import Option, flag_bool, non_negative
from strategies._compression import FP16, NONE, TOPK, parse
from strategies._compression import option as compression_option
from strategies.base import ALLREDUCE, GLOO_CONTROLLER, MPI, MPI_CONTROLLER, Strategy

CONTROLLER = Option("hvd_controller", str, MPI_CONTROLLER,
                    "allreduce: Horovod controller, mpi (mpirun) or gloo (horovodrun)",
                    choices=(MPI_CONTROLLER, GLOO_CONTROLLER))
# Horovod's settings a run gets unless told otherwise, from `python -m bench micro --horovod-sweep`
# and allreduce runs on this project's 2-core machine (docs/micro-benchmarks.md, "Horovod at its best"): a 0.5 ms
# cycle halves the wait of an allreduce for the background thread's next cycle (64 KB at 2 ranks:
# 0.60 vs 1.12 ms); 0.1 ms lost throughput (the thread's spinning takes a core from compute);
# 5 ms costs 5 ms an allreduce. The fusion buffer stays at Horovod's 128 MB.
TUNED_CYCLE_MS, TUNED_FUSION_MB = 0.5, 128.0
FUSION_MB = Option("hvd_fusion_threshold_mb", float, TUNED_FUSION_MB,
                   "allreduce: Horovod tensor fusion buffer in MB, 0 = off (Horovod's default: 128)",
                   check=non_negative)
CYCLE_MS = Option("hvd_cycle_time_ms", float, TUNED_CYCLE_MS,
                  "allreduce: Horovod cycle time in ms (Horovod's default: 1)", check=non_negative)
COMPRESSION = compression_option((NONE, FP16, TOPK), "allreduce")
SPARSE_AS_DENSE = Option("sparse_as_dense", flag_bool, False,
                         "allreduce: send an embedding table's gradient dense (a ring allreduce of the whole table) "
                         "instead of allgathering its touched rows (true|false)")
TIMELINE = Option("timeline", flag_bool, False, "allreduce: write Horovod's Chrome-trace timeline into the run folder")
SETUP_HINT = "run ./run_bench.sh setup"


def horovod_missing() -> str | None:
    """Why Horovod's TensorFlow extension is not installed, or None; asked without importing
    it (that would import TensorFlow into a launcher that only starts the ranks)."""
    try:
        spec = importlib.util.find_spec("horovod.tensorflow")
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return f"Horovod is not installed; {SETUP_HINT}"
    if not any(Path(spec.origin).parent.glob("mpi_lib*.so")):
        return f"Horovod is installed without its TensorFlow extension; {SETUP_HINT}"
    return None


class Allreduce(Strategy):
    name = "allreduce"
    description = "Horovod ring allreduce (hvd.allreduce of each gradient), one process per rank"
    family = ALLREDUCE
    checkpoints = True
    worker = "strategies.workers.allreduce:AllreduceWorker"
    launch = MPI
    options = (CONTROLLER, FUSION_MB, CYCLE_MS, COMPRESSION, SPARSE_AS_DENSE, TIMELINE)
    default_under_mpi = True

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        problem = horovod_missing()
        if problem:
            raise UsageError(problem)

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        flavours = [name for name, on in (("gloo", config.option("hvd_controller") == "gloo"),
                                          ("dense", config.option("sparse_as_dense")),
                                          (config.option("compression"), config.option("compression") != NONE)) if on]
        return f"{cls.name} ({', '.join(flavours)})" if flavours else cls.name

    @classmethod
    def table_dense(cls, config: RunConfig) -> bool:
        return bool(config.option("sparse_as_dense"))

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> str:
        if cls.table_dense(config):
            return "dense ring allreduce of the whole table (sparse_as_dense)"
        return "allgather of the touched rows (Horovod's default for IndexedSlices)"

    @classmethod
    def rank_controller(cls, config: RunConfig) -> str:
        return config.option("hvd_controller") or MPI_CONTROLLER

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        # float16 halves what is allreduced; top-k pairs are allgathered; Horovod allgathers
        # IndexedSlices uncompressed
        kind, ratio = parse(config.option("compression"))
        if kind == TOPK:
            dense = gradient.full_bytes if cls.table_dense(config) else gradient.dense_bytes
            sparse = 0 if cls.table_dense(config) else allgather_bytes(gradient.slices_bytes, config.workers)
            sent = topk_allgather_bytes(dense, ratio, config.workers) + sparse
        elif cls.table_dense(config):
            sent = ring_allreduce_bytes(gradient.full_bytes * compressed_fraction(kind), config.workers)
        else:
            sent = sparse_allreduce_bytes(gradient, config.workers, compressed_fraction(kind))
        return {"worker": (sent, sent)}

    @classmethod
    def environment(cls, config: RunConfig, run_dir: str | None) -> dict[str, str]:
        """Settings Horovod reads at hvd.init(), for every rank."""
        env = {}
        if config.option("hvd_fusion_threshold_mb") is not None:
            env["HOROVOD_FUSION_THRESHOLD"] = str(int(config.option("hvd_fusion_threshold_mb") * 2**20))
        if config.option("hvd_cycle_time_ms") is not None:
            env["HOROVOD_CYCLE_TIME"] = str(config.option("hvd_cycle_time_ms"))
        if config.options.get("timeline") and run_dir:  # strategies built on this one may not take it
            env["HOROVOD_TIMELINE"] = os.path.join(run_dir, "horovod_timeline.json")
        return env
