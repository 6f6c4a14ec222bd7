"""Prediction intervals at a stated level: the one definition every projected figure's interval
comes from.

A figure's uncertainty is a sum of independent terms on the log scale, each a standard
uncertainty `u` (of ln of the figure) with its degrees of freedom, combined as the GUM
combines them (JCGM 100:2008, "Guide to the expression of uncertainty in measurement":
5.1.2 the root sum of squares, G.4.1 Welch-Satterthwaite's effective degrees of freedom,
G.3 the coverage factor from Student's t), so that the interval
`point x exp(+-k u_c)` holds a new measurement with probability `level`:

- a constant measured n times: its prediction interval for one new draw,
  `mean +- t(n-1) s sqrt(1 + 1/n)` (FACTS.md; a min-max range of n draws holds a new one
  with probability (n-1)/(n+1) only: 50 % for n = 3), on the log scale;
- a constant known as a range (cited figures, or the span of a stand-in's candidate sources):
  uniform over the range on the log scale, `u = ln(high/low) / (2 sqrt 3)` (GUM 4.3.7),
  infinite degrees of freedom;
- the target's own run-to-run spread, and the model's error of form (`model_error`), each its
  own term.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_LEVEL = 0.9
INFINITE = math.inf


@dataclass(frozen=True)
class Term:
    """One independent source of a figure's uncertainty: its standard uncertainty on the log scale
    and its degrees of freedom (INFINITE where it is not estimated from a few samples)."""

    name: str
    u: float
    dof: float = INFINITE


def t_quantile(p: float, dof: float) -> float:
    from scipy.stats import norm, t  # only a projection pays scipy's import

    return float(norm.ppf(p) if math.isinf(dof) else t.ppf(p, dof))


def check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"a level is a probability between 0 and 1, got {level:g}")


def sample_term(name: str, samples: Sequence[float]) -> Term:
    """A constant measured len(samples) times, as the spread of one new draw: s sqrt(1 + 1/n) of
    the samples' logs, n - 1 degrees of freedom (n < 2: nothing known of its spread)."""
    n = len(samples)
    if n < 2 or min(samples) <= 0:
        return Term(name, 0.0)
    s = statistics.stdev(math.log(v) for v in samples)
    return Term(name, s * math.sqrt(1 + 1 / n), n - 1)


def range_term(name: str, low: float, high: float) -> Term:
    """A constant known to lie in [low, high] and nothing more: uniform over it on the log scale."""
    if not 0 < low <= high:
        return Term(name, 0.0)
    return Term(name, math.log(high / low) / (2 * math.sqrt(3)))


def combined(terms: Iterable[Term]) -> tuple[float, float]:
    """(u_c, effective degrees of freedom) of independent terms."""
    kept = [t for t in terms if t.u > 0]
    u_c = math.sqrt(sum(t.u**2 for t in kept))
    if not kept:
        return 0.0, INFINITE
    finite = sum(t.u**4 / t.dof for t in kept if not math.isinf(t.dof))
    return u_c, (u_c**4 / finite if finite > 0 else INFINITE)


def half_width(terms: Iterable[Term], level: float) -> float:
    """k u_c: the interval's half-width on the log scale at `level`."""
    check_level(level)
    u_c, dof = combined(terms)
    return 0.0 if u_c == 0 else t_quantile((1 + level) / 2, dof) * u_c


def bounds(point: float, terms: Iterable[Term], level: float) -> tuple[float, float]:
    """(low, high) of the prediction interval around `point` at `level`."""
    h = half_width(terms, level)
    return point * math.exp(-h), point * math.exp(h)


def prediction_interval(samples: Sequence[float], level: float) -> tuple[float, float]:
    """Where one new draw of a constant measured len(samples) times falls with probability
    `level`, around the samples' geometric mean."""
    if not samples:
        raise ValueError("no samples")
    centre = math.exp(statistics.fmean(math.log(v) for v in samples))
    return bounds(centre, [sample_term("samples", samples)], level)


def model_error(residuals: Sequence[float], explained: Sequence[float]) -> Term:
    """The model's error of form, from figures it did not see: `residuals` ln(measured / predicted)
    and `explained` the u_c every such figure's other terms gave it. Its variance is what the
    residuals' mean square holds beyond what those terms explain (never below zero); its degrees
    of freedom, the figures'."""
    if not residuals:
        return Term("model error", 0.0)
    excess = statistics.fmean(r**2 for r in residuals) - statistics.fmean(u**2 for u in explained)
    return Term("model error", math.sqrt(max(0.0, excess)), len(residuals))


def left_out(residuals: Sequence[float], explained: Sequence[float], figures: Sequence[object] | None = None,
             scored: Sequence[bool] | None = None) -> list[Term]:
    """Each measurement's model error from the scored measurements of every other figure
    (leave-one-out; `figures` names each measurement's figure, so that a figure's repeats never
    calibrate one another; without it every measurement is a figure of its own)."""
    figures = list(range(len(residuals))) if figures is None else list(figures)
    scored = [True] * len(residuals) if scored is None else list(scored)
    others = [[j for j in range(len(residuals)) if scored[j] and figures[j] != figures[i]]
              for i in range(len(residuals))]
    return [model_error([residuals[j] for j in js], [explained[j] for j in js]) for js in others]


def repeat_errors(measured: Sequence[float], figures: Sequence[object]) -> list[float | None]:
    """The rig's own error, in the projection's form (predicted / measured - 1): each measurement
    against the mean of its figure's other repeats; None where the figure was measured once."""
    out: list[float | None] = []
    for i, figure in enumerate(figures):
        others = [m for j, m in enumerate(measured) if j != i and figures[j] == figure]
        out.append(statistics.fmean(others) / measured[i] - 1 if others else None)
    return out
