"""`python -m bench stress [--runs N] [--at-once C] [--hogs H] [--stall-timeout-s S]`: the end of a run, again
and again. N one-step ps-sync runs of the embedding model with its table split over two ps tasks (the run
that once hung in CI, at nice 19 beside the other tests), C at a time, each at nice 19 beside H processes
that keep every core busy. A run that does not end ok is reported with its record's account: the status,
and for a hang each process's phase and call (their stacks are in the run's logs). Every folder is kept
under --output. Exit status 0 when every run ended ok, 1 otherwise."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.run.launch.hang import rows_said
from bench.usage import OneLineParser, refuse

# the run of tests/test_embedding_exchange.py's "table-split-over-two-ps" case
RUN = ("--strategy", "ps-sync", "--ps", "2", "--ps-partition-mb", "0.1", "--model", "embedding",
       "--embedding-rows", "3000", "--workers", "2", "--batch-size", "16", "--steps", "1", "--warmup-steps", "0",
       "--no-shuffle", "--lr", "0.5", "--save-weights")
NICE = ("nice", "-n", "19")


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench stress", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=200, help="runs to make (default: %(default)s)")
    p.add_argument("--at-once", type=int, default=2, help="runs side by side (default: %(default)s)")
    p.add_argument("--hogs", type=int, default=multiprocessing.cpu_count(),
                   help="busy processes beside them (default: one a core, %(default)s)")
    p.add_argument("--stall-timeout-s", type=float, default=300.0,
                   help="each run's stall and start-up limit: what ends a hung run (default: %(default)s)")
    p.add_argument("--output", default="results/stress", help="where the runs' folders go (default: %(default)s)")
    return p


def hog() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def one_run(number: int, output: Path, limit_s: float) -> dict:
    """Run `number`: its exit status, wall time and, unless ok, its record's account."""
    folder = output / f"{number:04d}"
    limits = ("--stall-timeout-s", str(limit_s), "--startup-timeout-s", str(limit_s))
    began = time.monotonic()
    done = subprocess.run([*NICE, sys.executable, "-m", "bench", *RUN, *limits, "--output", str(folder)],
                          capture_output=True, text=True)
    out = {"run": number, "exit": done.returncode, "wall_s": round(time.monotonic() - began, 1), "folder": str(folder)}
    if done.returncode != 0:
        out["account"] = account(folder, done.stderr)
    return out


def account(folder: Path, stderr: str) -> str:
    records = list(folder.glob("*/run.json"))
    if len(records) != 1:
        return f"no run.json; the launcher said: {stderr.strip()[-500:]}"
    record = json.loads(records[0].read_text())
    return "\n".join([f"status: {record.get('status')}", *rows_said(record, records[0].parent)])


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    if args.runs < 1 or args.at_once < 1 or args.hogs < 0 or args.stall_timeout_s <= 0:
        refuse("stress: --runs and --at-once must be >= 1, --hogs >= 0, --stall-timeout-s > 0")
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    hogs = [hog() for _ in range(args.hogs)]
    results, began = [], time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=args.at_once) as pool:
            for out in pool.map(lambda k: one_run(k, output, args.stall_timeout_s), range(args.runs)):
                results.append(out)
                print(f"stress: run {out['run'] + 1}/{args.runs}: exit {out['exit']} in {out['wall_s']} s",
                      file=sys.stderr, flush=True)
                if "account" in out:
                    print(out["account"], file=sys.stderr, flush=True)
    finally:
        for process in hogs:
            process.kill()
            process.wait()
    failed = [r for r in results if r["exit"] != 0]
    walls = sorted(r["wall_s"] for r in results)
    print(f"stress: {len(results)} runs in {time.monotonic() - began:.0f} s, {len(failed)} not ok "
          f"({sum('hung' in r.get('account', '') for r in failed)} hung); wall per run median "
          f"{walls[len(walls) // 2]} s, max {walls[-1]} s; folders under {output}")
    (output / "stress.json").write_text(json.dumps(results, indent=1))
    return 1 if failed else 0
