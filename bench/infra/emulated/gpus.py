"""GPUs as Slurm sees them on the emulated hosts: each host declares G GPUs (slurm.conf's `Gres=gpu:G`, a gres.conf
line naming G character device files of the NVIDIA driver's major, made with mknod under the host's own folder), so
that real slurmd and slurmstepd bind GPUs to job steps (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS) as on a cluster.
No driver stands behind them: TensorFlow sees no GPU. A stand-in nvidia-smi (bench/infra/emulated/nvidia_smi), on
the PATH that `cluster env` gives, lists each host's GPUs, each with a UUID of its own."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

NVIDIA_MAJOR = 195  # the NVIDIA driver's character device major (/dev/nvidia0 is c 195 0)
NAME = "emulated GPU (Slurm GRES; no device)"
MEMORY_MIB = 16384
STAND_IN = Path(__file__).with_name("nvidia_smi")


def uuid_of(cluster: str, node: str, index: int) -> str:
    """A GPU's UUID in nvidia-smi's form, the same for the same cluster, node and index."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{cluster}.{node}.gpu{index}')}"


def device_files(state: Path, node: str, count: int) -> str:
    """Make the node's `count` device files; gres.conf's File= for them."""
    folder = state / "devs" / node
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        path = folder / f"nvidia{k}"
        if not path.exists():
            os.mknod(path, 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, k))  # a character device
    return str(folder / (f"nvidia[0-{count - 1}]" if count > 1 else "nvidia0"))


def declare(state: Path, cluster: str, nodes: list[str], count: int) -> str:
    """Declare `count` GPUs on each of `nodes`: device files, gres.conf beside slurm.conf, the stand-in nvidia-smi
    and its tables; returns the GRES a node line carries (empty where `count` is 0)."""
    if not count:
        return ""
    lines = [f"NodeName={node} Name=gpu File={device_files(state, node, count)}" for node in nodes]
    (state / "gres.conf").write_text("\n".join(lines) + "\n")
    tables = state / "gpus"
    tables.mkdir(exist_ok=True)
    for node in nodes:
        (tables / f"{node}.csv").write_text("".join(f"{k},{NAME},{uuid_of(cluster, node, k)},{MEMORY_MIB}\n"
                                                   for k in range(count)))
    bin_dir = state / "bin"
    bin_dir.mkdir(exist_ok=True)
    shutil.copy(STAND_IN, bin_dir / "nvidia-smi")
    return f" Gres=gpu:{count}"


def bin_dir(state: Path) -> Path | None:
    """Where the stand-in nvidia-smi is, where the cluster declares GPUs."""
    folder = state / "bin"
    return folder if (folder / "nvidia-smi").exists() else None
