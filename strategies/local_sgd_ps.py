"""local-sgd-ps: parameter averaging through parameter servers, as the documents describe it:
each worker trains its own copy of the model for H steps, pushes its change (a share of it)
to the global parameters on the ps tasks, waits until every worker has pushed, and pulls the
average back as its new copy.
"""

from __future__ import annotations

from bench.config import RunConfig
from bench.metrics import Gradient, ps_server_bytes, ps_worker_bytes
from bench.run.contract import FAMILY_FASTEST, PARAMETER_AVERAGING, SparseExchange
from strategies._compression import NONE
from strategies._compression import option as compression_option
from strategies._ps import PS_PLACEMENT, ParameterServerStrategy
from strategies.local_sgd import SYNC_PERIOD


class LocalSgdPS(ParameterServerStrategy):
    name = "local-sgd-ps"
    in_convergence_answer = FAMILY_FASTEST
    description = "parameter averaging over parameter servers: H local steps, then model deltas pushed and averaged"
    family = PARAMETER_AVERAGING
    worker = "strategies.workers.local_sgd_ps:LocalSgdPSWorker"
    options = (SYNC_PERIOD, PS_PLACEMENT, compression_option((NONE,), "local-sgd-ps"))
    traces_exchange = False
    worker_towers = False  # its worker trains a copy of its own on one device
    exchange_trace = ("not traced per variable: it pushes model deltas every H steps, not gradients each step; "
                      "the split's communication is the averaging")

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        return f"{cls.name} (H={config.option('sync_period')})"

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        # every H steps a worker pushes its change and pulls the average: a ps round trip of the weights
        period, whole = config.option("sync_period"), Gradient(dense_bytes=gradient.full_bytes)
        sent, received = ps_worker_bytes(whole)
        ps_sent, ps_received = ps_server_bytes(whole, 1, config.ps)
        return {"worker": (sent / period, received / period), "ps": (ps_sent / period, ps_received / period)}

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        return SparseExchange("the whole table's change pushed and the average pulled every H steps", table_dense=True)
