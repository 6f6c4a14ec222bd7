"""Transport profiles: the rates and costs of a cluster's transports, as data.

A profile is a JSON file: per constant its value, a `[low, high]` range, what exactly it
measures, the software it was measured with, and its source (the command and date that
measured it, or a citation). The suite ships documented profiles in
`bench/analysis/projection/profiles/` (`--profile NAME`); `--profile FILE` reads any other.

A projected figure's interval is the extremes of the figure over the box of ranges. The
projection is nearly monotone in every ranged constant (faster for a higher rate or share,
slower for a higher cost, `COSTS`), so the extremes lie at two corners: every constant at
its slow end, every one at its fast end. Not quite everywhere: Horovod's loop wakes on its
cycle, so a faster reduction can find fewer tensors ready at its next tick and pay for more
buffers (0.7 % the wrong way, once in 56 rows of the large-cluster example). The interval is
therefore the extremes over the two corners, the values and `DRAWS` seeded draws inside
the ranges (`Profile.points`). Horovod's fusion threshold and cycle themselves must be
exact, `low == value == high`: their effect is not near monotone.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path

from bench.analysis.projection.transports import Transport
from bench.errors import UsageError
from strategies.base import GLOO_CONTROLLER as GLOO
from strategies.base import GRPC, NCCL
from strategies.base import MPI_CONTROLLER as MPI

SHIPPED = Path(__file__).parent / "profiles"
PROFILE_FILE = "profile.json"  # what ./run_bench.sh profile writes into its --output
DEFAULT = "loopback-2026"
SLOW, VALUE, FAST = "slow", "value", "fast"
ENDS = (SLOW, VALUE, FAST)

# a higher value of these makes a step longer; of every other ranged constant, shorter
COSTS = frozenset({"latency_s", "latency_computing_s", "grpc.message_s", "coordinator_function_s", "mpi.wait_cpu_share",
                   "gloo.wait_cpu_share", "mpi.compute_stretch", "gloo.compute_stretch"})
EXACT = frozenset({"horovod.fusion_bytes", "horovod.cycle_s"})
SHARED = ("latency_s", "link_share", "intra_host_bytes_per_s", "horovod.fusion_bytes", "horovod.cycle_s")
# the transports a profile may describe, and which carry their buffers through host memory
HOST_COPIES = {NCCL: False, MPI: True, GLOO: True, GRPC: True}
FIELDS = ("value", "low", "high", "unit", "measures", "software", "source")
DRAWS = 16


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
    # ((bytes, value), ...): where the figure depends on a message's size, the documented points, given
    # at `by_bytes_at` (the value they scale with as the value moves over its range)
    by_bytes: tuple[tuple[float, float], ...] = ()
    by_bytes_at: float = 0.0

    def curve(self) -> tuple[tuple[float, float], ...]:
        scale = self.value / self.by_bytes_at if self.by_bytes else 1.0
        return tuple((b, v * scale) for b, v in self.by_bytes)

    def at(self, end: str) -> float:
        if end == VALUE:
            return self.value
        slow = self.high if self.name in COSTS else self.low
        fast = self.low if self.name in COSTS else self.high
        return slow if end == SLOW else fast


@dataclass(frozen=True)
class Profile:
    name: str
    describes: str
    path: str
    constants: dict[str, Constant]

    def get(self, name: str, end: str = VALUE) -> float | None:
        constant = self.constants.get(name)
        return None if constant is None else constant.at(end)

    def has(self, transport: str) -> bool:
        return f"{transport}.flow_share" in self.constants

    @property
    def transport_names(self) -> list[str]:
        return [t for t in HOST_COPIES if self.has(t)]

    def transports(self, end: str = VALUE) -> dict[str, Transport]:
        """Each transport the profile describes, its rates and costs at `end` of their ranges."""
        out = {}
        for name in self.transport_names:
            out[name] = Transport(
                name, self.get(f"{name}.flow_share", end), self.get(f"{name}.process_bytes_per_s", end),
                HOST_COPIES[name], self.constants[f"{name}.flow_share"].source,
                link_share=self.get("link_share", end), message_s=self.get(f"{name}.message_s", end) or 0.0,
                latency_s=self.get("latency_s", end), latency_computing_s=self.get("latency_computing_s", end),
                fusion_bytes=int(self.get("horovod.fusion_bytes", end)),
                cycle_s=self.get("horovod.cycle_s", end), function_s=self.get("coordinator_function_s", end),
                rate_by_bytes=self._curve(f"{name}.process_bytes_per_s", end),
                compute_stretch=self.get(f"{name}.compute_stretch", end) or 1.0,
                rate_share_computing=self.get(f"{name}.rate_share_computing", end) or 1.0)
        return out

    def _curve(self, name: str, end: str) -> tuple[tuple[float, float], ...]:
        constant = self.constants.get(name)
        if constant is None or not constant.by_bytes:
            return ()
        return dataclasses.replace(constant, value=constant.at(end)).curve()

    @functools.cached_property
    def points(self) -> list[Profile]:
        """The profile at the slow corner, at its values, at the fast corner, then at DRAWS seeded
        uniform draws inside the ranges: each a profile whose values are that point's."""
        out = [dataclasses.replace(self, constants={n: dataclasses.replace(c, value=c.at(end))
                                                    for n, c in self.constants.items()}) for end in ENDS]
        rng = random.Random(0)
        for _ in range(DRAWS):
            drawn = {n: dataclasses.replace(c, value=rng.uniform(c.low, c.high)) for n, c in self.constants.items()}
            out.append(dataclasses.replace(self, constants=drawn))
        return out

    def records(self) -> list[dict]:
        """The constants as rows, for --json and the report."""
        return [{"name": c.name, **{f: getattr(c, f) for f in FIELDS},
                 **({"by_bytes": [list(p) for p in c.by_bytes]} if c.by_bytes else {})}
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
        if "by_bytes" in fields:
            points = tuple((float(b), float(v)) for b, v in fields["by_bytes"])
            if not points or any(b <= 0 or v <= 0 for b, v in points) or list(points) != sorted(points):
                raise ValueError(f"{name}: by_bytes must be (bytes, value) pairs, > 0, in order of bytes")
            c = dataclasses.replace(c, by_bytes=points, by_bytes_at=c.value)
        constants[name] = c
    missing = [n for n in SHARED if n not in constants]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}")
    return Profile(str(data["name"]), str(data["describes"]), path, constants)
