"""Turns a validated config into the processes of a run, by the strategy's `launch` kind."""

from __future__ import annotations

import time
import traceback

from bench.config import RunConfig
from bench.harness import run_worker
from bench.interrupts import Interrupted, interruptible
from bench.lifecycle import close_run, open_run
from bench.quiet_tf import import_tensorflow_quietly, start_runtime_quietly
from bench.usage import refuse
from strategies import registry
from strategies.base import IN_PROCESS, MPI, TF_CLUSTER, WorkerContext


def failure_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def prepare_process(config: RunConfig) -> dict:
    """Import TensorFlow and configure it for the strategy, then start its runtime (quietly)."""
    import_tensorflow_quietly()
    runtime = registry.get(config.strategy).implementation().configure_runtime(config)
    start_runtime_quietly()
    return runtime


def run_in_process(config: RunConfig) -> int:
    runtime = prepare_process(config)
    run_start = time.time()
    folder = open_run(config, run_start)
    try:
        with interruptible():  # as the multi-process launchers' supervisor is
            outcome = run_worker(config, WorkerContext(run_start=run_start, run_dir=str(folder.path)), folder)
    except Interrupted as exc:
        close_run(folder, config, f"interrupted ({exc})")
        return 130
    except Exception as exc:  # noqa: BLE001 - any failure is recorded, then reported
        traceback.print_exc()
        close_run(folder, config, f"failed: {failure_reason(exc)}")
        return 1
    close_run(folder, config, "ok", startup_s=outcome.startup_s, runtime=runtime,
              strategy_info=outcome.strategy_info)
    return 0


def launch(config: RunConfig) -> int:
    kind = registry.get(config.strategy).launch
    if kind == IN_PROCESS:
        return run_in_process(config)
    if kind == TF_CLUSTER:
        from bench import cluster_launcher

        return cluster_launcher.launch(config)
    if kind == MPI:
        from bench import mpi_launcher

        return mpi_launcher.launch(config)
    return refuse(f"strategy {config.strategy} has unknown launch kind {kind!r}")
