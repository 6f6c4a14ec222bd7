"""Opening and closing a run folder: run.json at the start and at the end."""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from typing import Any

from bench.config import RunConfig
from bench.metrics import Gradient, significant
from bench.run import data as data_sources
from bench.run import models
from bench.run.contract import Strategy
from bench.run.process import environment
from bench.run.process.owner import describe_owner
from bench.run.process.records import RunFolder
from bench.run.process.schema import identity

# Set by a launcher for the processes it starts: they join its run folder instead of opening one.
RUN_DIR_VARIABLE = "DISTBENCH_RUN_DIR"
RUN_START_VARIABLE = "DISTBENCH_RUN_START"


def joined_run() -> tuple[RunFolder, float] | None:
    """The launcher's run folder and start time, when this process was started by one."""
    if RUN_DIR_VARIABLE not in os.environ:
        return None
    return RunFolder(os.environ[RUN_DIR_VARIABLE]), float(os.environ[RUN_START_VARIABLE])


def join_environment(folder: RunFolder, run_start: float) -> dict[str, str]:
    return {RUN_DIR_VARIABLE: str(folder.path), RUN_START_VARIABLE: repr(run_start)}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def run_label(config: RunConfig) -> str:
    if config.run_name:
        return config.run_name
    return f"{config.strategy}-{models.label(config.model)}-{data_sources.label(config.data)}-w{config.workers}"


def start_run(config: RunConfig, strategy: type[Strategy]) -> tuple[RunFolder, float]:
    """The run's folder and start (epoch seconds every process measures from): a new one, or a
    resumed run's own (bench.run.process.resume)."""
    if config.resume_from:
        from bench.run.process.resume import reopen_run

        return reopen_run(config)
    run_start = time.time()
    return open_run(config, strategy, run_start), run_start


def open_run(config: RunConfig, strategy: type[Strategy], run_start: float,
             folder: RunFolder | None = None) -> RunFolder:
    folder = folder or RunFolder.create(config.output, run_label(config))
    folder.update_run(
        **identity(config.to_dict()), run_id=folder.run_id, status="running", owner=describe_owner(),
        started_at=_now(),
        run_start_epoch_s=run_start,
        config=config.to_dict(), strategy=strategy.facts(config), strategy_description=strategy.description,
        environment=environment.describe(),
        model={"name": models.label(config.model)},  # the chief adds the model's facts once it has built it
    )
    return folder


def model_facts(model: Any, rows_touched: float) -> dict[str, Any]:
    """run.json's "model" facts of a built bench.run.models.Model whose batches touch `rows_touched`
    distinct rows of its tables (measured on them): the bytes its gradient is made of."""
    table = model.table_bytes
    gradient = Gradient(model.gradient_bytes - table, table, rows_touched if table else 0.0, model.row_bytes)
    facts = {"num_params": model.num_params, "gradient_bytes_per_step": model.gradient_bytes,
             "input_shape": list(model.input_shape), "compute_dtype": model.compute_dtype.name}
    policies = getattr(model, "dtype_policies", None)  # a Keras model's layers: each holds its own
    if policies is not None:
        facts["dtype_policies"] = policies
    if table:
        facts.update(dense_bytes=gradient.dense_bytes, table_bytes=table, table_rows=int(sum(t.shape[0] for t in
                     model.tables)), row_bytes=gradient.row_bytes, rows_touched_per_step=rows_touched,
                     sparse_bytes_per_step=gradient.slices_bytes)
    return facts


def exchange_facts(config: RunConfig, strategy: type[Strategy], model: dict[str, Any]) -> dict[str, Any]:
    """run.json's "exchange": bytes per worker step by the strategy's formula (bench.metrics),
    per role, and how it moves a table's sparse gradient."""
    gradient = Gradient.from_facts(model)
    out: dict[str, Any] = {f"{role}_{way}_per_step": value for role, pair in
                           strategy.traffic(config, gradient).items() for way, value in zip(("sent", "received"), pair)}
    if gradient.table_bytes:
        out["sparse_exchange"] = strategy.sparse_exchange(config).how
    return out


def close_run(folder: RunFolder, config: RunConfig, status: str, **fields: Any) -> dict[str, Any]:
    """Write the final status and the summary figures; print where the run went."""
    from bench.run.process.summary import summarize  # pandas: only the process that closes the run

    devices = folder.device_reports()
    if devices:  # before the summary: the MFU counts the devices the run's processes used
        folder.update_run(devices=devices)
    try:
        summary = summarize(folder.path, config.warmup_steps, config.target_accuracy, write_breakdown=True)
    except Exception as exc:  # noqa: BLE001 - a run with unreadable records still gets its status
        summary = {"error": f"summary could not be computed: {exc}"}
    start = folder.read_run().get("run_start_epoch_s")
    ended_s = time.time() - start if start else None
    record = folder.update_run(status=status, ended_at=_now(), ended_s=ended_s, summary=summary, **fields)
    print(one_line(record), file=sys.stderr, flush=True)
    return record


def exit_status(status: str) -> int:
    """The launcher's exit status for a run's final status: 0 ok, 130 interrupted (as a shell
    reports Ctrl-C), 1 failed."""
    if status == "ok":
        return 0
    return 130 if status.startswith("interrupted") else 1


def one_line(record: dict[str, Any]) -> str:
    summary = record.get("summary") or {}
    parts = [f"{record['run_id']}: {record['status']}"]
    if summary.get("throughput_examples_per_s") is not None:
        ci = summary.get("throughput_ci95_examples_per_s")
        parts.append(significant(summary["throughput_examples_per_s"])
                     + (f" ± {significant(ci)}" if ci is not None else "") + " examples/s (95% CI)")
    if summary.get("final_accuracy") is not None:
        parts.append(f"accuracy {summary['final_accuracy']:.4f}")
    return ", ".join(parts)
