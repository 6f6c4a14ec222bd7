"""`python -m bench overhead`: each strategy through distbench against its own bare loop,
the two alternated in one process tree, repeats times; prints each strategy's ratio and
its spread, and saves them into results/overhead-<time>/ for the report.

    python -m bench overhead                         # all six pairs, 5 repeats (~16 min on 2 cores)
    python -m bench overhead --strategies ps-async --repeats 5 --scale 2
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.analysis.runs.overhead_table import COLUMNS, PAIRS_FILE, ratio, read, summarize, text
from bench.drivers.overhead import measure
from bench.drivers.overhead.pairs import PAIRS, by_strategy
from bench.errors import UsageError
from bench.usage import OneLineParser


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench overhead", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategies", default=",".join(pair.strategy for pair in PAIRS))
    p.add_argument("--repeats", type=int, default=5, help="alternated pairs per strategy (default: %(default)s)")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies every pair's steps (default: %(default)s)")
    p.add_argument("--output", default="results")
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.repeats < 1 or args.scale <= 0:
        raise UsageError("--repeats must be >= 1 and --scale > 0")
    pairs = [pair.scaled(args.scale) for pair in by_strategy(args.strategies.split(","))]
    out = Path(args.output) / f"overhead-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "overhead.log"
    with open(out / PAIRS_FILE, "w", newline="") as f:
        rows = csv.DictWriter(f, COLUMNS)
        rows.writeheader()
        for repeat in range(args.repeats):
            for pair in pairs:
                # which side goes first alternates, so that a drift of the machine hits both alike
                first = "bare" if repeat % 2 == 0 else "distbench"
                print(f"overhead: {pair.strategy} repeat {repeat + 1}/{args.repeats}", file=sys.stderr, flush=True)
                try:
                    if first == "bare":
                        b = measure.bare(pair, log)
                        h = measure.harness(pair, log)
                    else:
                        h = measure.harness(pair, log)
                        b = measure.bare(pair, log)
                except measure.MeasureFailed as exc:
                    print(f"overhead: {exc}", file=sys.stderr)
                    return 1
                rows.writerow({"strategy": pair.strategy, "repeat": repeat, "first": first,
                               "bare_examples_per_s": b, "harness_examples_per_s": h, "ratio": ratio(h, b)})
                f.flush()
    print(text(summarize(read(out))))
    print(f"overhead: {out.resolve()}")
    return 0
