"""TF_CONFIG, the cluster description TensorFlow's distributed runtime reads: written for
the processes a launcher starts, read from a user's environment on a multi-host run."""

from __future__ import annotations

import json

from bench.config import RunConfig
from bench.errors import UsageError


def tf_config(cluster: dict[str, list[str]], role: str, index: int) -> str:
    """TF_CONFIG of task `index` of `role` in `cluster` ({"ps": [...], "worker": [...]})."""
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})


def topology_from_tf_config(text: str) -> dict:
    """--ps-hosts/--worker-hosts/--job-name/--task-index from a TF_CONFIG value."""
    try:
        spec = json.loads(text)
        cluster, task = spec["cluster"], spec.get("task", {})
        return {"worker_hosts": tuple(cluster.get("worker", ())) + tuple(cluster.get("chief", ())),
                "ps_hosts": tuple(cluster.get("ps", ())), "job_name": task.get("type"),
                "task_index": task.get("index")}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"TF_CONFIG is not valid cluster JSON: {exc}") from None


def hand_started_cluster(config: RunConfig) -> dict[str, list[str]]:
    """The cluster a task started by hand names in its flags (--worker-hosts, --ps-hosts, --chief-host)."""
    cluster = {"worker": list(config.worker_hosts)}
    if config.ps_hosts:
        cluster["ps"] = list(config.ps_hosts)
    if config.chief_host:
        cluster["chief"] = [config.chief_host]
    return cluster
