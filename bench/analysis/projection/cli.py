"""`python -m bench project`: predict throughput per exchange scheme for worker counts and
links nobody ran, from a calibration on what was measured under --from and a transport
profile; and check the model against the emulated-cluster runs found there (left out of the
calibration). Every figure is an interval over the profile's ranges.

    python -m bench project --from results/ --workers 8,64,512 --link-gbit 10,25,100
    python -m bench project --from results/ --profile results/profile.json --compute-ms 120 --json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.analysis.projection import cluster_cli, cores
from bench.analysis.projection.calibrate import Calibration, calibrate, one_machine_runs
from bench.analysis.projection.files import PROJECTION_FILE
from bench.analysis.projection.from_runs import (
    crossover,
    error_summary,
    projection,
    summary_line,
    validated_error,
    validation,
    winners,
)
from bench.analysis.runs import collect
from bench.errors import UsageError
from bench.usage import OneLineParser, refuse


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench project", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", default="results", help="results folder to calibrate from")
    p.add_argument("--workers", type=_ints, default=[2, 8, 64, 256, 1024], help="(default: 2,8,64,256,1024)")
    p.add_argument("--link-gbit", type=_floats, default=[1, 10, 25, 100], help="(default: 1,10,25,100)")
    p.add_argument("--ps", type=_ints, default=None,
                   help="ps tasks of the ps schemes, comma-separated (default: 1 and n/4 of n workers)")
    p.add_argument("--compute-ms", type=float, default=None,
                   help="one worker's step compute in ms, e.g. what a GPU does (default: measured here)")
    p.add_argument("--model", action="append", default=None, help="(default: every model under --from)")
    p.add_argument("--output", default=None, help=f"folder for {PROJECTION_FILE} (default: --from)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    cluster_cli.add_profile_argument(p)
    cluster_cli.add_host_cores_argument(p)
    cluster_cli.add_level_argument(p)
    cluster_cli.add_arguments(p)
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.device_examples_per_s is not None:
        try:
            cluster_cli.check_level(args)
            check_counts(args)
            chosen = cluster_cli.check(args)
        except UsageError as exc:
            return refuse(exc)
        return cluster_cli.main(args, chosen)
    source = Path(args.source)
    try:
        if not source.is_dir():
            raise UsageError(f"--from {source}: no such folder")
        cluster_cli.check_level(args)
        check_counts(args)
        cluster_cli.refuse_cluster_flags(args)
        if args.compute_ms is not None and args.compute_ms <= 0:
            raise UsageError(f"--compute-ms: must be > 0, got {args.compute_ms}")
        runs = collect.load([source])
        if one_machine_runs(runs).empty and args.compute_ms is None:
            raise UsageError(f"--from {source}: no finished run to calibrate from")
        used, why = cluster_cli.chosen_profile(args, source)
        per_host = cores.decide(args.host_cores, used)
        cal = calibrate(source, runs, args.model, args.compute_ms, used, why)
        checked, left_out = validation(cal, runs, args.level) if args.compute_ms is None else (pd.DataFrame(), [])
        table, cells = projection(cal, args.workers, args.link_gbit, args.ps, args.level, validated_error(checked),
                           cores_per_host=per_host.cores)
    except UsageError as exc:
        return refuse(exc)
    best, crossing = winners(table), crossover(args.workers)
    result = {"calibration": {"models": cal.describe().to_dict("records")},
              "profile": {**used.summary(), "why": why}, "host_cores": per_host.record(),
              "constants": cluster_cli.constants(used),
              "projection": cluster_cli.records(table), "families": cells, "winners": best.to_dict("records"),
              "crossover": crossing.to_dict("records"),
              "validation": cluster_cli.records(checked), "validation_summary": error_summary(checked, left_out),
              "published": cluster_cli.published_result(used, args.level)}
    out = Path(args.output) if args.output else source
    out.mkdir(parents=True, exist_ok=True)
    (out / PROJECTION_FILE).write_text(json.dumps(result, indent=1, default=float))
    if args.json:
        print(json.dumps(result, default=float))
        return 0
    show(cal, best, crossing, checked, result["validation_summary"])
    print(f"host cores: {per_host.said}")
    print(f"written: {(out / PROJECTION_FILE).resolve()}", file=sys.stderr)
    return 0


def check_counts(args: argparse.Namespace) -> None:
    if not args.workers or min(args.workers) < 1 or not args.link_gbit or min(args.link_gbit) <= 0:
        raise UsageError("--workers must be >= 1 and --link-gbit > 0")
    if args.ps is not None and (not args.ps or min(args.ps) < 1):
        raise UsageError("--ps: give ps task counts >= 1")


def terms(checked: pd.DataFrame) -> pd.DataFrame:
    """Each validated setting's compute, communication and waiting, predicted / measured, in ms:
    where a prediction misses, the term that is wrong."""
    out = checked[["variant", "workers", "link_mbit"]].copy()
    for term in ("compute", "communication", "waiting"):
        predicted, measured = checked[f"predicted_{term}_s"] * 1e3, checked[f"measured_{term}_s"] * 1e3
        out[term] = [f"{p:.1f} / {m:.1f}" if pd.notna(m) else f"{p:.1f} / –" for p, m in zip(predicted, measured,
                                                                                             strict=True)]
    return out


def show(cal: Calibration, best: pd.DataFrame, crossing: pd.DataFrame, checked: pd.DataFrame, summary: dict) -> None:
    pd.set_option("display.width", 160)
    print("Calibration")
    print(cal.describe().to_string(index=False))
    print(f"  transports: profile {cal.profile.name} ({cal.profile_why})")
    print("\nWinner per model, workers and link (examples/s, each the point of its interval)")
    print(best.to_string(index=False, float_format=lambda v: f"{v:,.0f}"))
    print("\nps hosts above which a ps exchange beats the ring (BytePS, section 4)")
    print(crossing.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    if len(checked):
        print("\nValidation: emulated-cluster runs, measured against predicted")
        print(checked[["model", "variant", "workers", "ps", "link_mbit", "measured_examples_per_s",
                       "predicted_examples_per_s", "predicted_low", "predicted_high", "error"]].to_string(
            index=False, float_format=lambda v: f"{v:,.2f}"))
        print("\nThe same, term by term (ms per step, predicted / measured by the runs' split)")
        print(terms(checked).to_string(index=False))
        print(summary_line(summary))
    for why in summary.get("left_out", []):
        print(f"  not predicted: {why}")
