"""The one check of a run's config, before any work: every value, the strategy's own
rules, the model, the data and the results folder. Returns the config with the
strategy's options complete (defaults filled in)."""

from __future__ import annotations

from bench import data, models
from bench.config import OPTIMIZERS, RunConfig, check_injection, check_numbers, check_output, check_topology
from bench.errors import UsageError
from strategies import registry
from strategies.base import IN_PROCESS, Strategy


def validate(config: RunConfig) -> RunConfig:
    """Raise UsageError naming the first problem found; else the config, options complete."""
    strategy_cls = registry.get(config.strategy)
    if config.emulated_cluster is not None and strategy_cls.launch == IN_PROCESS:
        raise UsageError(f"--emulated-cluster: {config.strategy} runs in one process; use a ps or allreduce strategy")
    models.check(config.model)
    check_numbers(config)
    check_workers(config, strategy_cls)
    if config.optimizer not in OPTIMIZERS:
        raise UsageError(f"--optimizer: {config.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    data.check(config.data, config.data_dir)
    check_topology(config)
    check_injection(config)
    config = registry.with_defaults(config)
    for opt in strategy_cls.options:
        opt.validate(config.options[opt.name])
    strategy_cls.validate(config)
    check_output(config.output)
    return config


def check_workers(config: RunConfig, strategy_cls: type[Strategy]) -> None:
    low, high = strategy_cls.worker_range
    if config.workers < low or (high is not None and config.workers > high):
        allowed = f"exactly {low}" if low == high else (f"{low} to {high}" if high else f"{low} or more")
        raise UsageError(f"--workers {config.workers}: {config.strategy} runs with {allowed} worker(s)")
