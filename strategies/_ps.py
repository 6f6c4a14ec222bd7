"""What ps-async and ps-sync declare alike: a cluster of ps tasks and workers, and
the options that place the variables on the ps tasks."""

from __future__ import annotations

from typing import ClassVar

from bench.config import RunConfig
from bench.errors import UsageError
from bench.metrics import Gradient, compressed_fraction, ps_server_bytes, ps_worker_bytes
from bench.options import Option, non_negative
from bench.run.contract import GRPC, PARAMETER_SERVER, SparseExchange, Strategy, TfCluster
from strategies._compression import FP16, NONE, TOPK, labelled, parse
from strategies._compression import option as compression_option

PS_PLACEMENT = Option("ps_placement", str, "round-robin",
                      "ps strategies: how variables go to ps tasks (round-robin | balanced by bytes)",
                      choices=("round-robin", "balanced"))
PS_PARTITION_MB = Option("ps_partition_mb", float, 0.0,
                         "ps strategies: split variables larger than this (MB) across all ps tasks; 0: never",
                         check=non_negative)
COMPRESSION = compression_option((NONE, FP16, TOPK), "ps strategies")
PS_OPTIONS = (PS_PLACEMENT, PS_PARTITION_MB, COMPRESSION)
STEP_STATS_SOURCE = ("TensorFlow's step statistics (RunOptions FULL_TRACE) of the worker's traced session.run: "
                     "each variable's pull and its push to its ps task")


class ParameterServerStrategy(Strategy):
    family = PARAMETER_SERVER
    xla_refusal = "its TensorFlow 1 graph runs in a session, whose XLA is auto-clustering, not this compilation"
    checkpoints = True
    v1_graph = True  # between-graph replication: replica_device_setter, SyncReplicasOptimizer, a v1 Session
    runs_as = TfCluster
    options: ClassVar[tuple[Option, ...]] = PS_OPTIONS
    traces_exchange = True
    exchange_trace = STEP_STATS_SOURCE
    worker_towers = True  # a worker of K GPUs sums its towers' gradients, then pushes them (tf_cnn_benchmarks)

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        if config.ps < 1:
            raise UsageError(f"--strategy {config.strategy} needs --ps >= 1")
        if config.multi_host and len(config.ps_hosts) < 1:
            raise UsageError(f"--strategy {config.strategy} needs --ps-hosts")

    @classmethod
    def processes(cls, config: RunConfig) -> dict[str, int]:
        return {"ps": config.ps, "worker": config.workers}

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        return labelled(cls.name, config.option("compression"))

    @classmethod
    def wire(cls, config: RunConfig) -> str | None:
        return GRPC

    @classmethod
    def collective(cls, config: RunConfig, role: str, on_gpus: bool) -> str:
        if role == "ps":
            return "serves its variables over gRPC"
        towers = f", its {config.gpus_per_worker} towers summed first" if config.gpus_per_worker > 1 else ""
        return f"pulls and pushes over gRPC to {config.ps} ps task(s){towers}"

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        # a worker pushes its gradients (compressed, if asked) and pulls the parameters; a ps task
        # takes its share of both
        fraction = compressed_fraction(*parse(config.option("compression")))
        return {"worker": ps_worker_bytes(gradient, fraction), "ps": ps_server_bytes(gradient, 1, config.ps, fraction)}

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        return SparseExchange("touched rows pulled from and pushed to the ps (IndexedSlices)")
