"""Being one training process of a run, the one way the in-process run, a TF-cluster worker
task and an MPI rank all take: TensorFlow imported and configured for the strategy before its
runtime starts (`prepare_process`), then training to the report its launcher reads (`train`),
a failure told in one line."""

from __future__ import annotations

import traceback
from typing import Any

from bench.config import RunConfig
from bench.infra.gpus import horovod_built
from bench.run.contract import Strategy, WorkerContext, worker_class
from bench.run.placement import visible
from bench.run.process import environment
from bench.run.process.harness import run_worker
from bench.run.process.lifecycle import joined_run
from bench.run.process.records import RunFolder
from bench.run.quiet_tf import import_tensorflow_quietly, start_runtime_quietly


def failure_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def failure_report(exc: BaseException) -> dict[str, str]:
    """A process's report of a failure: its traceback to stderr, its one line under `error`."""
    traceback.print_exc()
    return {"error": failure_reason(exc)}


def prepare_process(config: RunConfig, strategy: type[Strategy]) -> dict:
    """Import TensorFlow and configure it for the strategy, then start its runtime (quietly)."""
    import_tensorflow_quietly()
    placed = visible.configure_memory()
    runtime = worker_class(strategy).configure_runtime(config)
    start_runtime_quietly()
    return {**runtime, "devices": placed}


def train(config: RunConfig, strategy: type[Strategy], context: WorkerContext, folder: RunFolder,
          runtime: dict, show_progress: bool = True) -> dict[str, Any]:
    """Train this process's worker to the run's end. Returns its report: `runtime` (what
    prepare_process did), the chief's `environment` (the machine it ran on), `startup_s`, `local_steps` and
    `strategy_info`; or, when training raised, `error` (the failure's one line; its traceback went to
    stderr). An interruption (a KeyboardInterrupt) is not a failure of training and goes up to the caller."""
    if (runtime.get("devices") or {}).get("role"):
        folder.write_devices(runtime["devices"]["role"], runtime["devices"]["index"], runtime["devices"])
    try:
        outcome = run_worker(config, strategy, context, folder, show_progress=show_progress)
    except Exception as exc:  # noqa: BLE001 - any failure is recorded by the caller, from the report
        report = failure_report(exc)
    else:
        report = {"startup_s": outcome.startup_s, "local_steps": outcome.local_steps,
                  "strategy_info": outcome.strategy_info}
    built = horovod_built()
    if built is not None and (runtime.get("devices") or {}).get("role"):  # what its allreduce could run on
        runtime["devices"]["horovod_built"] = built
        folder.write_devices(runtime["devices"]["role"], runtime["devices"]["index"], runtime["devices"])
    # described after the steps, which it does not delay: a launcher, maybe on another machine (--hosts
    # from a laptop), opened run.json with its own machine's description, and the chief's is the one the
    # run's throughput and MFU belong to (bench.run.launch.close); a process that opened it has described it
    here = {"environment": environment.describe()} if context.is_chief and joined_run() else {}
    return {"runtime": runtime, **here, **report}
