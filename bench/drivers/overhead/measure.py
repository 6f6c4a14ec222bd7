"""Runs one side of a pair and returns its examples/s: the bare loop's processes, or the
strategy through `python -m bench` (its run.json's throughput)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.drivers.overhead.bare.ps import READY_FILE
from bench.drivers.overhead.pairs import MPI_RANKS, ONE_PROCESS, TF_PS_JOB, TF_WORKERS, Pair
from bench.infra.tools import free_ports
from bench.run.launch.mpi_launchers import mpirun_command
from strategies import registry

TIMEOUT_S = 600
HOST = "127.0.0.1"


class MeasureFailed(RuntimeError):
    pass


def _python(module: str, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", f"bench.drivers.overhead.bare.{module}", *argv]


def _wait(processes: list[subprocess.Popen], log: Path, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    for p in processes:
        try:
            code = p.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            for q in processes:
                q.kill()
            raise MeasureFailed(f"{what} failed (exit {code}); see {log}")


def bare(pair: Pair, log: Path) -> float:
    """Examples/s of the pair's bare loop: all processes' timed examples over the span from
    the first one's start to the last one's end. It starts with the environment the strategy's
    processes get (Horovod's settings), so that the two differ by the harness alone."""
    env = {**os.environ, **registry.default_environment(pair.strategy, pair.workers)}
    with tempfile.TemporaryDirectory(prefix="distbench-bare-") as out, open(log, "ab") as sink:
        argv = pair.bare_argv(out)

        def spawn(cmd: list[str]) -> subprocess.Popen:
            return subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT)

        if pair.start == ONE_PROCESS:
            _wait([spawn(_python(pair.bare, argv))], log, f"bare {pair.strategy}")
        elif pair.start == MPI_RANKS:
            _wait([spawn([*mpirun_command(pair.workers), *_python(pair.bare, argv)])], log, f"bare {pair.strategy}")
        elif pair.start == TF_WORKERS:
            hosts = ",".join(f"{HOST}:{p}" for p in free_ports(pair.workers))
            _wait([spawn(_python(pair.bare, [*argv, "--cluster", hosts, "--index", str(i)]))
                   for i in range(pair.workers)], log, f"bare {pair.strategy}")
        elif pair.start == TF_PS_JOB:
            _run_ps_job(pair, argv, spawn, out, log)
        else:
            raise ValueError(f"unknown start {pair.start}")
        results = [json.loads(p.read_text()) for p in Path(out).glob("worker*.json")]
    processes = 1 if pair.start == ONE_PROCESS else pair.workers
    if len(results) != processes:
        raise MeasureFailed(f"bare {pair.strategy}: {len(results)} of {processes} processes reported")
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return sum(r["examples"] for r in results) / span


def _run_ps_job(pair: Pair, argv: list[str], spawn, out: str, log: Path) -> None:
    ports = free_ports(pair.ps + pair.workers)
    ps_hosts = ",".join(f"{HOST}:{p}" for p in ports[: pair.ps])
    worker_hosts = ",".join(f"{HOST}:{p}" for p in ports[pair.ps:])
    cluster = ["--cluster", f"ps:{ps_hosts};worker:{worker_hosts}"]
    servers = [spawn(_python(pair.bare, [*argv, *cluster, "--role", "ps", "--index", str(i)]))
               for i in range(pair.ps)]
    try:
        # the chief first, so that the others find the variables initialised (no 30 s poll)
        workers = [spawn(_python(pair.bare, [*argv, *cluster, "--index", "0"]))]
        deadline = time.monotonic() + TIMEOUT_S
        while not Path(out, READY_FILE).exists():
            if workers[0].poll() is not None or time.monotonic() > deadline:
                raise MeasureFailed(f"bare {pair.strategy}: the chief did not start; see {log}")
            time.sleep(0.05)
        workers += [spawn(_python(pair.bare, [*argv, *cluster, "--index", str(i)])) for i in range(1, pair.workers)]
        _wait(workers, log, f"bare {pair.strategy}")
    finally:
        for s in servers:
            s.kill()
            s.wait()


def harness(pair: Pair, log: Path) -> float:
    """Examples/s that distbench records for the same job (summary of its run.json)."""
    with tempfile.TemporaryDirectory(prefix="distbench-harness-") as out, open(log, "ab") as sink:
        done = subprocess.run([sys.executable, "-m", "bench", *pair.harness_argv(out)], stdout=sink,
                              stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        runs = list(Path(out).glob("*/run.json"))
        record = json.loads(runs[0].read_text()) if runs else {}
    if done.returncode != 0 or record.get("status") != "ok":
        raise MeasureFailed(f"distbench {pair.strategy} failed ({record.get('status', done.returncode)}); see {log}")
    return float(record["summary"]["throughput_examples_per_s"])
