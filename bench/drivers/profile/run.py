"""`python -m bench profile [--repeats 6] [--ranks-per-node G] [--bytes B] [--output results]`: the
transport profile of the machines it runs on, for `python -m bench project --profile results/profile.json`.

Inside a Slurm allocation of 2 or more nodes (`salloc -N 2 ./run_bench.sh profile`) it measures
across the nodes over their network, each process a job step on its node; elsewhere on this
machine over loopback. Each repetition measures, in turn: raw MPI (mpi4py: a 1 KiB token passed
around the ranks with compute between rounds, every round's time per hop, idle and while a thread of
every rank computes: the wire's latency and what a busy CPU adds), Horovod's
allreduce over MPI and over Gloo (G ranks per node; bus bandwidth at B, 64 MiB by default,
and at each buffer of a sweep from 1 MiB up to B in steps of sqrt(2); the rate buffer's
allreduce while every rank computes; a CPU rank's compute beside Horovod's loop against the
same compute alone), then gRPC (1, 2, 4 ... workers pushing B between them into one ps task
and pulling it back at once: the task's rate under concurrency; then one worker's 64 KiB in 1
and in 64 tensors, a ps task's cost per message; then the rate with every worker again, a
computing process beside the ps task on its node: the share of its rate it keeps; and, where the
ps task's host has 2 cores or more, the rate with every worker with the task held to 1 of them:
its gain per doubling of cores, beside the host's cores and CPU). Each
constant's value is the median of the repetitions, which it keeps for its prediction interval; a
message's costs keep every round, pooled over the repetitions, their mean the value.

Sized by time (--budget, default 5 minutes): without --bytes, a probe first (Horovod's allreduce at
1 MiB) finds the link's rate, and the rate buffer is what one allreduce moves in about a quarter of
a second at that rate, up to 64 MiB (loopback: 64 MiB; 100 Mbit/s: about 3 MiB); after the least
repetitions an interval needs (3), another is made only while the budget holds it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.analysis.projection import levels
from bench.analysis.projection.profile import PROFILE_FILE, PROFILED_HOST_CORES
from bench.drivers.profile import fold, layout_check
from bench.drivers.profile.where import Where
from bench.errors import UsageError
from bench.run.launch import processes
from bench.run.process.environment import mpi_version, tensorflow_version, version
from bench.usage import OneLineParser, parse_duration, refuse

LEAST_REPEATS = 3
# on hosts throttled in 10 ms periods, two 3-repetition profiles of the same nodes 13 minutes apart put 30
# and 53 of the emulated check's 72 figures inside their intervals, two 6-repetition ones an hour apart 55
# and 55, their new constants' medians within 5% of each other (docs/projection-checks.md, "Several models on
# budgeted hosts")
DEFAULT_REPEATS = 6
# each rate's buffer: a step's gradients fused, at Horovod's fusion threshold before 0.21 (64 MiB;
# 128 since, horovod/horovod#2468); at 10 Gbit/s a message's fixed cost (tens of us) is under 0.1 %
# of its 54 ms
RATE_BYTES = 64 * 2**20
LEAST_RATE_BYTES = 2**20  # below it a rate measures the fixed cost of a message more than the link
# a step's buffers are what its gradients fuse into, of any size up to the threshold: the rates are
# measured from LEAST_RATE_BYTES up in steps of sqrt(2), because a transport's rate need not be flat in
# the size (a link's token bucket lets a small buffer's first bytes through at once; a library may pick
# its algorithm by the size); fold.by_bytes keeps a size's own rate only where its repetitions tell it apart
SIZE_STEP = math.sqrt(2)
DEFAULT_BUDGET_S = 300.0
# a rate buffer sized by the probe: one allreduce of it takes about this long at the probed rate. A message's
# fixed cost (tens of us over TCP) is under 0.1 % of it, and a repetition's sweep and gRPC rounds take tens of
# seconds on a 100 Mbit/s link instead of the 12 minutes one took at 64 MiB
TARGET_CALL_S = 0.25
PROBE = "horovod-mpi"


def sized_bytes(rate_bytes_per_s: float | None, most: int = RATE_BYTES) -> int:
    """The rate buffer for a probed rate (bytes/s): TARGET_CALL_S of it, a multiple of 4 KiB, between 1 MiB and
    `most`; `most` where the probe found no rate."""
    if not rate_bytes_per_s:
        return most
    return max(LEAST_RATE_BYTES, min(most, int(rate_bytes_per_s * TARGET_CALL_S) // 4096 * 4096))


def another_fits(done: int, most: int, elapsed_s: float, budget_s: float) -> bool:
    """Whether to make repetition `done + 1`: always up to LEAST_REPEATS, then while the next one, as long as the
    mean of those done, still ends within the budget, up to `most`."""
    if done < LEAST_REPEATS:
        return True
    return done < most and elapsed_s + elapsed_s / done <= budget_s


def rate_sizes(rate_bytes: int) -> tuple[int, ...]:
    """The buffers the rates are measured at, ascending, `rate_bytes` last (multiples of 4 KiB: float32s)."""
    sizes, size = [], float(LEAST_RATE_BYTES)
    while size < rate_bytes / 1.05:  # within 5% of the last: the last alone
        sizes.append(int(size) // 4096 * 4096)
        size *= SIZE_STEP
    return (*sizes, rate_bytes)


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench profile", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                   help=f"repetitions of every measurement, interleaved "
                        f"(default {DEFAULT_REPEATS}, at least {LEAST_REPEATS})")
    p.add_argument("--ranks-per-node", type=int, default=1, help="allreduce ranks per node (GPUs per host)")
    p.add_argument("--ps-workers", type=int, default=4,
                   help="the most workers pushing into the one ps task at once; the rate is measured with 1, 2, 4 "
                        "... of them (default 4)")
    p.add_argument("--rounds", type=int, default=5, help="timed round trips per gRPC part")
    p.add_argument("--ps-cores", type=int, default=None,
                   help="hold every ps task to this many of its node's cores (CPU affinity): a profile, or a "
                        "--ps-layout check, of ps tasks with fewer cores than their nodes have (default: all)")
    p.add_argument("--bytes", type=int, default=None,
                   help=f"the buffer every rate is measured at (at least 1 MiB; default: sized by a probe of the "
                        f"link's rate, at most {RATE_BYTES // 2**20} MiB)")
    p.add_argument("--budget", default="5m",
                   help="the time the profile may take: repetitions past the least 3 only while it holds "
                        "(default: %(default)s; 10m, 300, 90s)")
    p.add_argument("--ps-layout", metavar="W:P", default=None,
                   help="instead of a profile, the check of ps tasks under concurrency: W workers and P ps tasks "
                        "over the nodes as --hosts places them, measured, and predicted from --against "
                        "(bench.drivers.profile.layout_check)")
    p.add_argument("--against", metavar="PROFILE", default=None, help="with --ps-layout: the profile that predicts it")
    p.add_argument("--link-gbit", type=float, default=None, help="with --ps-layout: the nodes' link, Gbit/s")
    p.add_argument("--level", type=float, default=levels.DEFAULT_LEVEL,
                   help="with --ps-layout: the prediction interval's level (default %(default)s)")
    p.add_argument("--output", default="results", help=f"folder for {PROFILE_FILE}")
    p.add_argument("--timeout-s", type=float, default=600, help="limit of each measurement's processes")
    return p


def check(args: argparse.Namespace) -> None:
    if args.repeats < LEAST_REPEATS:
        raise UsageError(f"--repeats must be >= {LEAST_REPEATS}: a range needs repetitions")
    if args.ps_cores is not None and args.ps_cores < 1:
        raise UsageError(f"--ps-cores must be >= 1, got {args.ps_cores}")
    for name in ("ranks_per_node", "ps_workers", "rounds"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1")
    args.budget = parse_duration(args.budget, "--budget")
    if args.ps_layout is not None:
        layout_check.layout(args.ps_layout)
        layout_check.check_args(args)
    if args.bytes is not None and args.bytes < LEAST_RATE_BYTES:
        raise UsageError(f"--bytes must be >= {LEAST_RATE_BYTES} (1 MiB): a smaller buffer measures a message's "
                         "fixed cost more than the link's rate")


def software() -> str:
    versions = [f"{name} {found}" if found else f"{name} (not installed)"
                for name, found in (("tensorflow", tensorflow_version()), ("horovod", version("horovod")))]
    mpi = mpi_version()
    if mpi:
        versions.append(mpi)
    return ", ".join(versions)


def last_line(log: Path) -> str:
    """Why a measurement failed: the last line of its log that says something."""
    return processes.last_line(log) or "no log"


def measure(where: Where, args: argparse.Namespace, folder: Path) -> tuple[dict[str, float], list[str]]:
    """One repetition: its figures, and what failed."""
    figures, failed = {}, []
    sizes = rate_sizes(args.bytes)
    for transport in ("mpi4py", "horovod-mpi", "horovod-gloo"):
        part = folder / transport
        part.mkdir(parents=True)
        if where.allreduce(transport, part, sizes, args.timeout_s):
            figures.update(fold.allreduce_figures(part, sizes))
        else:
            failed.append(transport)
    part = folder / "grpc"
    part.mkdir()
    if where.ps_job(args.ps_workers, part, args.rounds, args.bytes, args.timeout_s, ps_cores=args.ps_cores):
        figures.update(fold.grpc_figures(part))
        cores = fold.host(part).get("cores")
        if cores:
            figures[PROFILED_HOST_CORES] = float(cores)
    else:
        failed.append("grpc")
    if figures.get(PROFILED_HOST_CORES, 0) >= 2:  # the ps task held to 1 core: what its host's other cores add
        part = folder / "grpc-1-core"
        part.mkdir()
        if where.ps_job(args.ps_workers, part, args.rounds, args.bytes, args.timeout_s, ps_cores=1, every_worker=True):
            figures.update(fold.cores_gain(figures, fold.grpc_figures(part), figures[PROFILED_HOST_CORES]))
        else:
            failed.append("grpc-1-core")
    part = folder / "grpc-computing"
    part.mkdir()
    if where.ps_job(args.ps_workers, part, args.rounds, args.bytes, args.timeout_s, computing=True,
                    ps_cores=args.ps_cores):
        figures.update(fold.share_computing(figures, fold.grpc_figures(part)))
    else:
        failed.append("grpc-computing")
    return figures, failed


def probe(where: Where, folder: Path, timeout_s: float) -> float | None:
    """The link's rate (bytes/s) by Horovod's allreduce at 1 MiB, or None where the probe failed."""
    part = folder / "probe"
    part.mkdir(parents=True)
    if not where.allreduce(PROBE, part, (LEAST_RATE_BYTES,), timeout_s):
        return None
    return fold.allreduce_figures(part, (LEAST_RATE_BYTES,)).get(f"{fold.HOROVOD_WIRES[PROBE]}.process_bytes_per_s")


def repetitions(where: Where, args: argparse.Namespace, out: Path) -> tuple[list[dict[str, float]], list[str]]:
    """The repetitions the budget holds (args.bytes set), their figures and what failed."""
    began = time.monotonic()
    rounds, failures = [], []
    while another_fits(len(rounds), args.repeats, time.monotonic() - began, args.budget):
        r = len(rounds) + 1
        print(f"profile: repetition {r} (at least {LEAST_REPEATS}, at most {args.repeats}; {where.describes})",
              file=sys.stderr, flush=True)
        figures, failed = measure(where, args, out / f"repetition{r}")
        rounds.append(figures)
        failures += [f"{name} (repetition {r}: {last_line(out / f'repetition{r}' / name / 'profile.log')})"
                     for name in failed]
    return rounds, failures


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        check(args)
        where = Where.here(args.ranks_per_node)
        where.check_fits()
        where.check_output(Path(args.output))
    except UsageError as exc:
        return refuse(exc)
    began, budget_s = time.monotonic(), args.budget
    out = Path(args.output) / f"profile-{time.strftime('%Y%m%d-%H%M%S')}"
    sized = args.bytes is None
    if sized:
        rate = probe(where, out, args.timeout_s)
        args.bytes = sized_bytes(rate)
        print(f"profile: the probe's rate {rate or 0:.3g} bytes/s: rates at {args.bytes / 2**20:.1f} MiB",
              file=sys.stderr, flush=True)
    args.budget = budget_s - (time.monotonic() - began)  # what the probe left
    if args.ps_layout is not None:
        return layout_check.run(args, where, out)
    rounds, failures = repetitions(where, args, out)
    if failures:
        print(f"profile: failed: {', '.join(failures)} (see {out}/*/*/profile.log)", file=sys.stderr)
        return 1
    command = f"./run_bench.sh profile --repeats {len(rounds)} --ranks-per-node {args.ranks_per_node} " \
              f"--ps-workers {args.ps_workers} --bytes {args.bytes}" \
              f"{f' --ps-cores {args.ps_cores}' if args.ps_cores else ''}, {time.strftime('%Y-%m-%d')}"
    data = fold.fold(rounds, where.describes, software(), command, args.bytes)
    data["host"] = fold.host(out / "repetition1" / "grpc")  # the ps task's host: its cores and CPU
    data["sized"] = {"budget_s": budget_s, "bytes_by_probe": sized,
                     "repetitions": len(rounds), "took_s": round(time.monotonic() - began, 1)}
    for path in (out / PROFILE_FILE, Path(args.output) / PROFILE_FILE):
        path.write_text(json.dumps(data, indent=1))
    table = pd.DataFrame([{k: statistics.fmean(v) if isinstance(v, list) else v for k, v in r.items()}
                          for r in rounds])  # a constant kept round by round: its repetition's mean
    print(table[[c for c in table if fold.AT not in c and fold.WITH not in c]].to_string(index=False), file=sys.stderr)
    print(f"profile: {(Path(args.output) / PROFILE_FILE).resolve()} ({len(rounds)} repetitions in "
          f"{(time.monotonic() - began) / 60:.1f} min)")
    return 0
