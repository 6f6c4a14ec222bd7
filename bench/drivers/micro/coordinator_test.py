"""Benchmark of TensorFlow 2's parameter-server path (ps-coordinator's): this process is the
coordinator of a ParameterServerStrategy over one ps and one worker task (tf.distribute.Server
processes on loopback) and times one scheduled function that pushes the worker's tensor to the
ps task and pulls it back: a ps round trip plus the coordinator's dispatch and fetch, which is
what each of ps-coordinator's functions pays once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bench.drivers.micro import settings
from bench.drivers.micro.local_test import SERVER, record
from bench.metrics import PS_ROUNDTRIP_OP

TRANSPORT = "coordinator"


@pytest.fixture(scope="module")
def coordinator():
    if settings.transport() not in ("", TRANSPORT):
        pytest.skip("another transport is being measured")
    from bench.infra.tools import free_ports
    from bench.run.quiet_tf import import_tensorflow_quietly

    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")  # TensorFlow's parameter-server tutorial
    import_tensorflow_quietly()
    import tensorflow as tf
    ps, worker, chief = (f"127.0.0.1:{p}" for p in free_ports(3))
    cluster = {"ps": [ps], "worker": [worker], "chief": [chief]}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    servers = [subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(cluster), role, "0"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for role in ("ps", "worker")]
    try:  # the servers are ended however the benchmarks end, a failed connection included
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        yield strategy, tf.distribute.coordinator.ClusterCoordinator(strategy)
    finally:
        for server in servers:
            server.kill()
            server.wait()


@pytest.mark.parametrize("nbytes", settings.sizes(), ids=settings.label)
def test_coordinator_push_pull(benchmark, coordinator, nbytes):
    import tensorflow as tf

    strategy, clusters = coordinator
    with strategy.scope():
        remote = tf.Variable(np.zeros(nbytes // 4, np.float32))

    @tf.function
    def round_trip():
        # runs on the worker: its tensor to the ps task's variable, and the variable's value back
        remote.assign(tf.fill([nbytes // 4], 1.0), read_value=False)
        return tf.reduce_sum(remote.read_value())

    def scheduled() -> float:
        return clusters.schedule(round_trip).fetch()

    assert scheduled() == nbytes // 4  # it moved what it says
    benchmark.group = f"ps {settings.label(nbytes)}"
    benchmark.pedantic(scheduled, rounds=settings.rounds() * settings.PS_ROUNDS_FACTOR, iterations=1, warmup_rounds=1)
    record(benchmark, f"{TRANSPORT}-1ps", PS_ROUNDTRIP_OP, 3, nbytes)


@pytest.mark.parametrize("functions", [settings.COORDINATOR_FUNCTIONS])
def test_coordinator_dispatch(benchmark, coordinator, functions):
    """The coordinator's own rate: many empty functions in flight at once, the time per function
    (what caps ps-coordinator's steps per second, however many workers it has, over K steps each)."""
    import tensorflow as tf

    strategy, clusters = coordinator

    @tf.function
    def empty():
        return tf.constant(0)

    def dispatch_all() -> None:
        for _ in range(functions):
            clusters.schedule(empty)
        clusters.join()

    dispatch_all()
    benchmark.group = "coordinator dispatch"
    benchmark.pedantic(dispatch_all, rounds=settings.rounds(), iterations=1, warmup_rounds=0)
    seconds = benchmark.stats.stats.median
    benchmark.extra_info.update(transport=f"{TRANSPORT}-dispatch", kind="dispatch", processes=3, functions=functions,
                                function_s=seconds / functions)
