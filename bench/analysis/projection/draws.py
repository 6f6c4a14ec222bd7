"""Joint draws of a profile's constants and a worker's compute: the Monte Carlo every projected interval is made
from (JCGM 101:2008, "Propagation of distributions using a Monte Carlo method": each input drawn from its own
distribution, the model evaluated at each joint draw).

Each constant is drawn from what is known of it (`quantile`):
- every round kept (`rounds`: a message's time, each repetition's rounds): the distribution of their pooled
  mean, by a two-stage bootstrap (Davison and Hinkley 1997, section 3.8: the repetitions resampled, then the
  rounds within each), so one stalled round of n moves the mean by its share, 1/n of it, and a repetition
  whose rounds all differ from the others' (a scheduler that placed the ranks otherwise) widens it as much
  as it should;
- a few repetitions of a figure that is itself a median of its rounds (`samples`): one new repetition's, Student's
  t on their logs with n - 1 degrees of freedom, scaled s sqrt(1 + 1/n);
- a range (a citation, or a stand-in's candidate sources): uniform over it on the log scale;
- Horovod's fusion threshold and cycle, and what a profile gives one value: exact.

The draws are a Latin hypercube (McKay, Beckman and Conover 1979): each constant's DRAWS values are one in each
1/DRAWS slice of its distribution (the slice's middle), in an order fixed by its name, so that every figure of a
projection, of every scheme and every cluster, sees the same joint draws: strategies that share a constant move
together, and a ratio's interval is taken draw by draw. Reruns give the same figures.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# joint draws per projected figure: as many model evaluations as the one-at-a-time intervals took for a figure of
# 15 constants (2 each), so a projection of 4,096 workers answers in seconds (tests/test_projection_speed.py)
DRAWS = 32
BOOTSTRAP = 4000  # resamples that make a rounds constant's distribution of the mean
COMPUTE = "compute"  # the worker's compute's own draws (a run-to-run spread, bench.analysis.projection.levels.Term)


def order(name: str, n: int = DRAWS) -> np.ndarray:
    """The slice each draw of `name` takes: a permutation of 0..n-1 fixed by the name."""
    return np.random.default_rng(zlib.crc32(name.encode())).permutation(n)


def uniforms(name: str, n: int = DRAWS) -> np.ndarray:
    """The probabilities at which `name` is drawn: each slice's middle, in the name's order."""
    return (order(name, n) + 0.5) / n


def bootstrap_means(repetitions: Sequence[Sequence[float]], seed: str, resamples: int = BOOTSTRAP) -> np.ndarray:
    """The pooled means of `resamples` two-stage resamples of `repetitions` (each a repetition's rounds): as many
    repetitions drawn with replacement, and each drawn one's rounds drawn with replacement; sorted."""
    reps = [np.asarray(r, dtype=float) for r in repetitions if len(r)]
    rng = np.random.default_rng(zlib.crc32(seed.encode()))
    picks = rng.integers(0, len(reps), size=(resamples, len(reps)))
    sums, counts = np.zeros(resamples), np.zeros(resamples)
    for r, values in enumerate(reps):
        times = (picks == r).sum(axis=1)  # how often each resample drew repetition r
        for k in range(1, int(times.max(initial=0)) + 1):
            rows = times >= k
            drawn = values[rng.integers(0, len(values), size=(int(rows.sum()), len(values)))]
            sums[rows] += drawn.sum(axis=1)
            counts[rows] += len(values)
    return np.sort(sums / counts)


def student_t(probabilities: np.ndarray, dof: float) -> np.ndarray:
    from scipy.stats import norm, t  # only a projection pays scipy.stats' import

    return norm.ppf(probabilities) if math.isinf(dof) else t.ppf(probabilities, dof)


def of_term(u: float, dof: float, probabilities: np.ndarray) -> np.ndarray:
    """Factors exp(u t) of a term of standard uncertainty `u` on the log scale (1 where it has none)."""
    if u <= 0:
        return np.ones_like(probabilities)
    return np.exp(u * student_t(probabilities, dof))


@dataclass(frozen=True)
class Spread:
    """How a figure's log varies over the draws, and each input's part: the squared correlation of its
    draws' ranks with the figure's log (a share of the variance where the figure is near linear in them)."""

    log_mean: float
    log_sd: float
    shares: tuple[tuple[str, float], ...]  # (input, share), largest first

    @property
    def widest(self) -> str | None:
        return self.shares[0][0] if self.shares and self.shares[0][1] > 0 else None


def spread(values: np.ndarray, inputs: Sequence[str]) -> Spread:
    """The spread of `values` (one per draw, > 0) and the part of each of `inputs` (names drawn by `uniforms`)."""
    logs = np.log(values)
    sd = float(np.std(logs, ddof=1)) if len(logs) > 1 else 0.0
    shares = []
    if sd > 0:
        centred = logs - logs.mean()
        for name in dict.fromkeys(inputs):
            ranks = uniforms(name, len(values)) - 0.5
            r = float(np.dot(ranks, centred) / math.sqrt(np.dot(ranks, ranks) * np.dot(centred, centred)))
            shares.append((name, r * r))
    return Spread(float(logs.mean()), sd, tuple(sorted(shares, key=lambda s: -s[1])))
