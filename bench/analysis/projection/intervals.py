"""A scheme's figure with its prediction interval: the model evaluated at every joint draw of the profile's
constants and the worker's compute (bench.analysis.projection.draws), the draws' spread on the log scale
combined with the model's error of form (bench.analysis.projection.levels), never above linear scaling of
one worker; and the columns a row gives them."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.analysis.projection import draws, levels
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.profile import CORES_GAIN, Profile
from bench.analysis.projection.schemes import PS_SCHEMES, PsSetup, predict, ps_layout
from bench.run.contract import GRPC
from bench.run.models.tensors import ModelTensors

JOINT = "joint draws"  # the term of the constants' and the compute's draws, as levels combines it with the model's


@dataclass(frozen=True)
class Interval:
    """A scheme's figure: its point (every constant at its value, the compute as given), the step's terms
    there, its examples/s at each joint draw (`drawn`, named by the inputs that vary), the most it may
    reach (`most`: linear scaling of one worker at the compute's own upper bound), and the model's error
    of form once it is known."""

    point: float
    step_s: float
    terms: StepTerms
    drawn: np.ndarray
    inputs: tuple[str, ...]
    most: float
    level: float = levels.DEFAULT_LEVEL
    model: levels.Term | None = None

    @functools.cached_property
    def spread(self) -> draws.Spread:
        return draws.spread(self.drawn, self.inputs)

    @property
    def u(self) -> float:
        """The sd of the figure's log over the draws, without the model's error."""
        return self.spread.log_sd

    @property
    def parts(self) -> tuple[levels.Term, ...]:
        """Each varying input's part of `u` (its share of the variance, as draws.spread finds it)."""
        return tuple(levels.Term(name, math.sqrt(share) * self.u) for name, share in self.spread.shares if share > 0)

    @functools.cached_property
    def bounds(self) -> tuple[float, float]:
        return around(self.spread, self.point, [self.model] if self.model else [], self.level, self.most)

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


def around(spread: draws.Spread, point: float, models: list[levels.Term], level: float,
           most: float = math.inf) -> tuple[float, float]:
    """(low, high) of a figure drawn with `spread`: the draws' spread and the models' errors at the level around
    the draws' centre (their log mean), holding the point, no higher than `most`."""
    h = levels.half_width([levels.Term(JOINT, spread.log_sd), *models], level)
    centre = math.exp(spread.log_mean)
    high = min(max(centre * math.exp(h), point), most)
    return min(centre * math.exp(-h), point, high), high


# (a profile's point, the step's terms there) -> the examples/s the cluster cannot pass there, or None
Ceiling = Callable[[Profile, StepTerms], "float | None"]


def interval(scheme: str, transport: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup,
             profile: Profile, intra_host_from_profile: bool = True, compute: levels.Term | None = None,
             ceiling: Ceiling | None = None, overlapped: bool = True,
             level: float = levels.DEFAULT_LEVEL) -> Interval:
    """`intra_host_from_profile`: the cluster's intra-host rate is the profile's, and is drawn with it (not
    when the user gave it). `compute`: the uncertainty of the device's compute (its run-to-run spread), on
    the log scale. `ceiling`: a bound the terms leave out, taken at each draw. `overlapped`: as predict's."""
    at = evaluator(scheme, transport, tensors, cluster, ps, intra_host_from_profile, ceiling, overlapped)
    rate, step_s, terms = at(profile)
    skip = frozenset() if intra_host_from_profile else frozenset({"intra_host_bytes_per_s"})
    inputs = profile.varied(transport, skip)
    spread_compute = compute is not None and compute.u > 0
    factors = draws.of_term(compute.u if spread_compute else 0.0, compute.dof if spread_compute else 1.0,
                            draws.uniforms(draws.COMPUTE))
    linear = cluster.workers * cluster.device_examples_per_s
    if inputs or spread_compute:
        joint = joint_profiles(scheme, cluster, ps, profile)
        drawn = np.array([at(p, float(f))[0] for p, f in zip(joint, factors, strict=True)])
    else:
        drawn = np.full(draws.DRAWS, rate)
    drawn = np.minimum(drawn, linear / factors)
    top = levels.half_width([compute], level) if spread_compute else 0.0
    return Interval(rate, step_s, terms, drawn, (*inputs, *([draws.COMPUTE] if spread_compute else [])),
                    linear * math.exp(top), level)


def evaluator(scheme: str, transport: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup,
              intra_host_from_profile: bool = True, ceiling: Ceiling | None = None, overlapped: bool = True
              ) -> Callable[..., tuple[float, float, StepTerms]]:
    """(profile, compute's factor) -> (examples/s, step s, the step's terms) of one scheme on the cluster."""

    def at(point: Profile, scale: float = 1.0) -> tuple[float, float, StepTerms]:
        here = cluster.compute_scaled(scale) if scale != 1.0 else cluster
        if intra_host_from_profile:
            here = dataclasses.replace(here, intra_host_bytes_per_s=point.get("intra_host_bytes_per_s"))
        rate, terms = predict(scheme, point.transport_at_point[transport], tensors, here, ps, overlapped)
        bound = ceiling(point, terms) if ceiling else None
        if bound is not None and bound < rate:
            return bound, cluster.workers * cluster.batch_size / bound, terms
        return rate, terms.step_s, terms

    return at


def joint_profiles(scheme: str, cluster: Cluster, ps: PsSetup, used: Profile) -> list[Profile]:
    """The profile's joint draws for this scheme. A ps task's gain per doubling of cores, where its streams use
    cores outside those the profile measured it with: what was measured does not reach there, so it is drawn
    over the whole range it may take (no gain to linear)."""
    gain = used.constants.get(CORES_GAIN)
    if gain is None or scheme not in PS_SCHEMES or cluster.cores_per_host is None or not gain.samples:
        return used.joint  # a documented gain is the software's, whatever the host
    pushers = ps_layout(scheme, cluster, ps).pushers
    if used.transport_at_point[GRPC].cores_extrapolated(pushers, cluster.cores_per_host) <= 1.0:
        return used.joint
    wide = 2.0 ** draws.uniforms(CORES_GAIN)  # uniform over [1, 2] on the log scale
    return [p.with_value(CORES_GAIN, float(w)) for p, w in zip(used.joint, wide, strict=True)]


def interval_columns(found: Interval, prefix: str) -> dict:
    """A figure's point, interval and what its interval is made of, as a row's columns: `<prefix>_low`,
    `_high`, the level, the sd of its log over the joint draws (`u_log`; `u_dof` infinite: the draws are its
    distribution), the input that moves it most (`widest_term`), and the model error's own interval at the
    level as factors of the point."""
    u, dof = found.u, levels.INFINITE
    model = found.model or levels.Term("model error", 0.0)
    low, high = levels.bounds(1.0, [model], found.level)
    name = "throughput_examples_per_s" if prefix == "throughput" else f"{prefix}_examples_per_s"
    widest = max([*found.parts, model], key=lambda t: t.u)
    return {name: found.point, f"{prefix}_low": found.low, f"{prefix}_high": found.high, "level": found.level,
            "u_log": u, "u_dof": dof, "model_error_u_log": model.u, "model_error_dof": model.dof,
            "model_error_low": low, "model_error_high": high,
            "widest_term": widest.name if widest.u > 0 else None, "widest_term_u_log": widest.u}
