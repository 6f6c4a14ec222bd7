"""A process's own placement, made before TensorFlow starts in it: the GPUs it sees (CUDA_VISIBLE_DEVICES,
chosen by bench.run.placement.gpus from its local rank among the GPUs the host offers), then, once TensorFlow is
imported and before its runtime starts, their memory policy: growth by default (the seed's allow_growth), or a
fraction of each GPU (its per_process_gpu_memory_fraction; a shared GPU's share). What it chose is recorded in
the run folder (devices/<role><index>.json) and run.json's `devices` collects them. The choice lives where
CUDA_VISIBLE_DEVICES does, in the process's environment (PLACEMENT), not in this module: one per process, read
back by what configures TensorFlow after it."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from bench.config import RunConfig
from bench.errors import RunFailed
from bench.infra.gpus import gpu_table
from bench.run.contract import Strategy
from bench.run.placement.gpus import (
    DEVICE_ORDER,
    GIVEN,
    NONE_VISIBLE,
    UNSET,
    VISIBLE,
    as_indices,
    choose,
    cluster_hosts,
    environment_slots,
    fraction_of,
    local_ranks,
    memory_policy,
    sharing,
    uuids_of,
)
from bench.run.placement.plan import display_role

PLACEMENT = "DISTBENCH_PLACEMENT"  # this process's placement record, and what its collective and --on-cpu decide


def _placed() -> dict[str, Any]:
    """What `apply` chose in this process ({} before it): `record`, `collectives` (on the CPU, on GPUs), `on_cpu`."""
    return json.loads(os.environ.get(PLACEMENT) or "{}")


def cluster_position(cluster: Mapping[str, Sequence[str]], needs: Mapping[str, int], role: str,
                     index: int) -> tuple[int, int]:
    """A TensorFlow task's local rank and the GPU-taking tasks on its host, from the cluster's addresses."""
    hosts = cluster_hosts(cluster)
    ranks = local_ranks(hosts, needs)
    mine = hosts[role][index]
    return ranks[(role, index)], sum(1 for r in hosts for h in hosts[r] if h == mine and needs.get(r, 0) > 0)


def apply(config: RunConfig, strategy: type[Strategy], role: str, index: int, local_rank: int,
          local_size: int = 1) -> dict[str, Any]:
    """Choose this process's GPUs and make them the only ones it sees (before TensorFlow starts); returns what
    was chosen. On a host with no GPU found or declared nothing is changed. Raises PlacementError (a UsageError)
    for GPUs the host cannot give this process."""
    need = strategy.gpus(config).get(role, 0)
    slots, bound = environment_slots(config.gpus_per_host)
    gpus = choose(need, local_rank, slots, config.share_gpus, bound)
    if slots:
        os.environ.setdefault(GIVEN, os.environ.get(VISIBLE, UNSET))
        os.environ[VISIBLE] = ",".join(gpus) or NONE_VISIBLE
        os.environ.setdefault(*DEVICE_ORDER)
    shared_by = sharing([need] * max(1, local_size), len(slots)) if config.share_gpus else 1
    record = {
        "host": socket.gethostname(), "role": display_role(strategy, config, role), "index": index,
        "local_rank": local_rank, "gpus": as_indices(gpus), "gpu_uuids": uuids_of(gpus, gpu_table()),
        "cuda_visible_devices": os.environ.get(VISIBLE),
        "given_cuda_visible_devices": None if os.environ.get(GIVEN, UNSET) == UNSET else os.environ[GIVEN],
        "bound_by_slurm": bound, "gpus_declared": config.gpus_per_host,
        "memory": memory_policy(config.gpu_memory_fraction, shared_by) if gpus else None,
        "collective": strategy.collective(config, role, bool(gpus))}
    # the collective follows what TensorFlow will see (configure_memory): both answers decided here
    os.environ[PLACEMENT] = json.dumps({"record": record, "on_cpu": config.on_cpu,
                                        "collectives": [strategy.collective(config, role, on) for on in (False, True)]})
    return dict(record)


def configure_memory() -> dict[str, Any]:
    """After TensorFlow's import, before its runtime starts: each visible GPU's memory policy, and what TensorFlow
    sees (its GPUs with nvidia-smi's name and UUID); returns this process's placement record, completed."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    placed = _placed()
    chosen_ = placed.get("record") or {}
    if chosen_:
        gpus = on_cpu_or_refused(gpus, chosen_, placed["on_cpu"])
    fraction = fraction_of(chosen_.get("memory"))
    table = {row["uuid"]: row for row in gpu_table()}
    uuids = chosen_.get("gpu_uuids") or [row["uuid"] for row in gpu_table()]
    seen = []
    for position, gpu in enumerate(gpus):
        row = table.get(uuids[position], {}) if position < len(uuids) else {}
        if fraction is not None and row.get("memory_mib", "").isdigit():
            limit = int(int(row["memory_mib"]) * fraction)
            tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])
        else:
            tf.config.experimental.set_memory_growth(gpu, True)
        seen.append({"device": gpu.name, "name": row.get("name"), "uuid": row.get("uuid")})
    if not chosen_:  # a process that chose nothing (a test's own): TensorFlow's defaults but growth
        return {}
    chosen_["tensorflow_gpus"] = seen
    # the collective it runs: on GPUs only where TensorFlow computes on them (the CPU build sees none)
    chosen_["collective"] = placed["collectives"][bool(seen)]
    os.environ[PLACEMENT] = json.dumps({**placed, "record": chosen_})
    return dict(chosen_)


def on_cpu_or_refused(seen: list, placed: dict[str, Any], on_cpu: bool) -> list:
    """The GPUs TensorFlow computes on. A process given GPUs that nvidia-smi lists, whose TensorFlow sees none (its
    CPU build, a driver it cannot load), fails in one line, rather than training on the CPU unsaid; with `on_cpu`
    (--on-cpu: a CPU run on a GPU host) it hides every GPU from TensorFlow and its record says so."""
    import tensorflow as tf

    if on_cpu:
        if seen:
            tf.config.set_visible_devices([], "GPU")
        if placed.get("gpus"):
            placed["computed_on"] = "cpu (--on-cpu)"
        return []
    if placed.get("gpu_uuids") and not seen:
        raise RunFailed(f"given GPU(s) {','.join(map(str, placed['gpus']))} but TensorFlow sees none: "
                        f"{cpu_reason()}; --on-cpu runs on the CPU on purpose")
    return seen


def cpu_reason() -> str:
    """Why TensorFlow may see no GPU where nvidia-smi lists some, in a few words."""
    import tensorflow as tf

    if not tf.test.is_built_with_cuda():
        return "this TensorFlow is a CPU build (./run_bench.sh setup --gpu installs the CUDA one)"
    return "its CUDA libraries or the driver did not load (TF_CPP_MIN_LOG_LEVEL=0 shows TensorFlow's reason)"


def chosen() -> dict[str, Any]:
    """This process's placement record (empty before `apply`)."""
    return _placed().get("record") or {}


def session_gpu_options(proto: Any) -> Any:
    """A TensorFlow 1 ConfigProto with this process's GPU memory policy (a v1 server or session creates its GPU
    devices from its own config, not from tf.config)."""
    placed = chosen()
    fraction = fraction_of(placed.get("memory"))
    if placed.get("computed_on"):  # --on-cpu
        proto.device_count["GPU"] = 0
    elif fraction is not None:
        proto.gpu_options.per_process_gpu_memory_fraction = fraction
    elif placed.get("gpus"):
        proto.gpu_options.allow_growth = True
    return proto
