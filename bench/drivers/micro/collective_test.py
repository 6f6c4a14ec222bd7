"""Allreduce benchmarks, run by every rank at once (pytest under mpirun or horovodrun).

Each round starts from a barrier (not timed) so that the timed call is the collective
alone; every rank runs the same fixed rounds, so no rank waits for another's calibration.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest

from bench.drivers.micro import message_ring, settings
from bench.drivers.micro.message_ring import Computing
from bench.metrics import ALLREDUCE_OP, algbw, busbw


class MPI4Py:
    def __init__(self) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        self.op = MPI.SUM
        self.size = self.comm.Get_size()

    def prepare(self, nbytes: int):
        send = np.ones(nbytes // 4, np.float32)
        recv = np.empty_like(send)
        return lambda: self.comm.Allreduce(send, recv, op=self.op)

    def barrier(self) -> None:
        self.comm.Barrier()


class Horovod:
    def __init__(self) -> None:
        from bench.run.quiet_tf import import_horovod_without_keras

        import_horovod_without_keras()  # as a training rank does: no Keras (3.6 s of every rank's start-up here)
        import horovod.tensorflow as hvd
        import tensorflow as tf

        hvd.init()
        self.hvd, self.tf = hvd, tf
        self.size = hvd.size()
        self._token = tf.zeros([1])

    def prepare(self, nbytes: int):
        tensor = self.tf.ones([nbytes // 4], self.tf.float32)
        name = f"bench_{nbytes}"
        return lambda: self.hvd.allreduce(tensor, op=self.hvd.Sum, name=name).numpy()

    def barrier(self) -> None:
        self.hvd.allreduce(self._token, name="barrier").numpy()

    @functools.cached_property
    def compute(self):
        """A step's worth of CPU compute in TensorFlow's own thread pools, as a training rank's (traced
        once, for every test that times it)."""
        tf = self.tf
        x = tf.random.stateless_normal([COMPUTE_SIDE, COMPUTE_SIDE], seed=(1, 2))

        @tf.function
        def work():
            y = x
            for _ in range(COMPUTE_MATMULS):
                y = tf.tanh(tf.matmul(y, x))
            return tf.reduce_sum(y)

        return lambda: work().numpy()


# the compute timed beside Horovod's loop: 48 matmuls of settings.COMPUTE_SIDE (its comment says why)
COMPUTE_SIDE, COMPUTE_MATMULS = settings.COMPUTE_SIDE, 48


class TFCollective:
    def __init__(self) -> None:
        import tensorflow as tf

        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        self.tf = tf
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        self.size = self.strategy.num_replicas_in_sync
        self._barrier = self._compile(tf.zeros([1]))

    def _compile(self, tensor):
        tf, strategy = self.tf, self.strategy

        @tf.function
        def reduce():
            return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("sum", tensor))

        return lambda: strategy.experimental_local_results(reduce())[0].numpy()

    def prepare(self, nbytes: int):
        return self._compile(self.tf.ones([nbytes // 4], self.tf.float32))

    def barrier(self) -> None:
        self._barrier()


TRANSPORTS = {"mpi4py": MPI4Py, "horovod-mpi": Horovod, "horovod-mpi-tuned": Horovod, "horovod-gloo": Horovod,
              "tf-collective": TFCollective}


@pytest.fixture(scope="module")
def transport():
    name = settings.transport()
    if name not in TRANSPORTS:
        pytest.skip("run through `python -m bench micro`, which starts the ranks")
    return name, TRANSPORTS[name]()


@pytest.mark.parametrize("nbytes", settings.sizes(), ids=settings.label)
def test_allreduce(benchmark, transport, nbytes):
    name, impl = transport
    call = impl.prepare(nbytes)
    call()  # first call builds buffers / graphs
    used = {"cpu_s": 0.0, "wall_s": 0.0}

    def run() -> None:
        # the process's CPU (every thread: Horovod's loop, MPI's progress) while the call is in flight
        cpu, wall = time.process_time(), time.perf_counter()
        call()
        used["cpu_s"] += time.process_time() - cpu
        used["wall_s"] += time.perf_counter() - wall

    benchmark.group = f"allreduce {settings.label(nbytes)}"
    benchmark.pedantic(run, setup=impl.barrier, rounds=settings.rounds(), iterations=1, warmup_rounds=1)
    seconds = benchmark.stats.stats.median
    benchmark.extra_info.update(transport=settings.label_of(name), kind=ALLREDUCE_OP, processes=impl.size, bytes=nbytes,
                                algbw_bytes_per_s=algbw(nbytes, seconds),
                                busbw_bytes_per_s=busbw(ALLREDUCE_OP, nbytes, seconds, impl.size),
                                cpu_share=used["cpu_s"] / used["wall_s"])


def median_s(call, rounds: int, before=None) -> float:
    """The median time of `rounds` calls of `call`, each after `before` (not timed)."""
    times = []
    for _ in range(rounds):
        if before:
            before()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


@pytest.mark.skipif(not settings.compute_rounds(), reason="the profile's measurement (DISTBENCH_MICRO_COMPUTE_ROUNDS)")
def test_message_as_a_step_pays_it(benchmark, transport):
    """A 1 KiB message between ranks that compute between messages (bench.drivers.micro.message_ring): its
    time per hop in every round, idle (the wire's latency) and then while every rank computes on each of its
    host's cores (what a busy CPU adds). Every round is kept (rank 0's record): a profile pools them over its
    repetitions."""
    name, impl = transport
    if not isinstance(impl, MPI4Py) or impl.size < 2:
        pytest.skip("raw MPI's ranks, 2 or more")
    found = message_ring.measure(impl.comm)
    benchmark.group = "message as a step pays it"
    benchmark.extra_info.update(transport=settings.label_of(name), kind="message as a step pays it",
                                processes=impl.size, bytes=message_ring.MESSAGE_BYTES)
    if impl.comm.Get_rank() == 0:
        benchmark.extra_info.update(message_idle_rounds_s=found["idle"], message_busy_rounds_s=found["busy"])
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


@pytest.mark.skipif(not settings.compute_rounds(), reason="the profile's measurement (DISTBENCH_MICRO_COMPUTE_ROUNDS)")
def test_allreduce_while_every_rank_computes(benchmark, transport):
    """The rate buffer's allreduce while a thread of every rank computes, as a CPU worker's backward
    pass runs beside the reductions of the gradients it has made, against the same allreduce alone:
    the share of its rate a transport keeps beside a busy CPU (a host's budget taken by the compute
    leaves its threads little)."""
    name, impl = transport
    if not isinstance(impl, Horovod):
        pytest.skip("Horovod's allreduce only")
    nbytes = settings.sizes()[-1]
    call, work = impl.prepare(nbytes), impl.compute
    call()
    work()
    alone_s = median_s(call, settings.compute_rounds(), impl.barrier)
    with Computing(work):
        benchmark.group = "allreduce while computing"
        benchmark.pedantic(call, setup=impl.barrier, rounds=settings.compute_rounds(), iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(transport=settings.label_of(name), kind="allreduce while computing",
                                processes=impl.size, bytes=nbytes, alone_s=alone_s,
                                rate_share_computing=alone_s / benchmark.stats.stats.median)


@pytest.mark.skipif(not settings.compute_rounds(), reason="the profile's measurement (DISTBENCH_MICRO_COMPUTE_ROUNDS)")
def test_compute_beside_horovods_loop(benchmark, transport):
    """A rank's compute while Horovod's background loop runs (every rank computing, no tensor to reduce:
    the loop negotiates an empty cycle every HOROVOD_CYCLE_TIME, and over MPI polls while it waits for
    the other ranks), then the same compute alone, after hvd.shutdown() ended the loop: the stretch the
    loop's thread puts on a CPU worker's compute. Last in the module: the transport is shut down."""
    name, impl = transport
    if not isinstance(impl, Horovod):
        pytest.skip("Horovod's loop only")
    work = impl.compute
    work()
    benchmark.group = "compute beside the loop"
    benchmark.pedantic(work, setup=impl.barrier, rounds=settings.compute_rounds(), iterations=1, warmup_rounds=1)
    beside = benchmark.stats.stats.median
    impl.barrier()
    impl.hvd.shutdown()
    alone_s = median_s(work, settings.compute_rounds())
    benchmark.extra_info.update(transport=settings.label_of(name), kind="compute", processes=impl.size,
                                compute_alone_s=alone_s, compute_stretch=beside / alone_s)
