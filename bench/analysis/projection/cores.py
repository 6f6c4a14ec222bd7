"""The projected cluster's cores per host, decided once: what the user gave (`--host-cores`), else those of
the host the profile's ps task was measured on (the profile's `host_cores`), and a sentence saying whose.

Three things are "a host's cores" in this project, each with its own name: an emulated host's CPU budget
(bench.infra.emulated.network.Cluster.budget_cores, recorded in a run's `network.host_cores`), the cores of the
host a profile was measured on (the profile's constant PROFILED_HOST_CORES, a Transport's `cores_measured`), and
the projected cluster's (`Cluster.cores_per_host`, decided here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bench.analysis.projection.profile import PROFILED_HOST_CORES, Profile
from bench.errors import UsageError


@dataclass(frozen=True)
class CoresPerHost:
    cores: float | None  # Cluster.cores_per_host
    profile_cores: float | None  # the cores of the host the profile was measured on
    given: bool
    said: str

    def record(self) -> dict:
        """As `project --json` gives it (`host_cores`)."""
        return asdict(self)


def decide(given: float | None, used: Profile) -> CoresPerHost:
    """The cluster's cores per host; a `given` the profile cannot carry over (it does not say the cores it was
    measured on) is refused in one line."""
    measured = used.get(PROFILED_HOST_CORES)
    if given is not None:
        if not given > 0:
            raise UsageError(f"--host-cores: must be > 0, got {given:g}")
        if measured is None:
            raise UsageError(f"--host-cores: profile {used.name} does not say the cores of the host it was measured "
                             "on; ./run_bench.sh profile records them")
        return CoresPerHost(given, measured, True, f"{given:g} each (--host-cores); the profile's ps task was "
                                                   f"measured on a host of {measured:g}")
    if measured is None:
        return CoresPerHost(None, None, False, f"not known: profile {used.name} does not say its host's; a ps "
                                               "task's rate is taken as measured")
    return CoresPerHost(measured, measured, False, f"{measured:g} each, assumed: those of the host profile "
                                                   f"{used.name} was measured on (give yours with --host-cores N)")
