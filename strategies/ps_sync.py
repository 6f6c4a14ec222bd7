"""ps-sync: parameter servers with SyncReplicasOptimizer: each global step averages
the first R gradients that arrive for it (R = --replicas-to-aggregate, default N).

R = N: every worker contributes once per step. R > N: fast workers contribute more
than once. R < N: backup workers; the N - R slowest gradients of a step arrive
stale and are dropped.
"""

from __future__ import annotations

from pathlib import Path

from bench.config import RunConfig
from bench.options import Option, positive
from bench.run.records import STEPS_FILE
from strategies._compression import labelled
from strategies._ps import PS_OPTIONS, ParameterServerStrategy
from strategies.base import GO_ON, REJOIN

REPLICAS_TO_AGGREGATE = Option("replicas_to_aggregate", int, None,
                               "ps-sync: gradients averaged per global step (default: --workers)", check=positive)


def mark_aggregated(steps_csv: Path, replicas: int, last_step: int) -> dict:
    """Fill `applied`: of the gradients computed for a global step, the first `replicas`
    to arrive were averaged into it, the rest dropped; none of a step never taken. Without
    arrival orders (R = N: none recorded, every gradient goes into its own step), all of
    the steps taken."""
    import pandas as pd

    steps = pd.read_csv(steps_csv)
    if steps.empty:
        return {}
    taken = steps["global_step"] <= last_step
    if steps["arrival_order"].notna().any():
        taken &= steps.groupby("global_step")["arrival_order"].rank(method="first") <= replicas
    steps["applied"] = taken.astype(int)
    tmp = steps_csv.with_suffix(".tmp")
    steps.to_csv(tmp, index=False)
    tmp.replace(steps_csv)
    per_step = steps[steps["applied"] == 1].groupby("global_step").size()
    return {"gradients": int(len(steps)), "gradients_applied": int(steps["applied"].sum()),
            "gradients_dropped": int(len(steps) - steps["applied"].sum()),
            "aggregated_per_step_min": int(per_step.min()), "aggregated_per_step_max": int(per_step.max())}


class PSSync(ParameterServerStrategy):
    name = "ps-sync"
    description = "parameter servers, synchronous updates with SyncReplicasOptimizer"
    worker = "strategies.workers.ps_sync:PSSyncWorker"
    options = (*PS_OPTIONS, REPLICAS_TO_AGGREGATE)

    @classmethod
    def replicas(cls, config: RunConfig) -> int:
        return config.option("replicas_to_aggregate") or config.workers

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        extra = cls.replicas(config) - config.workers
        return labelled(f"{cls.name} R=N{extra:+d}" if extra else f"{cls.name} R=N", config.option("compression"))

    @classmethod
    def worker_loss(cls, config: RunConfig) -> str:
        # the parameters live on the ps tasks, so a new worker reads them and goes on; meanwhile a
        # step waits for its gradient, unless backup workers still supply R gradients per step
        return GO_ON if cls.replicas(config) < config.workers else REJOIN

    @classmethod
    def finalize_records(cls, run_dir: Path, config: RunConfig) -> dict:
        return mark_aggregated(run_dir / STEPS_FILE, cls.replicas(config), config.steps)
