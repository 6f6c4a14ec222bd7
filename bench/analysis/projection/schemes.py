"""Every exchange scheme on one cluster, one row each, with its interval: what
`python -m bench project` prints, for a described cluster and for one calibrated from runs
alike; and which scheme a run of a strategy used."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.analysis.projection import allreduce, parameter_servers
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.parameter_servers import BALANCED, Layout
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.tensors import ModelTensors
from bench.analysis.projection.transports import Transport
from strategies.base import ALLREDUCE, GRPC, NCCL, PARAMETER_SERVER
from strategies.ps_coordinator import MOST_STEPS_PER_FUNCTION

RING, PS_SYNC, PS_ASYNC = "allreduce (ring)", "ps, synchronous", "ps, asynchronous"
RING_DENSE = "allreduce (ring, table dense)"  # a model with an embedding table, its gradient sent whole
HIERARCHICAL, PS_SYNC_AGGREGATED = "allreduce (hierarchical)", "ps, synchronous, host-aggregated"
# TensorFlow 2's parameter servers (ps-coordinator): ps-async's exchange, steps scheduled by one coordinator
PS_COORDINATOR = "ps, asynchronous, coordinator"
ASYNCHRONOUS = (PS_ASYNC, PS_COORDINATOR)  # their examples/s do not count what staleness costs
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


def tf_cnn_benchmarks_ps(cluster: Cluster) -> PsSetup:
    """One ps task on each worker host, variables placed by bytes, as tf_cnn_benchmarks' distributed runs were."""
    return PsSetup(cluster.hosts, True, BALANCED)


def predict(scheme: str, chosen: Transport, tensors: ModelTensors, cluster: Cluster,
            ps: PsSetup, overlapped: bool = True) -> tuple[float, StepTerms]:
    """(examples/s of the whole cluster, one step's terms) of one scheme over one transport.
    `overlapped`: a ring's reductions may start during the backward pass (Horovod's), else
    only once it ends (strategies.base.Strategy.exchange_overlaps_backward). On CPU devices, whose
    CPUs a step keeps busy, a message's fixed cost is the one measured beside a computing thread."""
    if cluster.on_host and chosen.latency_computing_s is not None:
        chosen = dataclasses.replace(chosen, latency_s=chosen.latency_computing_s)
    if scheme in (RING, HIERARCHICAL, RING_DENSE):
        if not overlapped:
            tensors = tensors.ready_at_end()
        if cluster.on_host and not cluster.stretch_measured:  # the transport's threads share the CPU devices
            cluster = cluster.compute_scaled(chosen.compute_stretch)
        terms = allreduce.step(tensors.dense() if scheme == RING_DENSE else tensors, cluster, chosen,
                               hierarchical=scheme == HIERARCHICAL)
        return cluster.workers * cluster.batch_size / terms.step_s, terms
    layout = Layout(cluster, ps.tasks, ps.colocated, aggregated=scheme == PS_SYNC_AGGREGATED)
    if scheme == PS_ASYNC:
        return parameter_servers.asynchronous_rate(tensors, layout, ps.placement, chosen)
    if scheme == PS_COORDINATOR:
        rate, terms = parameter_servers.asynchronous_rate(tensors, layout, ps.placement, chosen)
        return coordinated(rate, terms, cluster, chosen.function_s)
    terms = parameter_servers.synchronous_step(tensors, layout, ps.placement, chosen)
    return cluster.workers * cluster.batch_size / terms.step_s, terms


def coordinated(rate: float, terms: StepTerms, cluster: Cluster, function_s: float) -> tuple[float, StepTerms]:
    """ps-async's rate, at most what one coordinator schedules: a function of K steps (its default)
    per `function_s`; the workers then wait for it."""
    cap = MOST_STEPS_PER_FUNCTION * cluster.batch_size / function_s
    if rate <= cap:
        return rate, terms
    step_s = cluster.workers * cluster.batch_size / cap
    return cap, StepTerms.of(step_s, terms.compute_s, waiting_s=step_s - terms.step_s, other_s=terms.other_s)


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


@dataclass(frozen=True)
class Interval:
    """A scheme's figure over the profile's ranges and the compute's: its extremes over the points
    bench.analysis.projection.profile.Profile.points gives (the two corners, the values and
    seeded draws) at each compute scale, their midpoint, and the step's terms at the profile's
    values and the compute as given."""

    low: float
    high: float
    step_s_low: float
    step_s_high: float
    terms: StepTerms

    @property
    def midpoint(self) -> float:
        return (self.low + self.high) / 2


# (a profile's point, the step's terms there) -> the examples/s the cluster cannot pass there, or None
Ceiling = Callable[[Profile, StepTerms], "float | None"]


def interval(scheme: str, transport: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup,
             profile: Profile, intra_host_from_profile: bool = True,
             compute_scales: Sequence[float] = (1.0,), ceiling: Ceiling | None = None,
             overlapped: bool = True) -> Interval:
    """`intra_host_from_profile`: the cluster's intra-host rate is the profile's, and takes its range too
    (not when the user gave it). `compute_scales`: the device's compute as given, then the ends of its
    own interval, as scales of it. `ceiling`: a bound the terms leave out, taken at each point.
    `overlapped`: as predict's."""
    rates, steps, found = [], [], []
    for scale in compute_scales:
        scaled = cluster.compute_scaled(scale) if scale != 1.0 else cluster
        for point in profile.points:
            here = dataclasses.replace(scaled, intra_host_bytes_per_s=point.get("intra_host_bytes_per_s")) \
                if intra_host_from_profile else scaled
            rate, terms = predict(scheme, point.transports()[transport], tensors, here, ps, overlapped)
            bound = ceiling(point, terms) if ceiling else None
            if bound is not None and bound < rate:
                rate = bound
            rates.append(rate)
            steps.append(cluster.workers * cluster.batch_size / rate if bound == rate else terms.step_s)
            found.append(terms)
    return Interval(min(rates), max(rates), min(steps), max(steps), found[1])  # points[1] at the first scale


def rows(model: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup, profile: Profile,
         intra_host_from_profile: bool = True, compute_scales: Sequence[float] = (1.0,),
         other_of: Callable[[str, str], float] | None = None) -> list[dict]:
    """`other_of(scheme, transport)`: the host's own per-step work of that scheme (Cluster.other_s), where known."""
    out = []
    alone = cluster.device_examples_per_s
    for scheme, transport in combinations(cluster, profile, tensors):
        here = dataclasses.replace(cluster, other_s=other_of(scheme, transport)) if other_of else cluster
        found = interval(scheme, transport, tensors, here, ps, profile, intra_host_from_profile, compute_scales)
        terms = found.terms
        uses_ps = transport == GRPC
        out.append({"model": model, "workers": cluster.workers, "devices_per_host": cluster.devices_per_host,
                    "hosts": cluster.hosts, "link_gbit": cluster.link_gbit, "batch_size": cluster.batch_size,
                    "scheme": scheme, "transport": transport, "ps": ps.tasks if uses_ps else 0,
                    "ps_colocated": ps.colocated if uses_ps else None,
                    "ps_placement": ps.placement if uses_ps else None,
                    "throughput_examples_per_s": found.midpoint, "throughput_low": found.low,
                    "throughput_high": found.high, "step_s": terms.step_s, "step_s_low": found.step_s_low,
                    "step_s_high": found.step_s_high, "compute_s": terms.compute_s,
                    "exposed_communication_s": terms.exposed_communication_s, "waiting_s": terms.waiting_s,
                    "other_s": terms.other_s,
                    "scaling_efficiency": found.midpoint / (cluster.workers * alone)})
    return out
