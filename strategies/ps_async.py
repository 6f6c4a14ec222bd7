"""ps-async: parameter servers, each worker's gradients applied the moment they arrive."""

from __future__ import annotations

from bench.config import RunConfig
from bench.run.contract import ALWAYS, GO_ON, TfCluster
from strategies._ps import ParameterServerStrategy


class PSAsyncCluster(TfCluster):
    @classmethod
    def worker_loss(cls, config: RunConfig) -> str:
        # the parameters live on the ps tasks: a new worker reads them and goes on, and no
        # other worker waits for it meanwhile
        return GO_ON


class PSAsync(ParameterServerStrategy):
    name = "ps-async"
    in_convergence_answer = ALWAYS
    description = "parameter servers, asynchronous updates (between-graph replication)"
    worker = "strategies.workers.ps_async:PSAsyncWorker"
    runs_as = PSAsyncCluster
    asynchronous = True
