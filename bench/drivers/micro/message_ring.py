"""A message's fixed cost as a training step pays it: a 1 KiB token passed around the ranks' ring over TCP,
each rank blocked in the kernel until it arrives (as gRPC's and Gloo's threads wait for a message), timed by
the first rank round by round, idle and then while every rank computes on each of its host's cores.

Between rounds the first rank waits a random gap, so that no round starts from a hand-over (after a barrier
two polling ranks pass a message in 0.8 us a hop here, less than any wire): idle, a sleep of up to
GAP_S (no CPU taken from the other ranks over loopback); busy, up to GAP_UNITS units of compute (0.2-0.5 ms
each here), as a step's compute lies between its messages. A receiver waiting in MPI's own Recv polls
instead: beside a computing thread on a 2-core machine it answered after 1-3.4 ms a hop, a scheduler's
slice (2026-12-07), which Horovod's runs here did not pay; its wait is not a step's.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import numpy as np

from bench.drivers.micro import settings

MESSAGE_BYTES, ROUNDS, GAP_UNITS, GAP_S = 1024, 60, 8, 2e-3


class Computing:
    """Threads that keep computing until the block ends: a CPU worker's compute beside the exchange."""

    def __init__(self, work, threads: int = 1) -> None:
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(work,), daemon=True) for _ in range(threads)]

    def _loop(self, work) -> None:
        while not self.stop.is_set():
            work()

    def __enter__(self) -> Computing:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


def cores_of_this_rank(comm) -> int:
    """This host's cores (the rank's CPU affinity) over the ranks on it: what its compute keeps busy (numpy's
    BLAS one thread each: bench.drivers.profile.where.ONE_BLAS_THREAD)."""
    from mpi4py import MPI

    return max(1, len(os.sched_getaffinity(0)) // comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size())


class Ring:
    """Each rank's TCP connections to its neighbours, the addresses exchanged over MPI."""

    def __init__(self, comm) -> None:
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        server = socket.create_server(("", 0))
        peers = comm.allgather((socket.gethostname(), server.getsockname()[1]))
        self.right = socket.create_connection(peers[(self.rank + 1) % self.size])
        self.left, _ = server.accept()
        server.close()
        for s in (self.left, self.right):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.token = bytes(MESSAGE_BYTES)

    def _receive(self) -> None:
        left = MESSAGE_BYTES
        while left:
            got = self.left.recv(left)
            if not got:
                raise ConnectionError("the ring's left neighbour closed")
            left -= len(got)

    def rounds(self, count: int, gap) -> list[float]:
        """Each round's time per hop, as the first rank sees it ([] on the others)."""
        out = []
        for _ in range(count):
            if self.rank == 0:
                gap()
                start = time.perf_counter()
                self.right.sendall(self.token)
                self._receive()
                out.append((time.perf_counter() - start) / self.size)
            else:
                self._receive()
                self.right.sendall(self.token)
        return out

    def close(self) -> None:
        self.left.close()
        self.right.close()


def random_gap(work, seed: int):
    """The first rank's gap before a round: `work` a random number of times (0 to GAP_UNITS), or without `work`
    a sleep of up to GAP_S; of a length that does not repeat a period of the host's scheduler or CPU quota."""
    rng = np.random.default_rng(seed)

    def gap() -> None:
        if work is None:
            time.sleep(float(rng.uniform(0, GAP_S)))
            return
        for _ in range(int(rng.integers(0, GAP_UNITS + 1))):
            work()

    return gap


def measure(comm) -> dict[str, list[float]]:
    """{"idle": rounds, "busy": rounds}, each round's time per hop (empty on ranks other than the first)."""
    work = settings.numpy_compute()
    ring = Ring(comm)
    try:
        comm.Barrier()  # once, before the first round: the ranks' start-ups are not a message's cost
        idle = ring.rounds(ROUNDS, random_gap(None, 1))
        with Computing(work, cores_of_this_rank(comm)):
            busy = ring.rounds(ROUNDS, random_gap(work, 2))
    finally:
        ring.close()
    return {"idle": idle, "busy": busy}
