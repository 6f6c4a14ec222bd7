"""ps-sync: parameter servers with SyncReplicasOptimizer: each global step averages
the first R gradients that arrive for it (R = --replicas-to-aggregate, default N).

R = N: every worker contributes once per step. R > N: fast workers contribute more
than once. R < N: backup workers; the N - R slowest gradients of a step arrive
stale and are dropped.
"""

from __future__ import annotations

from bench.config import RunConfig
from bench.options import Option, positive
from bench.run.contract import ALWAYS, GO_ON, REJOIN, TfCluster
from strategies._compression import labelled
from strategies._ps import PS_OPTIONS, ParameterServerStrategy

REPLICAS_TO_AGGREGATE = Option("replicas_to_aggregate", int, None,
                               "ps-sync: gradients averaged per global step (default: --workers)", check=positive)


def replicas(config: RunConfig) -> int:
    """R: the gradients each global step averages."""
    return config.option("replicas_to_aggregate") or config.workers


class PSSyncCluster(TfCluster):
    @classmethod
    def worker_loss(cls, config: RunConfig) -> str:
        # the parameters live on the ps tasks, so a new worker reads them and goes on; meanwhile a
        # step waits for its gradient, unless backup workers still supply R gradients per step
        return GO_ON if replicas(config) < config.workers else REJOIN

    @classmethod
    def gradients_per_step(cls, config: RunConfig) -> int | None:
        # the first R gradients computed for a step are averaged into it (with R != N the order
        # of arrival decides which, and the workers record it)
        return replicas(config)


class PSSync(ParameterServerStrategy):
    name = "ps-sync"
    in_convergence_answer = ALWAYS
    description = "parameter servers, synchronous updates with SyncReplicasOptimizer"
    worker = "strategies.workers.ps_sync:PSSyncWorker"
    options = (*PS_OPTIONS, REPLICAS_TO_AGGREGATE)

    runs_as = PSSyncCluster

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        extra = replicas(config) - config.workers
        return labelled(f"{cls.name} R=N{extra:+d}" if extra else f"{cls.name} R=N", config.option("compression"))

