"""A run's model FLOP/s utilization (MFU), from its records: the model's FLOPs per example (the
chief traced them: run.json's model.forward_flops_per_example), its throughput, and the peak of the
devices it ran on: `--peak-tflops` per device where given, else the peak `./run_bench.sh peak`
measured on a machine of the CPU run.json's environment names (bench.infra.peak)."""

from __future__ import annotations

import math
from typing import Any

from bench.infra import peak
from bench.metrics import mfu, model_flops_per_example
from bench.run.models.precision import FLOAT32, compute_dtype

FIGURES = ("model_flops_per_example", "achieved_tflops", "peak_tflops", "mfu")


def gpus_used(record: dict[str, Any]) -> dict[str, set[str]]:
    """{host: its GPUs} that the run's processes computed on: those whose TensorFlow saw GPUs (run.json's
    `devices`, each process's own record), by UUID (an index names another GPU in each step where Slurm confines a
    step's devices); by the index their placement chose where no UUID was recorded."""
    used: dict[str, set[str]] = {}
    for process in (record.get("devices") or {}).values():
        seen = process.get("tensorflow_gpus") or []
        if seen:
            chosen = (process.get("gpu_uuids") or [g.get("uuid") for g in seen if g.get("uuid")]
                      or [str(g) for g in process.get("gpus") or []] or [str(i) for i in range(len(seen))])
            used.setdefault(process.get("host") or "?", set()).update(chosen[:len(seen)])
    return used


def gpu_name(record: dict[str, Any]) -> str | None:
    """The GPU the run computed on, by nvidia-smi's name (the key of its peak), or None: it ran on CPUs."""
    for process in (record.get("devices") or {}).values():
        for gpu in process.get("tensorflow_gpus") or []:
            return gpu.get("name") or ((record.get("environment") or {}).get("gpus") or [None])[0]
    return None


def devices(record: dict[str, Any]) -> tuple[float, str]:
    """How many devices' peaks the run had: the GPUs its processes computed on; else machines (a share of one for
    emulated hosts with a CPU budget each on one machine); and in words."""
    used = gpus_used(record)
    if used:
        count = sum(len(gpus) for gpus in used.values())
        return float(count), f"{count} GPU(s) on {len(used)} host(s)"
    env = record.get("environment") or {}
    network = record.get("network") or {}
    if network.get("hosts"):  # emulated hosts: network namespaces of this one machine
        budget, cores = network.get("host_cores"), env.get("cpu_count") or 1
        share = min(1.0, len(network["hosts"]) * budget / cores) if budget else 1.0
        return share, f"{len(network['hosts'])} emulated hosts on one machine ({share:.3g} of its cores)"
    placement = record.get("placement") or {}
    # Slurm names each process's node and address; --hosts (over ssh) the host each went to
    nodes = {h if isinstance(h, str) else h.get("node") for h in (placement.get("hosts") or {}).values()} - {None}
    if len(nodes) > 1:
        where = "nodes of a Slurm allocation" if placement.get("scheduler") == "slurm" else "hosts"
        return float(len(nodes)), f"{len(nodes)} {where}, each one device"
    return 1.0, "one machine"


def peak_flops(record: dict[str, Any]) -> tuple[float | None, str]:
    """The peak FLOP/s of the devices the run used, and where the figure comes from."""
    count, where = devices(record)
    typed = (record.get("config") or {}).get("peak_tflops")
    if typed:
        return typed * 1e12 * count, f"--peak-tflops {typed:g} per device x {where}"
    env = record.get("environment") or {}
    measured = peak.read(peak.device_key(gpu_name(record), env.get("cpu_model"), env.get("cpu_count")))
    if measured is None:
        return None, "no peak measured on this machine: ./run_bench.sh peak, or --peak-tflops"
    # the peak of the precision the run computed in (bench.run.models.precision)
    dtype = compute_dtype((record.get("config") or {}).get("precision") or FLOAT32)
    tflops = peak.rate(measured, dtype)
    if tflops is None:
        return None, f"no {dtype} peak measured on this machine: ./run_bench.sh peak measures each precision"
    rate = f"{tflops * 1e3:.4g} GFLOP/s {dtype}"
    return tflops * 1e12 * count, f"{measured['command']} on {measured['date']} ({rate}) x {where}"


def figures(record: dict[str, Any], examples_per_s: float) -> dict[str, Any]:
    """The summary's model FLOPs per example, achieved TFLOP/s, the devices' peak and the MFU (None
    where a part is unknown), and where the peak is from."""
    forward = (record.get("model") or {}).get("forward_flops_per_example")
    if forward is None or examples_per_s is None or math.isnan(examples_per_s):
        return {**dict.fromkeys(FIGURES), "peak_from": None}
    per_example = model_flops_per_example(forward)
    peak_s, source = peak_flops(record)
    return {"model_flops_per_example": per_example, "achieved_tflops": examples_per_s * per_example / 1e12,
            "peak_tflops": peak_s / 1e12 if peak_s else None,
            "mfu": mfu(examples_per_s, per_example, peak_s) if peak_s else None, "peak_from": source}
