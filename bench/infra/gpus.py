"""This machine's GPUs as nvidia-smi lists them, read without TensorFlow (which would start CUDA in a process
that must choose its GPUs first: bench.run.placement)."""

from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess
from pathlib import Path

from bench.infra.tools import version


@functools.cache  # a host's GPUs do not change while a process lives: nvidia-smi once a process
def gpu_table() -> list[dict[str, str]]:
    """nvidia-smi's index, name, UUID and total memory (MiB) of each GPU of this host ([] without nvidia-smi)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,uuid,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    return [{"index": r[0], "name": r[1], "uuid": r[2], "memory_mib": r[3]} for r in rows if len(r) == 4]


def tensorflow_build() -> str:
    """"cuda" or "cpu": TensorFlow's own answer where this process imported it (a `tensorflow` package may be a CPU
    build too), else by the package installed (tensorflow-cpu), without importing it."""
    import sys

    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "test"):
        return "cuda" if tf.test.is_built_with_cuda() else "cpu"
    return "cpu" if version("tensorflow-cpu") else "cuda"


def computing_gpu() -> str | None:
    """The GPU this machine's TensorFlow computes on (its first, by nvidia-smi's name), or None: no GPU, or the CPU
    build of TensorFlow, which computes on the CPU wherever it runs."""
    table = gpu_table()
    return table[0]["name"] if table and tensorflow_build() == "cuda" else None


def horovod_links_nccl() -> bool:
    """Whether Horovod's TensorFlow extension was built with NCCL (its mpi_lib names libnccl among the libraries
    it needs), read from the file without loading it (that would import TensorFlow)."""
    try:
        spec = importlib.util.find_spec("horovod.tensorflow")
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None:
        return False
    return any(b"libnccl.so" in lib.read_bytes() for lib in Path(spec.origin).parent.glob("mpi_lib*.so"))


def horovod_built() -> dict[str, bool] | None:
    """What Horovod, where this process imported it, says it was built with (hvd.nccl_built() and the rest): a GPU
    allreduce without NCCL reduces GPU tensors through host memory. None where Horovod was not imported."""
    import sys

    hvd = sys.modules.get("horovod.tensorflow")
    if hvd is None:
        return None
    said = {}
    for name in ("nccl", "cuda", "mpi", "gloo"):
        try:
            said[name] = bool(getattr(hvd, f"{name}_built")())
        except Exception:  # noqa: BLE001 - a Horovod without the query leaves it out
            continue
    return said
