"""Benchmarks of one client process: the memory-copy ceiling, and push/pull of one tensor
through real parameter-server processes (tf.distribute.Server) on loopback."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from bench.drivers.micro import settings
from bench.drivers.micro.ps_graph import push_pull
from bench.metrics import COPY_OP, PS_ROUNDTRIP_OP, algbw, busbw

# one task of a cluster, a process of its own: argv cluster (JSON), role, index
SERVER = "import sys, json; from bench.run.quiet_tf import import_tensorflow_quietly; " \
         "import_tensorflow_quietly(); import tensorflow as tf; c = json.loads(sys.argv[1]); " \
         "tf.distribute.Server(tf.train.ClusterSpec(c), sys.argv[2], int(sys.argv[3])).join()"


def record(benchmark, name: str, kind: str, processes: int, nbytes: int, tensors: int = 1) -> None:
    """`tensors`: how many the bytes were split into, per process (per ps task)."""
    seconds = benchmark.stats.stats.median
    benchmark.extra_info.update(transport=name, kind=kind, processes=processes, bytes=nbytes, tensors=tensors,
                                algbw_bytes_per_s=algbw(nbytes, seconds),
                                busbw_bytes_per_s=busbw(kind, nbytes, seconds, processes))


@pytest.mark.parametrize("nbytes", settings.sizes(), ids=settings.label)
def test_memory_copy(benchmark, nbytes):
    if settings.transport() not in ("", "copy"):
        pytest.skip("another transport is being measured")
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    benchmark.group = f"copy {settings.label(nbytes)}"
    benchmark.pedantic(np.copyto, args=(dst, src), rounds=settings.rounds() * 3, iterations=1, warmup_rounds=1)
    record(benchmark, "memory-copy", COPY_OP, 1, nbytes)


@pytest.fixture(scope="module", params=[1, 2], ids=lambda k: f"{k}ps")
def ps_cluster(request):
    if settings.transport() not in ("", "ps"):
        pytest.skip("another transport is being measured")
    import json

    import tensorflow as tf

    from bench.infra.tools import free_ports

    tasks = request.param
    ports = free_ports(tasks + 1)
    cluster = {"ps": [f"127.0.0.1:{p}" for p in ports[:tasks]], "worker": [f"127.0.0.1:{ports[-1]}"]}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    servers = [subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(cluster), "ps", str(i)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(tasks)]
    try:  # the ps tasks are ended however the benchmarks end
        yield tasks, tf.distribute.Server(tf.train.ClusterSpec(cluster), "worker", 0)
    finally:
        for server in servers:
            server.kill()
            server.wait()


def round_trip(benchmark, ps_cluster, nbytes: int, tensors_per_task: int) -> None:
    """The worker's `nbytes` to the ps tasks (split evenly, each task's share into
    `tensors_per_task` variables), then back; timed."""
    import tensorflow as tf

    tasks, worker = ps_cluster
    graph, init, pull = push_pull(tf, 0, tasks, nbytes, tensors_per_task)
    with tf.compat.v1.Session(worker.target, graph=graph) as sess:
        sess.run(init)
        step = sess.make_callable(pull)
        step()
        benchmark.pedantic(step, rounds=settings.rounds() * settings.PS_ROUNDS_FACTOR, iterations=1, warmup_rounds=1)
    record(benchmark, f"ps-{tasks}ps", PS_ROUNDTRIP_OP, tasks + 1, nbytes, tensors_per_task)


@pytest.mark.parametrize("nbytes", settings.sizes(), ids=settings.label)
def test_ps_push_pull(benchmark, ps_cluster, nbytes):
    """One round trip: the worker's tensor to the ps tasks (split evenly), then back."""
    benchmark.group = f"ps {settings.label(nbytes)}"
    round_trip(benchmark, ps_cluster, nbytes, 1)


@pytest.mark.parametrize("tensors", settings.PS_TENSORS)
def test_ps_push_pull_of_many_tensors(benchmark, ps_cluster, tensors):
    """The same bytes in more variables: a ps task's cost per tensor (each its own message)."""
    benchmark.group = f"ps {settings.label(settings.PS_TENSORS_BYTES)} in tensors"
    round_trip(benchmark, ps_cluster, settings.PS_TENSORS_BYTES, tensors)
