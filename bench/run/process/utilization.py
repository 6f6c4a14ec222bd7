"""A run's model FLOP/s utilization (MFU), from its records: the model's FLOPs per example (the
chief traced them: run.json's model.forward_flops_per_example), its throughput, and the peak of the
devices it ran on: `--peak-tflops` per device where given, else the peak `./run_bench.sh peak`
measured on a machine of the CPU run.json's environment names (bench.infra.peak)."""

from __future__ import annotations

import math
from typing import Any

from bench.infra import peak
from bench.metrics import mfu, model_flops_per_example

FIGURES = ("model_flops_per_example", "achieved_tflops", "peak_tflops", "mfu")


def devices(record: dict[str, Any]) -> tuple[float, str]:
    """How many machines' peaks the run had (a share of one for emulated hosts with a CPU budget
    each on one machine), and in words."""
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
    gpus = env.get("gpus") or []
    measured = peak.read(peak.device_key(gpus[0] if gpus else None, env.get("cpu_model"), env.get("cpu_count")))
    if measured is None:
        return None, "no peak measured on this machine: ./run_bench.sh peak, or --peak-tflops"
    rate = f"{measured['tflops'] * 1e3:.4g} GFLOP/s {measured['dtype']}"
    return measured["tflops"] * 1e12 * count, f"{measured['command']} on {measured['date']} ({rate}) x {where}"


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
