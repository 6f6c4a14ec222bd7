"""This machine's measured peak FLOP/s, as `./run_bench.sh peak` (bench.drivers.peak) recorded it:
one JSON file per machine kind in the suite's cache, read without importing TensorFlow by whatever
computes a run's model FLOP/s utilization (bench.run.process.summary)."""

from __future__ import annotations

import json
import os
import platform
import re
from pathlib import Path

from bench.infra.gpus import computing_gpu
from bench.infra.tools import suite_cache


def cpu_model() -> str:
    """This machine's CPU, as /proc/cpuinfo names it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# the vector extensions that set what a CPU's matrix products reach (an AVX2-only CPU took 2-3x longer on the
# same TensorFlow work than one with AVX-512 and AMX of the same size)
VECTOR_EXTENSIONS = ("avx2", "avx512f", "amx_tile")


def vector_extensions() -> str:
    """This CPU's VECTOR_EXTENSIONS, as /proc/cpuinfo lists its flags ("" where none or unknown)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return " ".join(f for f in VECTOR_EXTENSIONS if f in flags)
    except OSError:
        pass
    return ""


def device_key(device: str | None = None, cpu: str | None = None, cores: int | None = None) -> str:
    """The cache's name for a device: a GPU's name, or a CPU's model and its cores (this machine's by
    default; a peak is the device's with every core it has)."""
    name = device or f"{cpu or cpu_model()} x{cores or os.cpu_count()}"
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def path(key: str) -> Path:
    return suite_cache() / "peak" / f"{key}.json"


def this_device_key() -> str:
    """The key of what TensorFlow computes on here: the GPU its CUDA build uses (nvidia-smi's name, as a run's
    devices record it), else this CPU with every core."""
    return device_key(computing_gpu())


def read(key: str | None = None) -> dict | None:
    """The recorded peak of a device (what this machine computes on by default), or None where none was measured."""
    try:
        return json.loads(path(key or this_device_key()).read_text())
    except (OSError, ValueError):
        return None


def keep_highest(new: dict, recorded: dict | None) -> dict:
    """The record to keep of a device's peak, precision by precision: a measurement on a busier machine only
    comes out lower, so the highest rate measured by the same TensorFlow stands (a comparison's MFU above 100 %
    came from a peak measured while other work ran). Another TensorFlow's figures are replaced."""
    if not recorded or recorded.get("tensorflow") != new.get("tensorflow"):
        return new
    mine, theirs = precisions(new), precisions(recorded)
    kept = {dtype: theirs[dtype] if theirs.get(dtype, {}).get("tflops", 0) > figure["tflops"] else figure
            for dtype, figure in mine.items()}
    kept.update({dtype: figure for dtype, figure in theirs.items() if dtype not in kept})
    for whole, figures in ((recorded, theirs), (new, mine)):
        if all(kept[d] is figures.get(d) for d in kept):
            return whole
    return {**new, **kept["float32"], "dtype": "float32", "by_precision": kept} if "float32" in kept else \
        {**new, "by_precision": kept}


def precisions(record: dict) -> dict[str, dict]:
    """A peak record's figures by precision (a record from before precisions: its float32 figures)."""
    if record.get("by_precision"):
        return dict(record["by_precision"])
    return {record.get("dtype", "float32"): {k: record[k] for k in ("tflops", "size", "tflops_by_size") if k in record}}


def rate(record: dict, dtype: str) -> float | None:
    """A peak record's TFLOP/s in `dtype`, or None where it was not measured."""
    figure = precisions(record).get(dtype)
    return figure.get("tflops") if figure else None


def write(record: dict, key: str) -> Path:
    target = path(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, indent=1))
    partial.replace(target)
    return target
