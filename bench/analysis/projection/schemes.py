"""Every exchange scheme on one described cluster, one row each: what
`python -m bench project --device-examples-per-s ...` prints."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bench.analysis.projection import allreduce, parameter_servers
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.model import HIERARCHICAL, PS_ASYNC, PS_COORDINATOR, PS_SYNC, PS_SYNC_AGGREGATED, RING
from bench.analysis.projection.parameter_servers import BALANCED, Layout
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.tensors import ModelTensors
from bench.analysis.projection.transports import Transport
from strategies.base import GRPC
from strategies.ps_coordinator import MOST_STEPS_PER_FUNCTION


@dataclass(frozen=True)
class PsSetup:
    tasks: int
    colocated: bool  # on worker hosts, else each on a host of its own
    placement: str  # bench.analysis.projection.parameter_servers.PLACEMENTS


def tf_cnn_benchmarks_ps(cluster: Cluster) -> PsSetup:
    """One ps task on each worker host, variables placed by bytes, as tf_cnn_benchmarks' distributed runs were."""
    return PsSetup(cluster.hosts, True, BALANCED)


def predict(scheme: str, chosen: Transport, tensors: ModelTensors, cluster: Cluster,
            ps: PsSetup) -> tuple[float, StepTerms]:
    """(examples/s of the whole cluster, one step's terms) of one scheme over one transport."""
    if scheme in (RING, HIERARCHICAL):
        terms = allreduce.step(tensors, cluster, chosen, hierarchical=scheme == HIERARCHICAL)
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
    return cap, StepTerms.of(step_s, terms.compute_s, waiting_s=step_s - terms.step_s)


def combinations(cluster: Cluster, profile: Profile) -> list[tuple[str, str]]:
    """(scheme, transport) pairs that make sense on this cluster, over the transports the profile has."""
    collectives = [t for t in profile.transport_names if t != GRPC]
    rings = [(RING, t) for t in collectives]
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
    """A scheme's figure over the profile's ranges: its extremes over the points
    bench.analysis.projection.profile.Profile.points gives (the two corners, the values and
    seeded draws), their midpoint, and the step's terms at the profile's values."""

    low: float
    high: float
    step_s_low: float
    step_s_high: float
    terms: StepTerms

    @property
    def midpoint(self) -> float:
        return (self.low + self.high) / 2


def interval(scheme: str, transport: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup,
             profile: Profile, intra_host_from_profile: bool = True) -> Interval:
    """`intra_host_from_profile`: the cluster's intra-host rate is the profile's, and takes its range too
    (not when the user gave it)."""
    found = []
    for point in profile.points:
        here = dataclasses.replace(cluster, intra_host_bytes_per_s=point.get("intra_host_bytes_per_s")) \
            if intra_host_from_profile else cluster
        found.append(predict(scheme, point.transports()[transport], tensors, here, ps))
    rates, steps = [rate for rate, _ in found], [terms.step_s for _, terms in found]
    return Interval(min(rates), max(rates), min(steps), max(steps), found[1][1])  # points[1]: the values


def rows(model: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup, profile: Profile,
         intra_host_from_profile: bool = True) -> list[dict]:
    out = []
    alone = cluster.device_examples_per_s
    for scheme, transport in combinations(cluster, profile):
        found = interval(scheme, transport, tensors, cluster, ps, profile, intra_host_from_profile)
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
                    "scaling_efficiency": found.midpoint / (cluster.workers * alone)})
    return out
