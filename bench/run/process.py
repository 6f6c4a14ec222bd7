"""Making this process a training process: TensorFlow imported and configured for the
strategy before its runtime starts; and how a failure in it is told in one line."""

from __future__ import annotations

from bench.config import RunConfig
from bench.run.quiet_tf import import_tensorflow_quietly, start_runtime_quietly
from strategies.base import Strategy, worker_class


def failure_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def prepare_process(config: RunConfig, strategy: type[Strategy]) -> dict:
    """Import TensorFlow and configure it for the strategy, then start its runtime (quietly)."""
    import_tensorflow_quietly()
    runtime = worker_class(strategy).configure_runtime(config)
    start_runtime_quietly()
    return runtime
