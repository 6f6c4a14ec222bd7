"""A run's GPU flags refused in one line before anything starts: their numbers, and towers only where the
strategy's worker drives them. A placement the hosts cannot give is refused by the plan
(bench.run.placement.plan.check_hosts) and a process's choice (bench.run.placement.gpus.choose)."""

from __future__ import annotations

from bench.config import RunConfig
from bench.errors import UsageError
from bench.run.contract import Strategy


def check_numbers(config: RunConfig) -> None:
    if config.gpus_per_host is not None and config.gpus_per_host < 0:
        raise UsageError(f"--gpus-per-host: must be >= 0, got {config.gpus_per_host}")
    if config.gpus_per_worker < 1:
        raise UsageError(f"--gpus-per-worker: must be >= 1, got {config.gpus_per_worker}")
    if config.gpus_per_ps < 0:
        raise UsageError(f"--gpus-per-ps: must be >= 0, got {config.gpus_per_ps}")
    if config.gpu_memory_fraction is not None and not 0 < config.gpu_memory_fraction <= 1:
        raise UsageError(f"--gpu-memory-fraction: must be in (0, 1], got {config.gpu_memory_fraction}")


def check_towers(config: RunConfig, strategy_cls: type[Strategy]) -> None:
    """A worker of several GPUs only where the strategy's worker drives them as towers."""
    k = config.gpus_per_worker
    if k > 1 and not strategy_cls.worker_towers:
        raise UsageError(f"--gpus-per-worker {k}: a {config.strategy} worker drives one device; run "
                         f"--workers {config.workers * k} (a process a GPU) instead")
