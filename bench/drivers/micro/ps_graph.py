"""The push-and-pull graph both ps measurements time (the micro-benchmark's round trip and
`python -m bench profile`'s): a worker's variables assigned into variables on ps tasks, then
read back."""

from __future__ import annotations

import numpy as np


def push_pull(tf, index: int, tasks: int, nbytes: int, tensors_per_task: int, prefix: str = "remote"):
    """(graph, init, pull): worker `index`'s `nbytes` split evenly over `tasks` ps tasks, each
    task's share into `tensors_per_task` variables; `pull` runs the push, then the pull."""
    graph = tf.Graph()
    with graph.as_default():
        parts = np.array_split(np.ones(nbytes // 4, np.float32), tasks * tensors_per_task)
        with tf.device(f"/job:worker/task:{index}"):
            local = [tf.compat.v1.Variable(p, name=f"local{i}") for i, p in enumerate(parts)]
        remote = []
        for i, p in enumerate(parts):
            with tf.device(f"/job:ps/task:{i % tasks}"):
                remote.append(tf.compat.v1.Variable(np.zeros_like(p), name=f"{prefix}{i}"))
        push = [r.assign(v, read_value=False) for r, v in zip(remote, local, strict=True)]
        with tf.control_dependencies(push), tf.device(f"/job:worker/task:{index}"):
            pull = tf.group([v.assign(r, read_value=False) for v, r in zip(local, remote, strict=True)])
        init = tf.compat.v1.variables_initializer([*local, *remote])
    return graph, init, pull
