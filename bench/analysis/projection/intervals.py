"""A scheme's figure with its prediction interval: every uncertain constant of the profile, and the
compute, moved by its own uncertainty one at a time (bench.analysis.projection.levels combines them), and
the columns a row gives them."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from bench.analysis.projection import levels
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.profile import CORES_GAIN, Profile
from bench.analysis.projection.schemes import PS_SCHEMES, PsSetup, predict, ps_layout
from bench.run.contract import GRPC
from bench.run.models.tensors import ModelTensors


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
    if term.name != CORES_GAIN or scheme not in PS_SCHEMES or cluster.cores_per_host is None \
            or not used.constants[CORES_GAIN].samples:  # a documented gain is the software's, whatever the host
        return term
    pushers = ps_layout(scheme, cluster, ps).pushers
    beyond = used.transports()[GRPC].cores_extrapolated(pushers, cluster.cores_per_host)
    if beyond <= 1.0:
        return term
    wide = levels.range_term(f"{CORES_GAIN} (extrapolated {beyond:.3g}x beyond the cores measured)", 1.0, 2.0)
    return wide if wide.u >= term.u else term


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
