"""Reading run folders into one table: one row per run, the same columns for every strategy."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from bench.analysis.runs.columns import CHECKPOINT_FIGURES
from bench.analysis.runs.exposure import exposure_columns
from bench.analysis.runs.recovery import recovery_columns
from bench.analysis.runs.upgrade import upgrade
from bench.run import data as data_sources
from bench.run import models
from bench.run.process import breakdown
from bench.run.process.owner import owner_state, settle_if_abandoned
from bench.run.process.records import RUN_FILE

# what a run's strategy declared of itself (one value per GROUP_KEY setting)
DECLARED = ["family", "variant", "scaling_baseline", "asynchronous"]
GROUP_KEY = ["purpose", "strategy", "model", "data", "workers", "ps", "batch_size", "options", "link_mbit",
             "host_cores"]


def find_runs(paths: Iterable[Path]) -> list[Path]:
    """Every run folder (a folder with run.json) at or below the given paths."""
    found: set[Path] = set()
    for path in map(Path, paths):
        if (path / RUN_FILE).is_file():
            found.add(path.resolve())
        elif path.is_dir():
            found.update(p.parent.resolve() for p in path.rglob(RUN_FILE))
    return sorted(found)


def network_columns(network: dict[str, Any] | None) -> dict[str, Any]:
    """Emulated-cluster runs: the link cap, each host's CPU budget (None: the hosts shared the
    machine's cores) and, per role, the mean bytes per step measured on the
    hosts' links against the formulas, and the busiest link's utilisation."""
    network = network or {}
    out: dict[str, Any] = {"link_mbit": network.get("link_mbit"), "host_cores": network.get("host_cores"),
                           "host_cpu_period_s": network.get("host_cpu_period_s")}
    hosts = [h for h in (network.get("per_host") or {}).values() if isinstance(h, dict)]
    for role in ("worker", "ps"):
        mine = [h for h in hosts if h.get("role", "").startswith(f"{role} ")]
        for field in ("sent_per_step", "received_per_step", "predicted_sent_per_step",
                      "predicted_received_per_step"):
            values = [h[field] for h in mine if h.get(field) is not None]
            out[f"net_{role}_{field}"] = sum(values) / len(values) if values else None
        use = [h["link_utilisation"] for h in mine if h.get("link_utilisation") is not None]
        out[f"net_{role}_link_utilisation"] = max(use) if use else None
    return out


def why_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """What explains a run's step: its model FLOP/s utilization, what its slowest worker cost and the
    tensors whose exchange the compute did not hide."""
    split = summary.get("breakdown") or {}
    figures = {key: summary.get(key) for key in ("model_flops_per_example", "achieved_tflops", "peak_tflops", "mfu",
                                                  "throughput_without_slowest_examples_per_s")}
    # a run above its devices' peak proves the peak wrong (measured busier, partial, another precision): the
    # report marks the peak as suspect and prints no MFU for the run
    suspect = figures["mfu"] is not None and figures["mfu"] > 1
    return {**figures, "mfu": None if suspect else figures["mfu"], "peak_suspect": suspect,
            "waiting_caused_s": split.get("waiting_caused_s"), **exposure_columns(summary)}


def device_columns(devices: dict[str, Any] | None) -> dict[str, Any]:
    """The collective a run's first worker ran, whether its GPU tensors went through host memory (it computed on
    GPUs with a Horovod built without NCCL: its devices record's `horovod_built`), and whether its processes were
    given GPUs and computed on the CPU as asked (--on-cpu: a record's `computed_on`)."""
    every = list(devices.values()) if isinstance(devices, dict) else []
    first = every[0] if every else {}
    built = first.get("horovod_built") or {}
    return {"collective": first.get("collective"), "horovod_nccl": built.get("nccl"),
            "gpu_tensors_via_host": bool(first.get("tensorflow_gpus") and built and not built.get("nccl")),
            "cpu_on_gpu_host": any(d.get("computed_on") for d in every if isinstance(d, dict))}


def sizing_columns(record: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """How the run's steps were set (a budgeted comparison's `sizing`, else its fixed --steps), the
    interval they reached, as a share of its throughput, and why a run measured again replaces it."""
    sizing = record.get("sizing") or {}
    rate, half = summary.get("throughput_examples_per_s"), summary.get("throughput_ci95_examples_per_s")
    return {"sizing_rule": sizing.get("rule", "steps"), "budget_s": sizing.get("budget_s"),
            "measure_s_planned": sizing.get("measure_s"), "measured_steps": summary.get("measured_steps"),
            "ci95_share": half / rate if rate and half is not None else None,
            "superseded": record.get("superseded")}


def run_row(run_dir: Path) -> dict[str, Any]:
    record = upgrade(settle_if_abandoned(run_dir, json.loads((run_dir / RUN_FILE).read_text())))
    config, summary = record.get("config", {}), record.get("summary") or {}
    env = record.get("environment") or {}
    facts = record["strategy"]
    # a record still being opened has neither yet
    model, exchange = record.get("model") or {}, record.get("exchange") or {}
    split = summary.get("breakdown") or {}  # where its step time went (bench.run.process.breakdown)
    status = record.get("status", "unknown")
    if status == "running" and owner_state(record.get("owner")) == "unknown":
        status = "failed: no end was recorded, and its owner cannot be checked from this host"
    return {
        "run_id": record.get("run_id", run_dir.name), "path": str(run_dir), "status": status,
        "ok": status == "ok", "purpose": record["purpose"], "strategy": config.get("strategy"),
        # a user's model and arrays by their short names (their paths stay in run.json's config)
        "model": models.label(config.get("model") or ""), "data": data_sources.label(config.get("data") or ""),
        "workers": config.get("workers"),
        "ps": facts.get("parameter_servers", 0), "family": facts.get("family"),
        "scaling_baseline": bool(facts.get("baseline")), "asynchronous": bool(facts.get("asynchronous")),
        "exchange_overlaps_backward": bool(facts.get("exchange_overlaps_backward", True)),
        "batch_size": config.get("batch_size"), "steps": config.get("steps"),
        "warmup_steps": summary.get("warmup_steps", config.get("warmup_steps")),
        "optimizer": config.get("optimizer"), "lr": config.get("lr"),
        "options": json.dumps(config.get("options", {}), sort_keys=True),
        "started_at": record.get("started_at"),
        "throughput_examples_per_s": summary.get("throughput_examples_per_s"),
        "throughput_ci95_examples_per_s": summary.get("throughput_ci95_examples_per_s"),
        "computed_throughput_examples_per_s": summary.get("computed_throughput_examples_per_s"),
        "step_time_p50_s": summary.get("step_time_p50_s"), "step_time_p90_s": summary.get("step_time_p90_s"),
        "step_time_p99_s": summary.get("step_time_p99_s"),
        "final_accuracy": summary.get("final_accuracy"), "best_accuracy": summary.get("best_accuracy"),
        "target_accuracy": summary.get("target_accuracy"), "time_to_target_s": summary.get("time_to_target_s"),
        "steps_to_target": summary.get("steps_to_target"),
        "startup_s": summary.get("startup_s"), **why_columns(summary), **sizing_columns(record, summary),
        "gradient_bytes_per_step": model.get("gradient_bytes_per_step"),
        "bytes_sent_per_worker_per_step": exchange.get("worker_sent_per_step"),  # by its formula
        "sparse_bytes_per_step": model.get("sparse_bytes_per_step"),
        **{key: model.get(key) for key in ("table_bytes", "rows_touched_per_step", "row_bytes")},
        "table_dense": bool(facts.get("table_dense")), "wire": facts.get("wire"),
        "sparse_exchange": exchange.get("sparse_exchange"),
        "staleness_mean_steps": summary.get("staleness_mean_steps"),
        **{key: summary.get(key) for key in CHECKPOINT_FIGURES},
        **breakdown.typical_worker(split),
        "slowest_worker": split.get("slowest_worker"),
        "slowest_compute_ratio": split.get("slowest_compute_ratio"),
        "gradients_dropped": (record.get("records") or {}).get("gradients_dropped"),
        "lost_workers": ", ".join(record.get("lost_workers") or []),
        "scenario": record["scenario"], "variant": facts.get("variant"), "kill_worker": config.get("kill_worker"),
        "kill_ps": config.get("kill_ps"), **recovery_columns(summary, config),
        "straggler": config.get("straggler") or (f"random x{config['straggler_random']:g}"
                                                 if config.get("straggler_random") else None),
        "ended_s": record.get("ended_s"), "last_step": record.get("last_step"),
        "host": env.get("host"), "cpu_model": env.get("cpu_model"), "cpu_count": env.get("cpu_count"),
        "cpu_extensions": env.get("cpu_extensions"),
        "cpu_quota_cores": env.get("cpu_quota_cores"),
        "gpus": ", ".join(env.get("gpus") or []), "python": env.get("python"),
        "tensorflow": env.get("tensorflow"), "horovod": env.get("horovod"), "mpi": env.get("mpi"),
        "suite_commit": env.get("suite_commit"),
        **network_columns(record.get("network")), **device_columns(record.get("devices")),
    }


def load(paths: Iterable[Path]) -> pd.DataFrame:
    rows = []
    for run_dir in find_runs(paths):
        try:
            rows.append(run_row(run_dir))
        except (OSError, ValueError) as exc:
            rows.append({"run_id": run_dir.name, "path": str(run_dir), "status": f"failed: unreadable: {exc}",
                         "ok": False})
    frame = pd.DataFrame(rows)
    return frame.sort_values(["purpose", "model", "strategy", "workers", "run_id"]).reset_index(drop=True) \
        if not frame.empty and "purpose" in frame else frame
