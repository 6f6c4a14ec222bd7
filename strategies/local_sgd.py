"""local-sgd: parameter averaging. Each rank takes H optimizer steps on its own shard, then
the weights (and optionally the optimizer's slots) are averaged over all ranks with a Horovod
allreduce: "initialise, give each worker a copy, train each on its subset, set the global
parameters to the workers' average, repeat". Post-local SGD (Lin et al., 2020): the first S
steps are synchronous (gradients allreduced every step), local from then on.
"""

from __future__ import annotations

from bench.config import SLOTS_PER_VARIABLE, RunConfig
from bench.metrics import Gradient, averaging_bytes, compressed_fraction
from bench.options import Option, flag_bool, non_negative, positive
from bench.run.contract import FAMILY_FASTEST, PARAMETER_AVERAGING, SparseExchange
from strategies._compression import FP16, NONE, labelled, parse
from strategies._compression import option as compression_option
from strategies._horovod import HOROVOD_OPTIONS, HorovodStrategy

SYNC_PERIOD = Option("sync_period", int, 4, "local-sgd: local steps between two averagings (H)",
                     check=positive)
LOCAL_START = Option("local_sgd_start", int, 0,
                     "local-sgd: synchronous steps (gradients allreduced) before local steps begin (S)",
                     check=non_negative)
COMPRESSION = compression_option((NONE, FP16), "local-sgd")
AVERAGE_SLOTS = Option("average_optimizer_state", flag_bool, False,
                       "local-sgd: average the optimizer's slots (momentum, Adam's moments) with the weights")

# steps of the run's schedule: "sync" allreduces the gradient, "local" updates on the rank's own
# gradient alone, "average" is a local step followed by the average of the weights
SYNC, LOCAL, AVERAGE = "sync", "local", "average"


def step_kind(config: RunConfig, step: int) -> str:
    """What the run's step `step` (from 1) does; the last step averages, so a run ends with the
    ranks holding one model."""
    start = config.option("local_sgd_start")
    if step <= start:
        return SYNC
    last = step == config.steps
    return AVERAGE if last or (step - start) % config.option("sync_period") == 0 else LOCAL


class LocalSgd(HorovodStrategy):
    name = "local-sgd"
    in_convergence_answer = FAMILY_FASTEST
    description = "parameter averaging: H local steps per rank, then the weights averaged (Horovod allreduce)"
    family = PARAMETER_AVERAGING
    worker = "strategies.workers.local_sgd:LocalSgdWorker"
    checkpoints = True
    options = (SYNC_PERIOD, LOCAL_START, AVERAGE_SLOTS, COMPRESSION, *HOROVOD_OPTIONS)
    exchange_trace = ("not traced per tensor: it exchanges weights every H steps, not gradients each step; "
                      "the split's communication is the averaging")

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        flavours = [f"H={config.option('sync_period')}"]
        if config.option("local_sgd_start"):
            flavours.append(f"S={config.option('local_sgd_start')}")
        if config.option("average_optimizer_state"):
            flavours.append("slots")
        if config.option("hvd_controller") == "gloo":
            flavours.append("gloo")
        return labelled(f"{cls.name} ({', '.join(flavours)})", config.option("compression"))

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        return SparseExchange("the whole table averaged (dense ring allreduce) every H steps", table_dense=True)

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        slots = SLOTS_PER_VARIABLE[config.optimizer] if config.option("average_optimizer_state") else 0
        fraction = compressed_fraction(*parse(config.option("compression")))  # fp16: the averages and gradients
        sent = averaging_bytes(gradient.full_bytes * (1 + slots) * fraction, config.workers,
                               config.option("sync_period"), config.steps, config.option("local_sgd_start"),
                               gradient.full_bytes * fraction)
        return {"worker": (sent, sent)}
