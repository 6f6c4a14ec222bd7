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
    """The record to keep of a device's peak: a measurement on a busier machine only comes out lower, so the
    highest rate measured by the same TensorFlow in the same precision stands (a comparison's MFU above 100 %
    came from a peak measured while other work ran)."""
    same = recorded and all(recorded.get(k) == new.get(k) for k in ("tensorflow", "dtype"))
    return recorded if same and recorded.get("tflops", 0) > new["tflops"] else new


def write(record: dict, key: str) -> Path:
    target = path(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, indent=1))
    partial.replace(target)
    return target
