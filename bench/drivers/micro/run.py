"""`python -m bench micro [--full] [--processes 2,4] [--horovod-sweep]`: every transport, saved
into results/micro-<time>/ as pytest-benchmark JSON, plus micro-summary.csv with each
transport's bus bandwidth as a fraction of raw MPI's (mpi4py) in the same run.

horovod-mpi runs with Horovod's own defaults, horovod-mpi-tuned with the settings the
allreduce strategy runs with (strategies/allreduce.py); --horovod-sweep adds horovod-mpi at
every cycle time and fusion threshold of the sweep, each under its own name."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.analysis.runs.micro_summary import COLLECTIVES, dispatch_costs, summarize, tensor_costs, write_summary
from bench.errors import UsageError
from bench.infra.tools import find_tool, free_ports
from bench.run.launch.mpi_launchers import mpirun_command
from bench.usage import OneLineParser
from strategies.registry import default_environment

HERE = Path(__file__).parent
# the transports timed from one client process, each by its own pytest process (the coordinator's
# eager cluster and the TF1 sessions of the ps round trip do not share a process)
ONE_CLIENT = {"ps": "local_test.py", "copy": "local_test.py", "coordinator": "coordinator_test.py"}


SWEEP_CYCLE_MS = (0.1, 0.5, 1.0, 5.0)
SWEEP_FUSION_MB = (0.0, 128.0)
HOROVOD_DEFAULTS = {"HOROVOD_CYCLE_TIME": "1", "HOROVOD_FUSION_THRESHOLD": str(128 * 2**20)}  # Horovod 0.28's


def horovod_environment(transport: str) -> dict[str, str]:
    """Horovod's settings for a transport: its own defaults, or the allreduce strategy's."""
    if transport == "horovod-mpi-tuned":
        return {**HOROVOD_DEFAULTS, **default_environment("allreduce")}
    return dict(HOROVOD_DEFAULTS) if transport.startswith("horovod") else {}


def sweep_settings() -> list[tuple[str, dict[str, str]]]:
    """(label, environment) of every setting the Horovod sweep times."""
    return [(f"horovod-mpi cycle {cycle:g} ms fusion {fusion:g} MB",
             {"HOROVOD_CYCLE_TIME": f"{cycle:g}", "HOROVOD_FUSION_THRESHOLD": str(int(fusion * 2**20))})
            for cycle in SWEEP_CYCLE_MS for fusion in SWEEP_FUSION_MB]


def collective_argv(transport: str, np: int, out: Path, name: str | None = None) -> list[str]:
    name = f"{name or transport}-np{np}"
    rank = [sys.executable, "-m", "bench.drivers.micro.rank_pytest", str(out), name, str(HERE / "collective_test.py")]
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


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench micro", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="4 KB to 64 MB, 10 rounds (default: 2 sizes, 3 rounds)")
    p.add_argument("--processes", default=None, help="comma-separated rank counts (default: 2,4; fast: 2)")
    p.add_argument("--transports", default=",".join([*COLLECTIVES, *ONE_CLIENT]))
    p.add_argument("--output", default="results")
    p.add_argument("--timeout-s", type=float, default=900)
    p.add_argument("--rounds", type=int, default=None,
                   help="timed rounds per size (default: 3; --full: 10; a ps round trip 5x, a memory copy 3x)")
    p.add_argument("--horovod-sweep", action="store_true",
                   help=f"also horovod-mpi at cycle times {SWEEP_CYCLE_MS} ms x fusion thresholds {SWEEP_FUSION_MB} MB")
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    counts = [int(n) for n in (args.processes or ("2,4" if args.full else "2")).split(",")]
    wanted = args.transports.split(",")
    out = Path(args.output) / f"micro-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "micro.log"
    if args.rounds is not None and args.rounds < 1:
        raise UsageError("--rounds must be >= 1")
    mode = {"DISTBENCH_MICRO_MODE": "full" if args.full else "fast",
            **({"DISTBENCH_MICRO_ROUNDS": str(args.rounds)} if args.rounds else {})}
    failed = []
    for transport in [t for t in COLLECTIVES if t in wanted]:
        for np in counts:
            env = {**mode, "DISTBENCH_MICRO_TRANSPORT": transport, **horovod_environment(transport)}
            if transport == "tf-collective":
                env["DISTBENCH_MICRO_TF_PORTS"] = ",".join(map(str, free_ports(np)))
            print(f"micro: {transport} x{np}", file=sys.stderr, flush=True)
            if not run(collective_argv(transport, np, out), env, log, args.timeout_s):
                failed.append(f"{transport} x{np}")
    for label, settings in sweep_settings() if args.horovod_sweep else []:
        for np in counts:
            print(f"micro: {label} x{np}", file=sys.stderr, flush=True)
            env = {**mode, "DISTBENCH_MICRO_TRANSPORT": "horovod-mpi", "DISTBENCH_MICRO_LABEL": label, **settings}
            if not run(collective_argv("horovod-mpi", np, out, label.replace(" ", "_")), env, log, args.timeout_s):
                failed.append(f"{label} x{np}")
    for transport in [t for t in ONE_CLIENT if t in wanted]:
        print(f"micro: {transport}", file=sys.stderr, flush=True)
        local = [sys.executable, "-m", "pytest", str(HERE / ONE_CLIENT[transport]), "-q", "-p", "no:cacheprovider",
                 "-o", "addopts=", f"--benchmark-json={out / (transport + '.json')}"]
        if not run(local, {**mode, "DISTBENCH_MICRO_TRANSPORT": transport}, log, args.timeout_s):
            failed.append(transport)
    table = summarize(out)
    write_summary(table, out)
    print(table.to_string(index=False), file=sys.stderr)
    costs = tensor_costs(table)
    if len(costs):
        print("\nA ps task's cost per message (a tensor's push or pull), from the same bytes in more tensors:",
              file=sys.stderr)
        print(costs.to_string(index=False, float_format=lambda v: f"{v:.1f}"), file=sys.stderr)
    dispatch = dispatch_costs(out)
    if len(dispatch):
        print("\nA coordinator's time per scheduled function (empty functions, all in flight at once):",
              file=sys.stderr)
        print(dispatch.to_string(index=False, float_format=lambda v: f"{v:.3f}"), file=sys.stderr)
    if failed:
        print(f"micro: failed: {', '.join(failed)} (see {log})", file=sys.stderr)
    print(f"micro: {out.resolve()}")
    return 1 if failed else 0
