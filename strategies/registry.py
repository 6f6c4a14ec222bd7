"""Finds strategies by convention: every module of this package (not its sub-packages,
which hold the TensorFlow workers) that defines a Strategy subclass with a `name`
registers it. A module that fails to import is reported and skipped, so one broken
strategy does not break the suite. Nothing here imports TensorFlow."""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from functools import cache

import strategies
from bench.config import RunConfig
from bench.errors import UsageError
from bench.options import Option
from bench.run.contract import Launch, MpiRanks, Strategy, TfCluster, options_elsewhere, options_of

_NOT_STRATEGIES = {"base", "registry"}
UNDER_MPIRUN = "allreduce"  # what `mpirun ... python -m bench` runs without --strategy
# what only one launcher reads: set on a strategy itself, no launcher would ever see it
LAUNCH_MEMBERS = {n for kind in (TfCluster, MpiRanks) for n in vars(kind) if not n.startswith("_")} - {"kind"}


@cache
def all_strategies() -> dict[str, type[Strategy]]:
    found: dict[str, type[Strategy]] = {}
    for module_info in sorted(pkgutil.iter_modules(strategies.__path__), key=lambda m: m.name):
        if module_info.ispkg or module_info.name in _NOT_STRATEGIES or module_info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"strategies.{module_info.name}")
        except Exception as exc:  # noqa: BLE001 - a broken strategy must not break the others
            warnings.warn(f"strategy module {module_info.name} skipped: {exc}", stacklevel=1)
            continue
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, Strategy) and obj is not Strategy
                    and getattr(obj, "name", None) and obj.__module__ == module.__name__):
                problem = misdeclared(obj)
                if problem:
                    warnings.warn(f"strategy {obj.name} skipped: {problem}", stacklevel=1)
                    continue
                found[obj.name] = obj
    return found


def misdeclared(cls: type[Strategy]) -> str | None:
    """Why `cls` cannot run as declared: a launch that is not a kind, or a member of a launch
    kind set on the strategy, where no launcher reads it."""
    if not (isinstance(cls.runs_as, type) and issubclass(cls.runs_as, Launch)):
        return f"runs_as = {cls.runs_as!r} is not a launch kind (bench.run.contract.Launch)"
    misplaced = sorted({n for klass in cls.__mro__ if issubclass(klass, Strategy) and klass is not Strategy
                        for n in vars(klass) if n in LAUNCH_MEMBERS})
    if misplaced:
        return (f"{', '.join(misplaced)} belong(s) to a launch kind, not to the strategy: set it on a subclass "
                f"of its kind ({cls.runs_as.__name__})")
    return None


def get(name: str) -> type[Strategy]:
    known = all_strategies()
    if name not in known:
        raise UsageError(f"--strategy: unknown strategy {name!r}; choose from {', '.join(sorted(known))}")
    return known[name]


def with_defaults(config: RunConfig) -> RunConfig:
    """The config with its strategy's options complete (Strategy.with_defaults)."""
    return get(config.strategy).with_defaults(config)


def default_environment(name: str, workers: int = 1) -> dict[str, str]:
    """The environment the ranks of a run of strategy `name` start with when told no options (none
    but the inherited one for a strategy whose processes are not MPI ranks)."""
    runs_as = get(name).runs_as
    if not issubclass(runs_as, MpiRanks):
        return {}
    return runs_as.environment(with_defaults(RunConfig(strategy=name, workers=workers)), None)


def baseline() -> str:
    """The strategy whose 1-worker throughput is what scaling efficiency divides by (it declares so)."""
    return next(name for name, cls in all_strategies().items() if cls.baseline)


def is_baseline(name: str) -> bool:
    return get(name).baseline


def default(under_mpi: bool) -> str:
    """What runs without --strategy: the baseline, or under mpirun the allreduce."""
    return UNDER_MPIRUN if under_mpi else baseline()


def all_options() -> list[Option]:
    """Every strategy's options, each name once (strategies may share an Option)."""
    return options_of(all_strategies())


def others_options(name: str) -> list[Option]:
    """Options that other strategies declare and strategy `name` does not take."""
    return options_elsewhere(get(name), all_strategies())
