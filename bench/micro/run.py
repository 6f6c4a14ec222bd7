"""`python -m bench micro [--full] [--processes 2,4]`: every transport, saved into
results/micro-<time>/ as pytest-benchmark JSON, plus micro-summary.csv with each
transport's bus bandwidth as a fraction of raw MPI's (mpi4py) in the same run."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.launch.mpi import mpirun_command
from bench.launch.processes import free_ports
from bench.launch.tools import find_tool
from bench.micro import COLLECTIVES
from bench.micro.summary import summarize, write_summary
from bench.usage import OneLineParser

HERE = Path(__file__).parent


def collective_argv(transport: str, np: int, out: Path) -> list[str]:
    name = f"{transport}-np{np}"
    rank = [sys.executable, "-m", "bench.micro.rank_pytest", str(out), name, str(HERE / "collective_test.py")]
    if transport == "horovod-gloo":
        return [find_tool("horovodrun") or "horovodrun", "--gloo", "-np", str(np), "-H", f"localhost:{np}", *rank]
    return [*mpirun_command(np), *rank]


def run(argv: list[str], env: dict[str, str], log: Path, timeout_s: float) -> bool:
    with open(log, "ab") as out:
        try:
            done = subprocess.run(argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def main(argv: Sequence[str]) -> int:
    p = OneLineParser(prog="python -m bench micro", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="4 KB to 64 MB, 10 rounds (default: 2 sizes, 3 rounds)")
    p.add_argument("--processes", default=None, help="comma-separated rank counts (default: 2,4; fast: 2)")
    p.add_argument("--transports", default=",".join(COLLECTIVES) + ",ps,copy")
    p.add_argument("--output", default="results")
    p.add_argument("--timeout-s", type=float, default=900)
    args = p.parse_args(list(argv))
    counts = [int(n) for n in (args.processes or ("2,4" if args.full else "2")).split(",")]
    wanted = args.transports.split(",")
    out = Path(args.output) / f"micro-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "micro.log"
    mode = {"DISTBENCH_MICRO_MODE": "full" if args.full else "fast"}
    failed = []
    for transport in [t for t in COLLECTIVES if t in wanted]:
        for np in counts:
            env = {**mode, "DISTBENCH_MICRO_TRANSPORT": transport}
            if transport == "tf-collective":
                env["DISTBENCH_MICRO_TF_PORTS"] = ",".join(map(str, free_ports(np)))
            print(f"micro: {transport} x{np}", file=sys.stderr, flush=True)
            if not run(collective_argv(transport, np, out), env, log, args.timeout_s):
                failed.append(f"{transport} x{np}")
    for transport in [t for t in ("ps", "copy") if t in wanted]:
        print(f"micro: {transport}", file=sys.stderr, flush=True)
        local = [sys.executable, "-m", "pytest", str(HERE / "local_test.py"), "-q", "-p", "no:cacheprovider",
                 "-o", "addopts=", f"--benchmark-json={out / (transport + '.json')}"]
        if not run(local, {**mode, "DISTBENCH_MICRO_TRANSPORT": transport}, log, args.timeout_s):
            failed.append(transport)
    table = summarize(out)
    write_summary(table, out)
    print(table.to_string(index=False), file=sys.stderr)
    if failed:
        print(f"micro: failed: {', '.join(failed)} (see {log})", file=sys.stderr)
    print(f"micro: {out.resolve()}")
    return 1 if failed else 0
