"""Transport profiles: the rates and costs of a cluster's transports, as data.

A profile is a JSON file: per constant its value, a `[low, high]` range, what exactly it
measures, the software it was measured with, and its source (the command and date that
measured it, or a citation). The suite ships documented profiles in
`bench/analysis/projection/profiles/` (`--profile NAME`); `--profile FILE` reads any other.

A constant may keep its repetitions (`samples`, what `./run_bench.sh profile` measured), every
round of each repetition (`rounds`: a message's cost) and, where it is a stand-in, its candidate
sources (`candidates`: [[value, source], ...]). Its distribution (`Constant.quantile`,
bench.analysis.projection.draws) is then the bootstrap distribution of its rounds' mean, one new
repetition's spread from its samples, else uniform over its range widened to every candidate; a
projected figure's interval is the model at joint draws of every constant
(bench.analysis.projection.intervals.interval). `low` and `high` are shown to the reader: for
measured constants, where the samples' next repetition or the rounds' mean falls at the default
level. Horovod's fusion threshold and cycle must be exact, `low == value == high`: their effect
is not monotone.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.analysis.projection import draws, levels
from bench.analysis.projection.transports import Transport
from bench.errors import UsageError
from bench.run.contract import GLOO_CONTROLLER as GLOO
from bench.run.contract import GRPC, NCCL
from bench.run.contract import MPI_CONTROLLER as MPI

SHIPPED = Path(__file__).parent / "profiles"
PROFILE_FILE = "profile.json"  # what ./run_bench.sh profile writes into its --output
DEFAULT = "loopback-2026"
EXACT = frozenset({"horovod.fusion_bytes", "horovod.cycle_s", "coordinator_steps_per_function"})
SHARED = ("latency_s", "link_share", "intra_host_bytes_per_s", "horovod.fusion_bytes", "horovod.cycle_s")
# the transports a profile may describe, and which carry their buffers through host memory
HOST_COPIES = {NCCL: False, MPI: True, GLOO: True, GRPC: True}
FIELDS = ("value", "low", "high", "unit", "measures", "software", "source")
PROFILED_HOST_CORES, CORES_GAIN, LEAST_CORES = "host_cores", "grpc.cores_gain", "grpc.least_cores"
# what a busy CPU adds to a message between hosts, beyond the wire's `latency_s`; a profile before 2026-12-07
# measured instead a message's whole cost beside a computing thread, timed after a barrier, as OLD_BUSY
LATENCY_BUSY_CPU, OLD_BUSY = "latency_busy_cpu_s", "latency_computing_s"
# a ps task's gain per doubling of the cores its streams use, where its profile did not measure it: anything
# from none (its work serialised in one place) to linear (each stream's handler on a core of its own)
UNMEASURED_CORES_GAIN = {
    "value": 2 ** 0.5, "low": 1.0, "high": 2.0, "unit": "x per doubling of cores",
    "measures": "a ps task's rate's gain per doubling of the cores its workers' streams use at once",
    "software": "TensorFlow's gRPC server (a thread per call in flight)",
    "source": "not measured by this profile: from no gain (the task's work serialised) to linear (each stream's "
              "RecvTensor handler on a core of its own), the geometric middle as the point; ./run_bench.sh "
              "profile measures it where the ps task's host has 2 or more cores"}


@dataclass(frozen=True)
class Constant:
    name: str
    value: float
    low: float
    high: float
    unit: str
    measures: str  # what exactly the figure is
    software: str  # what it was measured with (versions)
    source: str  # the command and date that measured it, or a citation
    # ((bytes, value), ...): where the figure depends on a message's size, the documented points; ((workers,
    # value), ...): where it depends on how many workers it serves at once. Both given at `curves_at` (the
    # value they scale with as the value moves by its uncertainty)
    by_bytes: tuple[tuple[float, float], ...] = ()
    by_workers: tuple[tuple[float, float], ...] = ()
    curves_at: float = 0.0
    samples: tuple[float, ...] = ()  # the repetitions it was measured in, where it was measured
    candidates: tuple[tuple[float, str], ...] = ()  # a stand-in's candidate sources: (value, source)
    rounds: tuple[tuple[float, ...], ...] = ()  # each repetition's every round, where kept (its value their mean)

    def quantile(self, probabilities: np.ndarray) -> np.ndarray:
        """Its values at `probabilities` of its distribution (bench.analysis.projection.draws)."""
        if self.name in EXACT:
            return np.full(len(probabilities), self.value)
        if sum(map(len, self.rounds)) >= 2:
            return np.maximum(np.quantile(_bootstrap(self.name, self.rounds), probabilities), 0.0)
        if len(self.samples) >= 2 and min(self.samples) > 0:
            logs = np.log(self.samples)
            scale = float(np.std(logs, ddof=1)) * math.sqrt(1 + 1 / len(logs))
            return np.exp(logs.mean() + scale * draws.student_t(probabilities, len(logs) - 1))
        low = min([self.low, *(v for v, _ in self.candidates)])
        high = max([self.high, *(v for v, _ in self.candidates)])
        if low <= 0 or low == high:
            return np.full(len(probabilities), self.value)
        return np.exp(math.log(low) + probabilities * math.log(high / low))

    def drawn(self, n: int = draws.DRAWS) -> np.ndarray:
        return self.quantile(draws.uniforms(self.name, n))

    def term(self) -> levels.Term:
        """Its uncertainty as the projection carries it (bench.analysis.projection.levels)."""
        if self.name in EXACT:
            return levels.Term(self.name, 0.0)
        if len(self.samples) >= 2 and min(self.samples) > 0:
            return levels.sample_term(self.name, self.samples)
        values = [self.low, self.high, *(v for v, _ in self.candidates)]
        return levels.range_term(self.name, min(values), max(values))

    def at(self, value: float) -> Constant:
        """The constant at `value` (a share no higher than 1), its curves scaled with it."""
        return dataclasses.replace(self, value=min(value, 1.0) if self.name.endswith("_share") else value)

    def scaled(self, factor: float) -> Constant:
        return self.at(self.value * factor)

    def curve(self, points: tuple[tuple[float, float], ...] | None = None) -> tuple[tuple[float, float], ...]:
        """`points` (by_bytes by default) at the constant's value."""
        points = self.by_bytes if points is None else points
        scale = self.value / self.curves_at if points else 1.0
        return tuple((x, v * scale) for x, v in points)


@dataclass(frozen=True)
class Profile:
    name: str
    describes: str
    path: str
    constants: dict[str, Constant]

    def get(self, name: str) -> float | None:
        constant = self.constants.get(name)
        return None if constant is None else constant.value

    def has(self, transport: str) -> bool:
        return f"{transport}.flow_share" in self.constants

    @property
    def transport_names(self) -> list[str]:
        return [t for t in HOST_COPIES if self.has(t)]

    def transports(self) -> dict[str, Transport]:
        """Each transport the profile describes, its rates and costs at their values."""
        out = {}
        for name in self.transport_names:
            out[name] = Transport(
                name, self.get(f"{name}.flow_share"), self.get(f"{name}.process_bytes_per_s"),
                HOST_COPIES[name], self.constants[f"{name}.flow_share"].source,
                link_share=self.get("link_share"), message_s=self.get(f"{name}.message_s") or 0.0,
                latency_s=self.get("latency_s"), latency_busy_cpu_s=self.get(LATENCY_BUSY_CPU) or 0.0,
                fusion_bytes=int(self.get("horovod.fusion_bytes")),
                cycle_s=self.get("horovod.cycle_s"), function_s=self.get("coordinator_function_s"),
                steps_per_function=int(self.get("coordinator_steps_per_function") or 1),
                rate_by_bytes=self._curve(f"{name}.process_bytes_per_s"),
                rate_by_workers=self._curve(f"{name}.process_bytes_per_s", "by_workers"),
                compute_stretch=self.get(f"{name}.compute_stretch") or 1.0,
                rate_share_computing=self.get(f"{name}.rate_share_computing") or 1.0,
                **(self._cores() if name == GRPC else {}))
        return out

    def _cores(self) -> dict:
        """A ps task's cores as measured: its host's, its gain per doubling and the fewest it was measured with."""
        gain = self.constants.get(CORES_GAIN)
        return {"cores_measured": self.get(PROFILED_HOST_CORES), "cores_gain": gain.value if gain else 1.0,
                "least_cores_measured": self.get(LEAST_CORES) if gain and gain.samples else None}

    def _curve(self, name: str, field: str = "by_bytes") -> tuple[tuple[float, float], ...]:
        constant = self.constants.get(name)
        return constant.curve(getattr(constant, field)) if constant is not None else ()

    def moved(self, name: str, factor: float) -> Profile:
        """The profile with constant `name` at `factor` times its value."""
        return dataclasses.replace(self, constants={**self.constants, name: self.constants[name].scaled(factor)})

    def stated(self, name: str, value: float, source: str) -> Profile:
        """The profile with constant `name` exactly `value`, as the user stated it (`source`)."""
        constant = dataclasses.replace(self.constants[name], value=value, low=value, high=value, samples=(),
                                       rounds=(), candidates=(), source=source)
        return dataclasses.replace(self, constants={**self.constants, name: constant})

    def with_value(self, name: str, value: float) -> Profile:
        return dataclasses.replace(self, constants={**self.constants, name: self.constants[name].at(value)})

    @functools.cached_property
    def transport_at_point(self) -> dict[str, Transport]:
        return self.transports()

    @functools.cached_property
    def joint(self) -> list[Profile]:
        """The profile at each of its joint draws (bench.analysis.projection.draws): every constant drawn."""
        columns = {name: c.drawn() for name, c in self.constants.items()}
        return [dataclasses.replace(self, constants={name: c.at(float(columns[name][i]))
                                                     for name, c in self.constants.items()})
                for i in range(draws.DRAWS)]

    def varied(self, transport: str, skip: frozenset[str] = frozenset()) -> list[str]:
        """The constants a figure over `transport` may depend on whose draws differ: the shared ones and the
        transport's own, less `skip`."""
        return [n for n in self._varying if n not in skip
                and (n.split(".")[0] == transport or n.split(".")[0] not in HOST_COPIES)]

    @functools.cached_property
    def _varying(self) -> tuple[str, ...]:
        """The constants whose draws differ (each drawn once per profile)."""
        return tuple(n for n, c in self.constants.items() if n not in EXACT and float(np.ptp(c.drawn())) > 0)

    def records(self) -> list[dict]:
        """The constants as rows, for --json and the report."""
        return [{"name": c.name, **{f: getattr(c, f) for f in FIELDS},
                 **({"by_bytes": [list(p) for p in c.by_bytes]} if c.by_bytes else {}),
                 **({"by_workers": [list(p) for p in c.by_workers]} if c.by_workers else {}),
                 **({"samples": list(c.samples)} if c.samples else {}),
                 **({"candidates": [list(p) for p in c.candidates]} if c.candidates else {}),
                 **({"rounds": [list(r) for r in c.rounds]} if c.rounds else {}),
                 "u_log": c.term().u, "dof": c.term().dof}
                for c in self.constants.values()]

    def summary(self) -> dict:
        return {"name": self.name, "describes": self.describes, "path": self.path, "constants": self.records()}


def shipped() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.json"))


def load(name_or_path: str) -> Profile:
    """A shipped profile by name, or a profile file (what `./run_bench.sh profile` wrote)."""
    path = Path(name_or_path)
    if not path.is_file():
        path = SHIPPED / f"{name_or_path}.json"
    if not path.is_file():
        raise UsageError(f"--profile {name_or_path}: no such file, nor a shipped profile "
                         f"(shipped: {', '.join(shipped())})")
    try:
        data = json.loads(path.read_text())
        return parse(data, str(path))
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--profile {name_or_path}: not a transport profile ({exc})") from None


def parse(data: dict, path: str) -> Profile:
    constants = {}
    for name, fields in data["constants"].items():
        missing = [f for f in FIELDS if f not in fields]
        if missing:
            raise ValueError(f"{name} lacks {', '.join(missing)}")
        c = Constant(name, *(float(fields[f]) for f in ("value", "low", "high")),
                     *(str(fields[f]) for f in ("unit", "measures", "software", "source")))
        if not c.low <= c.value <= c.high:
            raise ValueError(f"{name}: value {c.value:g} outside [{c.low:g}, {c.high:g}]")
        if name in EXACT and c.low != c.high:
            raise ValueError(f"{name} takes no range (its effect on a step is not monotone)")
        if not c.source.strip():
            raise ValueError(f"{name} has no source")
        for field, x in (("by_bytes", "bytes"), ("by_workers", "workers")):
            if field in fields:
                points = tuple((float(b), float(v)) for b, v in fields[field])
                if not points or any(b <= 0 or v <= 0 for b, v in points) or list(points) != sorted(points):
                    raise ValueError(f"{name}: {field} must be ({x}, value) pairs, > 0, in order of {x}")
                c = dataclasses.replace(c, **{field: points}, curves_at=c.value)
        c = dataclasses.replace(c, samples=_finite(name, fields.get("samples", [])),
                                candidates=tuple((float(v), str(src)) for v, src in fields.get("candidates", [])),
                                rounds=tuple(_finite(name, r) for r in fields.get("rounds", [])))
        if any(v <= 0 or not math.isfinite(v) for v, _ in c.candidates):
            raise ValueError(f"{name}: candidates must be [value > 0, source] pairs")
        constants[name] = c
    if f"{GRPC}.flow_share" in constants and PROFILED_HOST_CORES in constants and CORES_GAIN not in constants:
        gain = UNMEASURED_CORES_GAIN
        constants[CORES_GAIN] = Constant(CORES_GAIN, *(float(gain[f]) for f in ("value", "low", "high")),
                                         *(str(gain[f]) for f in ("unit", "measures", "software", "source")))
    missing = [n for n in SHARED if n not in constants]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}")
    if OLD_BUSY in constants and LATENCY_BUSY_CPU not in constants:
        constants[LATENCY_BUSY_CPU] = busy_of_old(constants.pop(OLD_BUSY), constants["latency_s"].value)
    return Profile(str(data["name"]), str(data["describes"]), path, constants)


def busy_of_old(old: Constant, wire_s: float) -> Constant:
    """A profile before 2026-12-07 measured a message's whole cost beside a computing thread (each repetition a
    mean of rounds after a barrier); what a busy CPU adds is that beyond the wire's latency (never below 0), its
    repetitions taken as repetitions of one round each."""
    extra = [max(0.0, v - wire_s) for v in old.samples or (old.value,)]
    value = max(0.0, old.value - wire_s)
    return dataclasses.replace(old, name=LATENCY_BUSY_CPU, value=value, low=min([value, *extra]),
                               high=max([value, *extra]), samples=(),
                               rounds=tuple((v,) for v in extra) if len(extra) > 1 else (),
                               measures=f"what a busy CPU adds to a message beyond latency_s: {old.measures}",
                               source=f"{old.source}; less latency_s ({wire_s:.3g} s), as {OLD_BUSY} of an older "
                                      "profile")


@functools.lru_cache(maxsize=64)
def _bootstrap(name: str, rounds: tuple[tuple[float, ...], ...]) -> np.ndarray:
    return draws.bootstrap_means(rounds, name)


def _finite(name: str, values: list) -> tuple[float, ...]:
    out = tuple(float(v) for v in values)
    if any(not math.isfinite(v) for v in out):
        raise ValueError(f"{name}: samples must be numbers")
    return out
