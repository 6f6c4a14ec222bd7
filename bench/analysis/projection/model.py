"""A step's time and a run's throughput, per exchange scheme, from the cost terms and a
calibration: what the projection predicts for a worker count and a link."""

from __future__ import annotations

from dataclasses import dataclass

from bench.analysis.projection import costs
from bench.analysis.projection.calibrate import ModelCalibration
from bench.metrics import ps_worker_bytes
from strategies.base import ALLREDUCE, PARAMETER_SERVER

RING, PS_SYNC, PS_ASYNC = "allreduce (ring)", "ps, synchronous", "ps, asynchronous"
RING_DENSE = "allreduce (ring, table dense)"  # only for a model with an embedding table
# on hosts of several devices (bench.analysis.projection.schemes)
HIERARCHICAL, PS_SYNC_AGGREGATED = "allreduce (hierarchical)", "ps, synchronous, host-aggregated"
# TensorFlow 2's parameter servers (ps-coordinator): ps-async's exchange, steps scheduled by one coordinator
PS_COORDINATOR = "ps, asynchronous, coordinator"
# (family, asynchronous) -> scheme; the families that exchange over a network
SCHEMES = {(ALLREDUCE, False): RING, (PARAMETER_SERVER, False): PS_SYNC, (PARAMETER_SERVER, True): PS_ASYNC}
EXCHANGE = {RING: "ring", RING_DENSE: "ring", PS_SYNC: "ps", PS_ASYNC: "ps"}


def schemes_for(model: ModelCalibration) -> list[str]:
    """The schemes a model can be exchanged by: with a table, the ring also sends it dense."""
    return [*SCHEMES.values(), *([RING_DENSE] if model.gradient.table_bytes else [])]


def scheme_of(family: str | None, asynchronous: bool, table_dense: bool, model: ModelCalibration) -> str | None:
    """The scheme a run of a strategy of this family used (None: it exchanges nothing over a network)."""
    scheme = SCHEMES.get((family, asynchronous))
    return RING_DENSE if scheme == RING and table_dense and model.gradient.table_bytes else scheme


@dataclass(frozen=True)
class Prediction:
    step_s: float  # one worker's step
    throughput_examples_per_s: float
    compute_s: float
    communication_s: float
    waiting_s: float


def predict(scheme: str, model: ModelCalibration, workers: int, ps_tasks: int, bandwidth_bytes_per_s: float,
            latency_s: float, compute_scale: float = 1.0, ring_overhead_s: float = 0.0) -> Prediction:
    """`compute_scale` stretches the calibrated compute (workers sharing one machine's cores);
    `ring_overhead_s` is a framework's fixed cost per allreduce step."""
    link = costs.Link(latency_s, bandwidth_bytes_per_s)
    own = model.compute_s * compute_scale
    sd = model.compute_sd_s * compute_scale
    gradient = model.gradient
    size = max(ps_worker_bytes(gradient))  # a ps phase: the worker's busier direction
    if scheme == PS_ASYNC:
        exchange = costs.ps_sync_exchange_s(1, 1, size, link)  # its own push and pull, the links otherwise idle
        updates = costs.ps_async_updates_per_s(workers, ps_tasks, size, link, own + exchange)
        step = workers / updates
        # nobody waits for anybody: time lost to the ps links' cap is queueing on them, communication
        # (as bench.run.process.breakdown counts a ps-async step)
        return Prediction(step, updates * model.batch_size, own, step - own, 0.0)
    slowest = costs.synchronous_compute_s(workers, own, sd)
    if scheme == RING_DENSE:
        exchange = ring_overhead_s + costs.ring_allreduce_s(workers, gradient.full_bytes, link)
    elif scheme == RING:
        exchange = ring_overhead_s + costs.ring_allreduce_s(workers, gradient.dense_bytes, link) \
            + costs.allgather_s(workers, gradient.slices_bytes, link)
    else:
        exchange = costs.ps_sync_exchange_s(workers, ps_tasks, size, link)
    step = slowest + exchange
    return Prediction(step, workers * model.batch_size / step, own, exchange, slowest - own)
