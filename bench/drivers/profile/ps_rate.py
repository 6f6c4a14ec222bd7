"""One task of the gRPC measurement of `python -m bench profile`: a ps task that serves, or a
worker that pushes its variables into the ps task and pulls them back, round after round.

Every worker runs the same parts in order, each after a barrier (a file per worker in the
output folder, which every node sees): the rate with 1, 2, 4 ... workers pushing into the one
ps task and pulling back at once (`rate_part(k)`: workers 0 to k-1, each `rate_bytes / k` a
round, so that every level moves the same bytes), the last with every worker; then ONE_TENSOR
and MANY_TENSORS, worker 0 alone, the same bytes in 1 and in `MANY` variables (each its own
message). Each worker writes `ps-worker<i>.json`: per part, its rounds' start, end and bytes
moved (push and pull).

A NEIGHBOUR computes until it is ended, beside the ps task on its node: the same rates with the
task's CPU shared with a busy worker's compute.

With CORES_ENV set the ps task holds itself to that many of its host's cores (its CPU affinity,
before TensorFlow sizes its thread pools); then it writes the cores it has and its CPU (HOST_FILE).

With TASKS (the layout check, `python -m bench profile --ps-layout`), one part instead: every
worker at once, each pushing RATE_BYTES split evenly over the TASKS ps tasks and pulling it back.

    python -m bench.drivers.profile.ps_rate OUT CLUSTER_JSON ROLE INDEX ROUNDS RATE_BYTES [TASKS | every-worker]
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

from bench.drivers.micro.ps_graph import push_pull
from bench.drivers.micro.settings import numpy_compute
from bench.infra import cpu_quota

MESSAGE_BYTES, MANY = 64 * 1024, 64  # a ps task's cost per tensor: the same bytes in 1 and in MANY tensors
RATE, ONE_TENSOR, MANY_TENSORS, LAYOUT = "rate", "one-tensor", "many-tensors", "layout"
EVERY_WORKER = "every-worker"  # a worker's MODE: the rate with every worker only (beside a NEIGHBOUR)
NEIGHBOUR = "neighbour"  # a computing process beside the ps task (not a TensorFlow task)
LEAST_PUSH_BYTES = 2**20  # a worker's push at the highest concurrency: below it a message's fixed cost shows
CORES_ENV = "DISTBENCH_PS_CORES"  # a ps task held to this many of its host's cores (hold)
HOST_FILE = "ps-host.json"  # the ps task's host: {"cores": ..., "cpu": ...}


def concurrency(workers: int) -> tuple[int, ...]:
    """The numbers of workers the rate is measured with: 1, 2, 4 ... below `workers`, then `workers`."""
    levels, k = [], 1
    while k < workers:
        levels.append(k)
        k *= 2
    return (*levels, workers)


def rate_part(workers: int) -> str:
    """The name of the rate measured with `workers` workers at once ("rate-4")."""
    return f"{RATE}-{workers}"


def workers_of(part: str) -> int | None:
    """The workers of a rate part (None: not a rate part)."""
    prefix = f"{RATE}-"
    return int(part[len(prefix):]) if part.startswith(prefix) and part[len(prefix):].isdigit() else None
BARRIER_LIMIT_S = 600  # every worker reaches each barrier within its own start-up and one part's rounds


def barrier(out: Path, name: str, index: int, workers: int) -> None:
    (out / f".{name}-{index}").touch()
    deadline = time.monotonic() + BARRIER_LIMIT_S
    while sum((out / f".{name}-{k}").exists() for k in range(workers)) < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"barrier {name}: not every worker arrived")
        time.sleep(0.01)


def round_trip(tf, worker: object, index: int, nbytes: int, tensors: int, tasks: int = 1):
    """A callable pushing `nbytes` in `tensors` variables per ps task into ps tasks 0 to `tasks` - 1,
    then pulling them back."""
    graph, init, pull = push_pull(tf, index, tasks, nbytes, tensors, prefix=f"w{index}_remote")
    session = tf.compat.v1.Session(worker.target, graph=graph)
    session.run(init)
    step = session.make_callable(pull)
    step()  # warm-up
    return step, session


def share_bytes(rate_bytes: int, workers: int) -> int:
    """A worker's bytes each way a round with `workers` at once: its share of the buffer, at least
    LEAST_PUSH_BYTES, in whole float32s."""
    return max(LEAST_PUSH_BYTES, rate_bytes // workers) // 4 * 4


def parts(rate_bytes: int, workers: int, mode: str = "") -> tuple[tuple[str, int, int, int], ...]:
    """(part, bytes a worker moves each way a round, tensors, how many workers run it): the rate at each
    concurrency, then the cost per message; or (LAYOUT) every worker's `rate_bytes` at once; or
    (EVERY_WORKER) the rate with every worker alone."""
    if mode == LAYOUT:
        return ((LAYOUT, rate_bytes // 4 * 4, 1, workers),)
    if mode == EVERY_WORKER:
        return ((rate_part(workers), share_bytes(rate_bytes, workers), 1, workers),)
    rates = tuple((rate_part(k), share_bytes(rate_bytes, k), 1, k) for k in concurrency(workers))
    return (*rates, (ONE_TENSOR, MESSAGE_BYTES, 1, 1), (MANY_TENSORS, MESSAGE_BYTES, MANY, 1))


def work(out: Path, cluster: dict, index: int, rounds: int, rate_bytes: int, mode: str = "") -> None:
    """`mode`: "" (every part), EVERY_WORKER, or the layout check's ps tasks (a number)."""
    tasks = int(mode) if mode.isdigit() else None
    from bench.run.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import tensorflow as tf

    workers = len(cluster["worker"])
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), "worker", index)
    report = {}
    for name, nbytes, tensors, who in parts(rate_bytes, workers, LAYOUT if tasks else mode):
        runs = index < who
        step, session = round_trip(tf, server, index, nbytes, tensors, tasks or 1) if runs else (None, None)
        barrier(out, name, index, workers)
        if runs:
            times = []
            start = time.time()
            for _ in range(rounds):
                began = time.perf_counter()
                step()
                times.append(time.perf_counter() - began)
            report[name] = {"start": start, "end": time.time(), "bytes": 2 * nbytes * rounds, "tensors": tensors,
                            "round_s": times}
            session.close()
        barrier(out, f"{name}-done", index, workers)
    (out / f"ps-worker{index}.json").write_text(json.dumps(report))


def cores_given() -> float:
    """The cores this process's host gives it: its CPU affinity's (nproc), or its cgroup's CPU quota where lower."""
    quota = cpu_quota.own_cores()
    return min(float(len(os.sched_getaffinity(0))), quota if quota is not None else math.inf)


def hold(cores: int) -> None:
    """This process (and the threads TensorFlow starts after it, which size their pools by it) on its first
    `cores` CPUs: a ps task given fewer cores than its host has."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])


def serve(out: Path, cluster: dict, index: int) -> None:
    """A ps task until it is ended; first it holds itself to CORES_ENV's cores where that is set, then writes
    the cores it has and its host's CPU (HOST_FILE)."""
    from bench.infra.peak import cpu_model
    from bench.run.quiet_tf import import_tensorflow_quietly

    if os.environ.get(CORES_ENV):
        hold(int(os.environ[CORES_ENV]))
    if index == 0:
        (out / HOST_FILE).write_text(json.dumps({"cores": cores_given(), "cpu": cpu_model()}))
    import_tensorflow_quietly()
    import tensorflow as tf

    tf.distribute.Server(tf.train.ClusterSpec(cluster), "ps", index).join()


def compute() -> None:
    """A busy CPU beside a ps task, as a worker whose device is its host's CPU: the micro-benchmarks'
    numpy compute (every core the host gives BLAS's threads) until it is ended."""
    work = numpy_compute()
    while True:
        work()


def main() -> None:
    out, cluster, role, index = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    if role == NEIGHBOUR:
        compute()
    elif role == "ps":
        serve(out, cluster, index)
    else:
        work(out, cluster, index, int(sys.argv[5]), int(sys.argv[6]), sys.argv[7] if len(sys.argv) > 7 else "")


if __name__ == "__main__":
    main()
