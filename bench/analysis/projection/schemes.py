"""Every exchange scheme on one cluster, one row each, with its interval: what
`python -m bench project` prints, for a described cluster and for one calibrated from runs
alike; and which scheme a run of a strategy used."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from bench.analysis.projection import allreduce, levels, parameter_servers
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.parameter_servers import BALANCED, Layout
from bench.analysis.projection.profile import CORES_GAIN, Profile
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
    only once it ends (bench.run.contract.Strategy.exchange_overlaps_backward). On CPU devices, whose
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
    layout = ps_layout(scheme, cluster, ps)
    if cluster.host_cores is not None:
        chosen = dataclasses.replace(chosen, host_cores=cluster.host_cores)
    if scheme == PS_ASYNC:
        return parameter_servers.asynchronous_rate(tensors, layout, ps.placement, chosen)
    if scheme == PS_COORDINATOR:
        rate, terms = parameter_servers.asynchronous_rate(tensors, layout, ps.placement, chosen)
        return coordinated(rate, terms, cluster, chosen.function_s, chosen.steps_per_function)
    terms = parameter_servers.synchronous_step(tensors, layout, ps.placement, chosen)
    return cluster.workers * cluster.batch_size / terms.step_s, terms


def ps_layout(scheme: str, cluster: Cluster, ps: PsSetup) -> Layout:
    """Who pushes and where the ps tasks are, for a ps scheme on the cluster."""
    return Layout(cluster, ps.tasks, ps.colocated, aggregated=scheme == PS_SYNC_AGGREGATED, on=ps.on)


def coordinated(rate: float, terms: StepTerms, cluster: Cluster, function_s: float,
                steps_per_function: int) -> tuple[float, StepTerms]:
    """ps-async's rate, at most what one coordinator schedules: a function of `steps_per_function`
    steps per `function_s` (both the profile's); the workers then wait for it."""
    cap = steps_per_function * cluster.batch_size / function_s
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
    """A scheme's figure: its point (every constant at its value, the compute as given), the step's
    terms there, and the uncertainty terms its prediction interval is built from
    (bench.analysis.projection.levels): what moving each ranged constant, and the compute, by its
    own uncertainty did to the figure, and the model's error of form once it is known."""

    point: float
    step_s: float
    terms: StepTerms
    parts: tuple[levels.Term, ...]
    level: float = levels.DEFAULT_LEVEL
    model: levels.Term | None = None

    @property
    def u(self) -> float:
        """The combined uncertainty of the figure, on the log scale, without the model's error."""
        return levels.combined(self.parts)[0]

    @functools.cached_property
    def bounds(self) -> tuple[float, float]:
        return levels.bounds(self.point, (*self.parts, *([self.model] if self.model else [])), self.level)

    @property
    def low(self) -> float:
        return self.bounds[0]

    @property
    def high(self) -> float:
        return self.bounds[1]

    def step_bounds(self) -> tuple[float, float]:
        """The step's (shortest, longest) at the interval's ends."""
        return self.step_s * self.point / self.high, self.step_s * self.point / self.low

    def with_model(self, model: levels.Term) -> Interval:
        return dataclasses.replace(self, model=model)


# (a profile's point, the step's terms there) -> the examples/s the cluster cannot pass there, or None
Ceiling = Callable[[Profile, StepTerms], "float | None"]


def interval(scheme: str, transport: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup,
             profile: Profile, intra_host_from_profile: bool = True, compute: levels.Term | None = None,
             ceiling: Ceiling | None = None, overlapped: bool = True,
             level: float = levels.DEFAULT_LEVEL) -> Interval:
    """`intra_host_from_profile`: the cluster's intra-host rate is the profile's, and takes its uncertainty
    too (not when the user gave it). `compute`: the uncertainty of the device's compute (its run-to-run
    spread), on the log scale. `ceiling`: a bound the terms leave out, taken at each point.
    `overlapped`: as predict's. Each uncertain constant is moved by its own standard uncertainty both
    ways, one at a time; half the log of the ratio of the two figures is its part (GUM 5.1.3's
    sensitivity times uncertainty, found by a central difference)."""

    def at(point: Profile, scale: float = 1.0) -> tuple[float, float, StepTerms]:
        here = cluster.compute_scaled(scale) if scale != 1.0 else cluster
        if intra_host_from_profile:
            here = dataclasses.replace(here, intra_host_bytes_per_s=point.get("intra_host_bytes_per_s"))
        rate, terms = predict(scheme, point.transports()[transport], tensors, here, ps, overlapped)
        bound = ceiling(point, terms) if ceiling else None
        if bound is not None and bound < rate:
            return bound, cluster.workers * cluster.batch_size / bound, terms
        return rate, terms.step_s, terms

    def part(name: str, u: float, dof: float, move: Callable[[float], float]) -> levels.Term:
        return levels.Term(name, abs(math.log(move(math.exp(u)) / move(math.exp(-u)))) / 2, dof)

    rate, step_s, terms = at(profile)
    skip = frozenset() if intra_host_from_profile else frozenset({"intra_host_bytes_per_s"})
    def moving(t: levels.Term) -> levels.Term:
        name = constant_of(t)
        return part(t.name, t.u, t.dof, lambda f: at(profile.moved(name, f))[0])

    parts = [moving(_beyond_measured(t, scheme, cluster, ps, profile)) for t in profile.terms(transport, skip)]
    if compute is not None and compute.u > 0:
        parts.append(part(compute.name, compute.u, compute.dof, lambda f: at(profile, f)[0]))
    return Interval(rate, step_s, terms, tuple(p for p in parts if p.u > 0), level)


def constant_of(term: levels.Term) -> str:
    """The profile constant a term moves (an extrapolated one's name says so after it)."""
    return term.name.split(" ")[0]


def _beyond_measured(term: levels.Term, scheme: str, cluster: Cluster, ps: PsSetup, used: Profile) -> levels.Term:
    """A ps task's gain per doubling of cores where its streams use cores outside those the profile measured
    it with: what was measured does not reach there, so its uncertainty is the whole range it may take (no
    gain to linear), named as an extrapolation."""
    if term.name != CORES_GAIN or scheme not in PS_SCHEMES or cluster.host_cores is None \
            or not used.constants[CORES_GAIN].samples:  # a documented gain is the software's, whatever the host
        return term
    pushers = ps_layout(scheme, cluster, ps).pushers
    beyond = dataclasses.replace(used.transports()[GRPC], host_cores=cluster.host_cores).cores_extrapolated(pushers)
    if beyond <= 1.0:
        return term
    wide = levels.range_term(f"{CORES_GAIN} (extrapolated {beyond:.3g}x beyond the cores measured)", 1.0, 2.0)
    return wide if wide.u >= term.u else term


def rows(model: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup, profile: Profile,
         intra_host_from_profile: bool = True, compute: levels.Term | None = None,
         other_of: Callable[[str, str], float] | None = None, level: float = levels.DEFAULT_LEVEL,
         model_error: ModelErrors | None = None) -> list[dict]:
    """`other_of(scheme, transport)`: the host's own per-step work of that scheme (Cluster.other_s), where
    known. `model_error`: the model's error of each form, where it was calibrated."""
    out = []
    alone = cluster.device_examples_per_s
    for scheme, transport in combinations(cluster, profile, tensors):
        here = dataclasses.replace(cluster, other_s=other_of(scheme, transport)) if other_of else cluster
        found = interval(scheme, transport, tensors, here, ps, profile, intra_host_from_profile, compute, level=level)
        if model_error and form_of(scheme) in model_error:
            found = found.with_model(model_error[form_of(scheme)])
        terms = found.terms
        uses_ps = transport == GRPC
        out.append({"model": model, "workers": cluster.workers, "devices_per_host": cluster.devices_per_host,
                    "hosts": cluster.hosts, "link_gbit": cluster.link_gbit, "batch_size": cluster.batch_size,
                    "scheme": scheme, "transport": transport, "ps": ps.tasks if uses_ps else 0,
                    "ps_colocated": ps.colocated if uses_ps else None,
                    "ps_placement": ps.placement if uses_ps else None,
                    **interval_columns(found, "throughput"), "step_s": found.step_s,
                    "step_s_low": found.step_bounds()[0], "step_s_high": found.step_bounds()[1],
                    "compute_s": terms.compute_s,
                    "exposed_communication_s": terms.exposed_communication_s, "waiting_s": terms.waiting_s,
                    "other_s": terms.other_s,
                    "scaling_efficiency": found.point / (cluster.workers * alone)})
    return out


def interval_columns(found: Interval, prefix: str) -> dict:
    """A figure's point, interval and what its interval is made of, as a row's columns: `<prefix>_low`,
    `_high`, the level, the combined uncertainty of the constants and compute (`u_log`, its degrees of
    freedom), and the model error's own interval at the level as factors of the point."""
    u, dof = levels.combined(found.parts)
    model = found.model or levels.Term("model error", 0.0)
    low, high = levels.bounds(1.0, [model], found.level)
    name = "throughput_examples_per_s" if prefix == "throughput" else f"{prefix}_examples_per_s"
    widest = max([*found.parts, model], key=lambda t: t.u)
    return {name: found.point, f"{prefix}_low": found.low, f"{prefix}_high": found.high, "level": found.level,
            "u_log": u, "u_dof": dof, "model_error_u_log": model.u, "model_error_dof": model.dof,
            "model_error_low": low, "model_error_high": high,
            "widest_term": widest.name if widest.u > 0 else None, "widest_term_u_log": widest.u}
