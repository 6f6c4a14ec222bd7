"""`python -m bench project`: predict throughput per exchange scheme for worker counts and
links nobody ran, from a calibration on what was measured under --from; and check the
model against the emulated-cluster runs found there (left out of the calibration).

    python -m bench project --from results/ --workers 8,64,512 --link-gbit 10,25,100
    python -m bench project --from results/ --compute-ms 120 --model resnet20 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.analysis.projection import cluster_cli, costs
from bench.analysis.projection.calibrate import (
    Calibration,
    ModelCalibration,
    calibrate,
    concurrent_stretch,
    one_machine_runs,
    shared_cpu_stretch,
)
from bench.analysis.projection.model import EXCHANGE, SCHEMES, Prediction, predict, scheme_of, schemes_for
from bench.analysis.report import collect
from bench.analysis.report.projection import PROJECTION_FILE
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
    cluster_cli.add_arguments(p)
    return p


def ps_counts(workers: int, wanted: Sequence[int] | None) -> list[tuple[int, str]]:
    """(ps tasks, how they were chosen): those given, or 1 and a quarter of the workers."""
    if wanted:
        return [(k, str(k)) for k in sorted(set(wanted))]
    return sorted({(1, "1"), (max(1, workers // 4), "n/4")}, key=lambda pair: pair[1]) if workers >= 8 \
        else [(1, "1")]


def projection(cal: Calibration, workers: Sequence[int], links_gbit: Sequence[float],
               ps: Sequence[int] | None) -> pd.DataFrame:
    rows = []
    for model in cal.models.values():
        for n in workers:
            for gbit in links_gbit:
                for scheme in schemes_for(model):
                    for k, rule in ps_counts(n, ps) if EXCHANGE[scheme] == "ps" else [(0, "")]:
                        out = predict(scheme, model, n, k, gbit * 1e9 / 8, cal.latency_s[EXCHANGE[scheme]],
                                      ring_overhead_s=cal.ring_overhead_s)
                        rows.append({"model": model.model, "workers": n, "link_gbit": gbit, "scheme": scheme,
                                     "ps": k, "ps_rule": rule, **dataclasses.asdict(out),
                                     "scaling_efficiency": out.throughput_examples_per_s
                                     / (n * model.batch_size / model.compute_s)})
    return pd.DataFrame(rows)


def winners(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, workers and link: the fastest scheme (and ps count), and the fastest of the
    synchronous ones (an asynchronous scheme's examples/s do not count what staleness costs)."""
    key = ["model", "workers", "link_gbit"]

    def best(rows: pd.DataFrame, name: str) -> pd.DataFrame:
        top = rows.loc[rows.groupby(key)["throughput_examples_per_s"].idxmax()]
        label = top["scheme"] + top["ps"].map(lambda k: f", {k} ps" if k else "")
        return pd.DataFrame({**{c: top[c].to_numpy() for c in key}, name: label.to_numpy(),
                             f"{name}_examples_per_s": top["throughput_examples_per_s"].to_numpy()})

    synchronous = table[~table["scheme"].isin([s for (_, asynchronous), s in SCHEMES.items() if asynchronous])]
    return best(table, "fastest").merge(best(synchronous, "fastest_synchronous"), on=key)


def validation(cal: Calibration, runs: pd.DataFrame) -> pd.DataFrame:
    """Each emulated-cluster run's measured throughput against the model's prediction for its
    workers, ps tasks and link cap. Its emulated hosts share this machine's cores, so each
    worker's compute is stretched as measured by the one-machine runs at that worker count
    (calibrate.shared_cpu_stretch)."""
    if runs.empty or "link_mbit" not in runs:
        return pd.DataFrame()
    local = one_machine_runs(runs)
    rows = []
    for _, run in runs[runs["ok"] & runs["link_mbit"].notna()].iterrows():
        model = cal.models.get(run["model"])
        if model is None or pd.isna(run["throughput_examples_per_s"]):
            continue
        scheme = scheme_of(run.get("family"), bool(run.get("asynchronous")), bool(run.get("table_dense")), model)
        if scheme is None:
            continue
        ratio = int(run["batch_size"]) / model.batch_size  # compute taken as proportional to the batch
        scaled = dataclasses.replace(model, batch_size=int(run["batch_size"]), compute_s=model.compute_s * ratio,
                                     compute_sd_s=model.compute_sd_s * ratio)
        cores = float(run["cpu_count"]) if pd.notna(run.get("cpu_count")) else 1.0
        all_at_once, stretch_from = shared_cpu_stretch(local, scaled, int(run["workers"]), cores, run.get("family"))
        stretch, out = emulated_prediction(cal, run, scheme, scaled, all_at_once)
        measured = float(run["throughput_examples_per_s"])
        rows.append({"model": run["model"], "variant": run["variant"], "scheme": scheme, "wire": run.get("wire"),
                     "workers": int(run["workers"]), "ps": int(run["ps"] or 0), "link_mbit": float(run["link_mbit"]),
                     "measured_examples_per_s": measured,
                     "predicted_examples_per_s": out.throughput_examples_per_s,
                     "error": out.throughput_examples_per_s / measured - 1,
                     "predicted_step_s": out.step_s, "compute_stretch": stretch,
                     "compute_stretch_all_at_once": all_at_once, "compute_stretch_from": stretch_from,
                     # term by term, against the run's own split (a typical worker's medians)
                     **{f"{side}_{term}_s": value for term, predicted in (
                         ("compute", out.compute_s), ("communication", out.communication_s),
                         ("waiting", out.waiting_s))
                        for side, value in (("predicted", predicted), ("measured", _known(run.get(f"{term}_p50_s"))))}})
    return pd.DataFrame(rows)


def emulated_prediction(cal: Calibration, run: pd.Series, scheme: str, model: ModelCalibration,
                        all_at_once: float) -> tuple[float, Prediction]:
    """(compute stretch, prediction) of an emulated run. A ring's workers compute at the same
    time (they leave each allreduce together): the stretch measured with all of them computing.
    A ps's fetch their parameters one after another from a busy ps and compute at points of the
    step that need not meet: the stretch for the share of the step they compute
    (calibrate.concurrent_stretch), found with the step it gives."""
    def at(stretch: float) -> Prediction:
        return predict(scheme, model, int(run["workers"]), int(run["ps"] or 1), float(run["link_mbit"]) * 1e6 / 8,
                       cal.latency_s[EXCHANGE[scheme]], compute_scale=stretch, ring_overhead_s=cal.ring_overhead_s)

    stretch = all_at_once
    out = at(stretch)
    if EXCHANGE[scheme] != "ps":
        return stretch, out
    for _ in range(100):
        settled = concurrent_stretch(all_at_once, int(run["workers"]), out.compute_s / out.step_s)
        if abs(settled - stretch) < 1e-4:
            break
        stretch = (stretch + settled) / 2  # damped: the share falls as the stretch rises
        out = at(stretch)
    return stretch, out


def _known(value: float | None) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def crossover(workers: Sequence[int]) -> pd.DataFrame:
    return pd.DataFrame([{"workers": n, "ps_hosts_to_beat_ring": costs.byteps_crossover_ps_tasks(n)}
                         for n in workers])


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.device_examples_per_s is not None:
        try:
            check_counts(args)
            chosen = cluster_cli.check(args)
        except UsageError as exc:
            return refuse(exc)
        return cluster_cli.main(args, chosen)
    source = Path(args.source)
    try:
        if not source.is_dir():
            raise UsageError(f"--from {source}: no such folder")
        check_counts(args)
        cluster_cli.refuse_cluster_flags(args)
        if args.compute_ms is not None and args.compute_ms <= 0:
            raise UsageError(f"--compute-ms: must be > 0, got {args.compute_ms}")
        runs = collect.load([source])
        if one_machine_runs(runs).empty and args.compute_ms is None:
            raise UsageError(f"--from {source}: no finished run to calibrate from")
        cal = calibrate(source, runs, args.model, args.compute_ms)
        used, _ = cluster_cli.chosen_profile(args)  # for the published check; --from calibrates its own rates
    except UsageError as exc:
        return refuse(exc)
    table = projection(cal, args.workers, args.link_gbit, args.ps)
    checked = validation(cal, runs) if args.compute_ms is None else pd.DataFrame()
    result = {"calibration": {"models": cal.describe().to_dict("records"), "latency_s": cal.latency_s,
                              "latency_from": cal.latency_source, "ring_overhead_s": cal.ring_overhead_s},
              "projection": table.to_dict("records"), "winners": winners(table).to_dict("records"),
              "crossover": crossover(args.workers).to_dict("records"),
              # a term a run did not record is null (NaN is not JSON)
              "validation": checked.astype(object).where(checked.notna(), None).to_dict("records"),
              "validation_summary": error_summary(checked), "published": cluster_cli.published_result(used)}
    out = Path(args.output) if args.output else source
    out.mkdir(parents=True, exist_ok=True)
    (out / PROJECTION_FILE).write_text(json.dumps(result, indent=1, default=float))
    if args.json:
        print(json.dumps(result, default=float))
        return 0
    show(cal, table, checked, result["validation_summary"], args.workers)
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


def error_summary(checked: pd.DataFrame) -> dict:
    if checked.empty:
        return {"settings": 0}
    errors = checked["error"].abs()
    return {"settings": int(len(checked)), "median_abs_error": float(errors.median()),
            "worst_abs_error": float(errors.max())}


def show(cal: Calibration, table: pd.DataFrame, checked: pd.DataFrame, summary: dict, workers: Sequence[int]) -> None:
    pd.set_option("display.width", 160)
    print("Calibration")
    print(cal.describe().to_string(index=False))
    for exchange, value in cal.latency_s.items():
        print(f"  latency per message, {exchange} exchange: {value * 1e6:.1f} us ({cal.latency_source[exchange]})")
    print(f"  allreduce framework overhead per step: {cal.ring_overhead_s * 1e3:.2f} ms (Horovod less raw MPI)")
    print("\nWinner per model, workers and link (examples/s)")
    print(winners(table).to_string(index=False, float_format=lambda v: f"{v:,.0f}"))
    print("\nps hosts above which a ps exchange beats the ring (BytePS, section 4)")
    print(crossover(workers).to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    if len(checked):
        print("\nValidation: emulated-cluster runs, measured against predicted")
        print(checked[["model", "variant", "workers", "ps", "link_mbit", "measured_examples_per_s",
                       "predicted_examples_per_s", "error"]].to_string(index=False, float_format=lambda v: f"{v:,.2f}"))
        print("\nThe same, term by term (ms per step, predicted / measured by the runs' split)")
        print(terms(checked).to_string(index=False))
        print(f"median |error| {summary['median_abs_error']:.0%}, worst {summary['worst_abs_error']:.0%} "
              f"over {summary['settings']} settings")
