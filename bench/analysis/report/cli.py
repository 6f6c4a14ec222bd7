"""`python -m bench report [RUN_DIRS | RESULTS_DIR ...] [--baseline OTHER] [--output DIR]`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from bench.usage import OneLineParser, refuse


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench report",
                      description="Write summary.csv and report.html for a set of run folders.")
    p.add_argument("paths", nargs="*", default=["results"], help="run folders or folders holding them")
    p.add_argument("--baseline", nargs="+", default=None,
                   help="earlier runs to compare with: adds throughput ratios against them")
    p.add_argument("--output", default=None, help="where to write (default: the first path)")
    return p


def main(argv: Sequence[str]) -> int:
    args: argparse.Namespace = parser().parse_args(list(argv))
    paths = [Path(x) for x in args.paths]
    missing = [str(x) for x in [*paths, *map(Path, args.baseline or [])] if not x.exists()]
    if missing:
        return refuse(f"no such folder: {', '.join(missing)}")
    from bench.analysis.report.build import write_report

    out = Path(args.output) if args.output else (paths[0] if paths[0].is_dir() else paths[0].parent)
    html = write_report(paths, out, [Path(b) for b in args.baseline] if args.baseline else None)
    print(f"summary: {(out / 'summary.csv').resolve()}")
    print(f"report: {html.resolve()}")
    return 0
