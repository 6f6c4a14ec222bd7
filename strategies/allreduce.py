"""allreduce: Horovod ring allreduce, one process per rank under mpirun or horovodrun.

Every rank holds all the weights; after each backward pass the gradients are
averaged across ranks (ring allreduce, fused into few large buffers) and every
rank applies the same update.
"""

from __future__ import annotations

import os

from bench.config import RunConfig
from bench.metrics import (
    Gradient,
    allgather_bytes,
    compressed_fraction,
    ring_allreduce_bytes,
    sparse_allreduce_bytes,
    topk_allgather_bytes,
)
from bench.options import Option, flag_bool
from bench.run.contract import ALLREDUCE, ALWAYS, SparseExchange
from strategies._compression import FP16, NONE, TOPK, parse
from strategies._compression import option as compression_option
from strategies._horovod import HOROVOD_OPTIONS, TIMELINE_FILE, TIMELINE_SOURCE, HorovodRanks, HorovodStrategy

COMPRESSION = compression_option((NONE, FP16, TOPK), "allreduce")
SPARSE_AS_DENSE = Option("sparse_as_dense", flag_bool, False,
                         "allreduce: send an embedding table's gradient dense (a ring allreduce of the whole table) "
                         "instead of allgathering its touched rows (true|false)")
TIMELINE = Option("timeline", flag_bool, False, "allreduce: write Horovod's Chrome-trace timeline into the run folder "
                  "(and trace the exchange per tensor from it; the timeline costs throughput)")


class AllreduceRanks(HorovodRanks):
    @classmethod
    def environment(cls, config: RunConfig, run_dir: str | None) -> dict[str, str]:
        env = super().environment(config, run_dir)
        if config.option("timeline") and run_dir:
            env["HOROVOD_TIMELINE"] = os.path.join(run_dir, TIMELINE_FILE)
        return env


class Allreduce(HorovodStrategy):
    name = "allreduce"
    in_convergence_answer = ALWAYS
    description = "Horovod ring allreduce (hvd.allreduce of each gradient), one process per rank"
    family = ALLREDUCE
    checkpoints = True
    worker = "strategies.workers.allreduce:AllreduceWorker"
    runs_as = AllreduceRanks
    options = (*HOROVOD_OPTIONS, COMPRESSION, SPARSE_AS_DENSE, TIMELINE)
    traces_exchange = True
    exchange_trace = TIMELINE_SOURCE

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        flavours = [name for name, on in (("gloo", config.option("hvd_controller") == "gloo"),
                                          ("dense", config.option("sparse_as_dense")),
                                          (config.option("compression"), config.option("compression") != NONE)) if on]
        return f"{cls.name} ({', '.join(flavours)})" if flavours else cls.name

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        if config.option("sparse_as_dense"):
            return SparseExchange("dense ring allreduce of the whole table (sparse_as_dense)", table_dense=True)
        return SparseExchange("allgather of the touched rows (Horovod's default for IndexedSlices)")

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        # float16 halves what is allreduced; top-k pairs are allgathered; Horovod allgathers
        # IndexedSlices uncompressed
        kind, ratio = parse(config.option("compression"))
        table_dense = config.option("sparse_as_dense")
        if kind == TOPK:
            dense = gradient.full_bytes if table_dense else gradient.dense_bytes
            sparse = 0 if table_dense else allgather_bytes(gradient.slices_bytes, config.workers)
            sent = topk_allgather_bytes(dense, ratio, config.workers) + sparse
        elif table_dense:
            sent = ring_allreduce_bytes(gradient.full_bytes * compressed_fraction(kind), config.workers)
        else:
            sent = sparse_allreduce_bytes(gradient, config.workers, compressed_fraction(kind))
        return {"worker": (sent, sent)}
