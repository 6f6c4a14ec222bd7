"""The exchange schemes the projection knows, which of them make sense on a cluster, the cost function
that predicts each (bench.analysis.projection.allreduce, .parameter_servers), and which scheme a run of a
strategy used. Their intervals: bench.analysis.projection.intervals; the table of every scheme:
bench.analysis.projection.table."""

from __future__ import annotations

from dataclasses import dataclass

from bench.analysis.projection import allreduce, levels, parameter_servers
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.parameter_servers import BALANCED, Layout
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.transports import Transport
from bench.run.contract import ALLREDUCE, GRPC, NCCL, PARAMETER_SERVER
from bench.run.models.tensors import ModelTensors

RING, PS_SYNC, PS_ASYNC = "allreduce (ring)", "ps, synchronous", "ps, asynchronous"
RING_DENSE = "allreduce (ring, table dense)"  # a model with an embedding table, its gradient sent whole
HIERARCHICAL, PS_SYNC_AGGREGATED = "allreduce (hierarchical)", "ps, synchronous, host-aggregated"
# TensorFlow 2's parameter servers (ps-coordinator): ps-async's exchange, steps scheduled by one coordinator
PS_COORDINATOR = "ps, asynchronous, coordinator"
ASYNCHRONOUS = (PS_ASYNC, PS_COORDINATOR)  # their examples/s do not count what staleness costs
# the model's two forms (allreduce.py, parameter_servers.py): each has its own error, calibrated apart
ALLREDUCE_FORM, PS_FORM = "allreduce", "parameter servers"
PS_SCHEMES = (PS_SYNC, PS_SYNC_AGGREGATED, PS_ASYNC, PS_COORDINATOR)


def form_of(scheme: str) -> str:
    """Which of the model's forms predicts `scheme`."""
    return PS_FORM if scheme in PS_SCHEMES else ALLREDUCE_FORM


ModelErrors = dict[str, levels.Term]  # form_of -> the model's error of that form, where calibrated
# (family, asynchronous) -> scheme: what a run of the families that exchange over a network used
SCHEMES = {(ALLREDUCE, False): RING, (PARAMETER_SERVER, False): PS_SYNC, (PARAMETER_SERVER, True): PS_ASYNC}
GPU_ONLY = (NCCL,)  # transports that move GPU memory: none of a cluster of CPU devices


def scheme_of(family: str | None, asynchronous: bool, table_dense: bool, has_table: bool) -> str | None:
    """The scheme a run of a strategy of this family used (None: it exchanges nothing over a network)."""
    scheme = SCHEMES.get((family, asynchronous))
    return RING_DENSE if scheme == RING and table_dense and has_table else scheme


@dataclass(frozen=True)
class PsSetup:
    tasks: int
    colocated: bool  # on worker hosts, else each on a host of its own
    placement: str  # bench.analysis.projection.parameter_servers.PLACEMENTS
    on: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # parameter_servers.Layout.on


def tf_cnn_benchmarks_ps(cluster: Cluster) -> PsSetup:
    """One ps task on each worker host, variables placed by bytes, as tf_cnn_benchmarks' distributed runs were."""
    return PsSetup(cluster.hosts, True, BALANCED)


def predict(scheme: str, chosen: Transport, tensors: ModelTensors, cluster: Cluster,
            ps: PsSetup, overlapped: bool = True) -> tuple[float, StepTerms]:
    """(examples/s of the whole cluster, one step's terms) of one scheme over one transport.
    `overlapped`: a ring's reductions may start during the backward pass (Horovod's), else
    only once it ends (bench.run.contract.Strategy.exchange_overlaps_backward)."""
    if scheme in (RING, HIERARCHICAL, RING_DENSE):
        if not overlapped:
            tensors = tensors.ready_at_end()
        if cluster.on_host and not cluster.stretch_measured:  # the transport's threads share the CPU devices
            cluster = cluster.compute_scaled(chosen.compute_stretch)
        terms = allreduce.step(tensors.dense() if scheme == RING_DENSE else tensors, cluster, chosen,
                               hierarchical=scheme == HIERARCHICAL)
        return cluster.workers * cluster.batch_size / terms.step_s, terms
    layout = ps_layout(scheme, cluster, ps)
    if scheme == PS_ASYNC:
        return parameter_servers.asynchronous_rate(tensors, layout, ps.placement, chosen)
    if scheme == PS_COORDINATOR:
        rate, terms = parameter_servers.asynchronous_rate(tensors, layout, ps.placement, chosen)
        return parameter_servers.coordinated(rate, terms, cluster, chosen.function_s, chosen.steps_per_function)
    terms = parameter_servers.synchronous_step(tensors, layout, ps.placement, chosen)
    return cluster.workers * cluster.batch_size / terms.step_s, terms


def ps_layout(scheme: str, cluster: Cluster, ps: PsSetup) -> Layout:
    """Who pushes and where the ps tasks are, for a ps scheme on the cluster."""
    return Layout(cluster, ps.tasks, ps.colocated, aggregated=scheme == PS_SYNC_AGGREGATED, on=ps.on)


def combinations(cluster: Cluster, profile: Profile, tensors: ModelTensors) -> list[tuple[str, str]]:
    """(scheme, transport) pairs that make sense on this cluster and model, over the transports the profile has."""
    collectives = [t for t in profile.transport_names if t != GRPC and not (cluster.on_host and t in GPU_ONLY)]
    rings = [(RING, t) for t in collectives]
    if tensors.sparse:
        rings += [(RING_DENSE, t) for t in collectives]
    if cluster.devices_per_host > 1 and cluster.hosts > 1:
        rings += [(HIERARCHICAL, t) for t in collectives]
    if not profile.has(GRPC):
        return rings
    ps = [(PS_SYNC, GRPC), (PS_ASYNC, GRPC)]
    if profile.get("coordinator_function_s") is not None:  # TensorFlow 2's coordinator is in this software
        ps.append((PS_COORDINATOR, GRPC))
    if cluster.devices_per_host > 1:
        ps.insert(1, (PS_SYNC_AGGREGATED, GRPC))
    return rings + ps
