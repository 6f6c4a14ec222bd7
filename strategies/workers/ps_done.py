"""How a ps task learns that the run is over: every worker puts one token (its rank) into a queue on each
ps task when it is done, and the ps task leaves once it holds every worker's, at once (no timed linger that
a slow worker could lose: a worker whose last done token meets a ps that has just left knows it was taken).

A ps task started by hand has no launcher to end it when its workers die before their tokens: it waits
in slices and, between them, knocks on the port of each worker it has no token from (a plain TCP connect:
a gRPC channel opened to a task not yet listening stays failed for a while, and the run's own transfers
would share it). When no such worker has answered for the run's limit, it fails naming them. A worker
that is stuck but alive answers; its own deadlines end it, and then its port does not.
"""

from __future__ import annotations

import socket
import time

import tensorflow as tf

from bench.config import RunConfig
from bench.errors import RunFailed
from bench.run.phase import Phase
from strategies.workers.deadlines import LAUNCHER_FIRST_S, PROBE_S

# TensorFlow errors that mean a ps task has gone: after a done token, the ps leaving once it held them all
PS_LEFT = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError)


def done_queue(ps_index: int, num_workers: int) -> tf.queue.FIFOQueue:
    """The queue on ps task `ps_index` into which every worker puts one token when done."""
    with tf.device(f"/job:ps/task:{ps_index}"):
        return tf.queue.FIFOQueue(num_workers, tf.int32, shapes=(), shared_name=f"distbench_done_{ps_index}",
                                  name=f"done_queue_{ps_index}")


def listening(address: str) -> bool:
    """Whether `host:port` accepts a TCP connection now."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_S).close()
    except OSError:
        return False
    return True


class DoneTokens:
    """Waits for every worker's done token on this ps task; `watched`: bounded by the run's limits, the
    workers found at `workers` (their addresses, by rank)."""

    def __init__(self, session: tf.compat.v1.Session, take: tf.Tensor, workers: list[str], config: RunConfig,
                 phase: Phase, watched: bool) -> None:
        self.session, self.take, self.workers = session, take, workers
        self.startup_s, self.stall_s = config.startup_timeout_s, config.stall_timeout_s
        self.phase, self.watched = phase, watched
        self.slice_ms = int(max(1.0, min(self.startup_s, self.stall_s) / 4) * 1000)

    def wait(self) -> None:
        got: set[int] = set()
        seen_any, heard = False, time.monotonic()
        while len(got) < len(self.workers):
            self.phase("serving", f"done tokens: {len(got)} of {len(self.workers)}")
            if not self.watched:
                got.add(int(self.session.run(self.take)))
                continue
            try:
                got.add(int(self.session.run(self.take, options=tf.compat.v1.RunOptions(timeout_in_ms=self.slice_ms))))
                heard = time.monotonic()
                continue
            except tf.errors.DeadlineExceededError:
                pass
            missing = [k for k in range(len(self.workers)) if k not in got]
            if any(listening(self.workers[k]) for k in missing):
                seen_any, heard = True, time.monotonic()
                continue
            limit = (self.stall_s if seen_any else self.startup_s) + LAUNCHER_FIRST_S
            if time.monotonic() - heard > limit:
                named = ", ".join(f"worker {k}" for k in missing)
                raise RunFailed(f"serving (done tokens): no token from {named}, and none of them has listened "
                                f"for {limit:.0f} s")
