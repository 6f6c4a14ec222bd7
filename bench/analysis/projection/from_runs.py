"""A projection calibrated from runs (`python -m bench project --from results/`): the one
per-tensor model (bench.analysis.projection.schemes) on a cluster of the calibrated workers,
each on a host of its own, and its check against the emulated-cluster runs it did not learn
from, each figure with its interval."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd

from bench.analysis.projection import costs, draws, family_cells, intervals, levels, schemes, table
from bench.analysis.projection.calibrate import (
    Calibration,
    ModelCalibration,
    concurrent_stretch,
    one_machine_runs,
    recorded,
    run_scheme,
    shared_cpu_ceiling,
    shared_cpu_stretch,
    waiting_cpu_ceiling,
)
from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.parameter_servers import PLACEMENTS, ROUND_ROBIN
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.schemes import ASYNCHRONOUS, PsSetup
from bench.analysis.runs.collect import GROUP_KEY
from bench.errors import UsageError
from bench.run.contract import GRPC
from bench.run.models import tensors
from bench.run.models.tensors import ModelTensors

# a step that spans fewer of its hosts' CPU-quota periods meets a spent quota or not by chance: reported, not scored
LEAST_PERIODS_PER_STEP = 2


def model_tensors(model: ModelCalibration) -> ModelTensors:
    """The model's tensors traced from its code, at the sizes and touched rows its runs recorded."""
    try:
        traced = tensors.of(model.spec, **dict(model.sizes))
    except UsageError as exc:
        raise UsageError(f"--from: model {model.model}: its tensors cannot be traced ({exc})") from None
    return traced.sized(model.gradient)


def cluster_of(model: ModelCalibration, workers: int, link_gbit: float, profile: Profile,
               other_s: float = 0.0, cores_per_host: float | None = None) -> Cluster:
    """`workers` CPU workers of the calibrated compute, each on a host of its own (of `cores_per_host`; None: the
    profile's) behind a link of `link_gbit`, each step with `other_s` of the host's own work (Cluster.other_s)."""
    return Cluster(workers, 1, link_gbit, model.batch_size / model.compute_s, model.batch_size,
                   profile.get("intra_host_bytes_per_s"), model.compute_sd_s, on_host=True, other_s=other_s,
                   cores_per_host=cores_per_host)


def ps_counts(workers: int, wanted: Sequence[int] | None) -> list[tuple[int, str]]:
    """(ps tasks, how they were chosen): those given, or 1 and a quarter of the workers."""
    if wanted:
        return [(k, str(k)) for k in sorted(set(wanted))]
    return sorted({(1, "1"), (max(1, workers // 4), "n/4")}, key=lambda pair: pair[1]) if workers >= 8 \
        else [(1, "1")]


def compute_term(model: ModelCalibration) -> levels.Term:
    """The compute's run-to-run spread: one new run's, from the repeated 1-worker runs; from one run, its
    own 95% interval read as a standard uncertainty (what it knows of its mean; the run-to-run spread
    beyond it is then the model error's to carry)."""
    if len(model.compute_samples) >= 2:
        return levels.sample_term("compute", model.compute_samples)
    return levels.Term("compute", math.log1p(model.compute_ci_s / model.compute_s) / 1.96)


def projection(cal: Calibration, workers: Sequence[int], links_gbit: Sequence[float],
               ps: Sequence[int] | None, level: float = levels.DEFAULT_LEVEL,
               model_error: schemes.ModelErrors | None = None, cores_per_host: float | None = None
               ) -> tuple[pd.DataFrame, list[dict]]:
    """Every scheme and transport per model, workers and link, the ps schemes per ps count, on hosts of their
    own; and the family answer of each cell (bench.analysis.projection.family_cells)."""
    found: list[table.Figure] = []
    for model in cal.models.values():
        shaped = model_tensors(model)
        for n in workers:
            for gbit in links_gbit:
                for i, (k, rule) in enumerate(ps_counts(n, ps)):
                    here = table.figures(model.model, shaped, cluster_of(model, n, gbit, cal.profile,
                                                                         cores_per_host=cores_per_host),
                                         PsSetup(k, False, ROUND_ROBIN), cal.profile,
                                         compute=compute_term(model), other_of=model.other_for, level=level,
                                         model_error=model_error)
                    for f in here:
                        if i == 0 or f.row["transport"] == GRPC:  # the rings once, the ps schemes per count
                            f.row["ps_rule"] = rule if f.row["transport"] == GRPC else ""
                            found.append(f)
    return pd.DataFrame([f.row for f in found]), family_cells.cells(found, cal.profile, level)


def winners(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, workers and link: the fastest scheme (with its transport and ps count), and the
    fastest of the synchronous ones (an asynchronous scheme's examples/s do not count what
    staleness costs)."""
    key = ["model", "workers", "link_gbit"]

    def best(rows: pd.DataFrame, name: str) -> pd.DataFrame:
        top = rows.loc[rows.groupby(key)["throughput_examples_per_s"].idxmax()]
        label = top["scheme"] + " over " + top["transport"] + top["ps"].map(lambda k: f", {k} ps" if k else "")
        return pd.DataFrame({**{c: top[c].to_numpy() for c in key}, name: label.to_numpy(),
                             f"{name}_examples_per_s": top["throughput_examples_per_s"].to_numpy()})

    synchronous = table[~table["scheme"].isin(ASYNCHRONOUS)]
    return best(table, "fastest").merge(best(synchronous, "fastest_synchronous"), on=key)


def crossover(workers: Sequence[int]) -> pd.DataFrame:
    return pd.DataFrame([{"workers": n, "ps_hosts_to_beat_ring": costs.byteps_crossover_ps_tasks(n)}
                         for n in workers])


def _options(run: pd.Series) -> dict:
    try:
        return json.loads(run.get("options") or "{}")
    except ValueError:
        return {}


def _placement(run: pd.Series) -> str:
    """The run's ps variable placement (its options), replica_device_setter's round-robin by default."""
    chosen = _options(run).get("ps_placement") or ROUND_ROBIN
    return chosen if chosen in PLACEMENTS else ROUND_ROBIN


def _as_run(shaped: ModelTensors, run: pd.Series) -> ModelTensors:
    """The tensors as the run placed them: with --ps-partition-mb, its large ones split over its ps tasks."""
    threshold_mb = _options(run).get("ps_partition_mb") or 0.0
    ps = int(run["ps"] or 0)
    return shaped.partitioned(ps, int(threshold_mb * 2**20)) if threshold_mb > 0 and ps > 1 else shaped


def validation(cal: Calibration, runs: pd.DataFrame,
               level: float = levels.DEFAULT_LEVEL) -> tuple[pd.DataFrame, list[str]]:
    """Each emulated-cluster run's measured throughput against the model's interval for its
    workers, ps tasks, link cap and wire. Where its emulated hosts share this machine's cores, each
    worker's compute is stretched as measured by the one-machine runs at that worker count
    (calibrate.shared_cpu_stretch), and the interval goes no higher than its strategy went on
    those cores over loopback (calibrate.shared_cpu_ceiling). Where each host had a CPU budget of
    its own (`cluster up --host-cores`), nothing is stretched, and the compute must have been
    measured on one such host; runs without that are left out: (the rows, why each run left out was).
    Each figure's interval at `level` carries the model's error of form calibrated on the other
    figures (leave-one-out: with_model_error)."""
    if runs.empty or "link_mbit" not in runs:
        return pd.DataFrame(), []
    local = one_machine_runs(runs)
    shaped: dict[str, ModelTensors] = {}
    rows, left_out = [], []
    for _, run in runs[runs["ok"] & runs["link_mbit"].notna()].iterrows():
        model = cal.models.get(run["model"])
        if model is None or pd.isna(run["throughput_examples_per_s"]) or not cal.profile.has(run.get("wire")):
            continue
        if model.model not in shaped:
            shaped[model.model] = model_tensors(model)
        scheme = run_scheme(run, shaped[model.model].has_table)
        if scheme is None:
            continue
        ratio = int(run["batch_size"]) / model.batch_size  # compute taken as proportional to the batch
        scaled = dataclasses.replace(model, batch_size=int(run["batch_size"]), compute_s=model.compute_s * ratio,
                                     compute_sd_s=model.compute_sd_s * ratio)
        try:
            cpu = hosts_cpu(run, scaled, local)
        except NotCalibrated as exc:
            left_out.append(str(exc))
            continue
        stretch, found, bounded = emulated_interval(cal.profile, run, scheme, scaled,
                                                    _as_run(shaped[model.model], run), cpu, level)
        terms = found.terms
        waiting = cpu.waiting(cal.profile, terms)  # at the profile's values
        ceiling = cpu.loopback
        measured = float(run["throughput_examples_per_s"])
        rows.append({"model": run["model"], "variant": run["variant"], "scheme": scheme, "wire": run.get("wire"),
                     "figure": figure_of(run), "run_id": run.get("run_id"), **scoring(run, measured),
                     "workers": int(run["workers"]), "ps": int(run["ps"] or 0), "link_mbit": float(run["link_mbit"]),
                     "measured_examples_per_s": measured, "interval": bounded,
                     "terms_examples_per_s": found.point,
                     "cpu_ceiling": ceiling, "cpu_ceiling_examples_per_s": ceiling[1] if ceiling else None,
                     "cpu_ceiling_from": ceiling[2] if ceiling else None,
                     "waiting_cpu_ceiling_examples_per_s": waiting,
                     "predicted_step_s": terms.step_s, "compute_stretch": stretch,
                     "compute_stretch_all_at_once": cpu.stretch, "compute_stretch_from": cpu.stretch_from,
                     # term by term, against the run's own split (a typical worker's medians)
                     **{f"{side}_{term}_s": value for term, predicted in (
                         ("compute", terms.compute_s), ("communication", terms.exposed_communication_s),
                         ("waiting", terms.waiting_s), ("other", terms.other_s))
                        for side, value in (("predicted", predicted),
                                            ("measured", recorded(run.get(f"{term}_p50_s"))))}})
    return with_model_error(rows), left_out


def bounded(found: intervals.Interval, ceiling: tuple[float, float, str] | None) -> intervals.Interval:
    """A figure no higher than its strategy went over loopback on these cores: where that binds, the
    loopback run's rate with its own 95 % interval as the figure's spread."""
    if ceiling is None or found.point <= (ceiling[0] + ceiling[1]) / 2:
        return found
    low, high, what = ceiling
    rate = (low + high) / 2
    spread = draws.of_term(math.log(high / rate) / 1.96, levels.INFINITE, draws.uniforms(what))
    return dataclasses.replace(found, point=rate, drawn=rate * spread, inputs=(what,))


def figure_of(run: pd.Series) -> str:
    """Which figure a run measured: its setting (the report's GROUP_KEY), the same for its repeats."""
    return "|".join(str(run.get(key)) for key in GROUP_KEY)


def scoring(run: pd.Series, measured: float) -> dict:
    """A worker's step as measured, and whether the figure is scored: not where its hosts' CPU budget
    comes in periods of which the step spans fewer than LEAST_PERIODS_PER_STEP."""
    step_s = int(run["batch_size"]) * int(run["workers"]) / measured
    period = recorded(run.get("host_cpu_period_s"))
    short = period is not None and step_s < LEAST_PERIODS_PER_STEP * period
    return {"worker_step_s": step_s, "host_cpu_period_s": period, "scored": not short,
            "not_scored_why": f"a step of {step_s * 1e3:.1f} ms spans fewer than {LEAST_PERIODS_PER_STEP} of its "
                              f"hosts' {period * 1e3:g} ms CPU periods" if short else None}


def with_model_error(rows: list[dict]) -> pd.DataFrame:
    """The validation rows with each measurement's interval: its own terms (bounded), and the model's
    error of its form from the scored measurements of every other figure of that form (levels.left_out:
    a figure's repeats never calibrate one another); and the rig's own repeat error beside it."""
    if not rows:
        return pd.DataFrame()
    found = [bounded(r.pop("interval"), r.pop("cpu_ceiling")) for r in rows]
    errors: dict[int, levels.Term] = {}
    forms = [schemes.form_of(r["scheme"]) for r in rows]
    for form in set(forms):
        mine = [i for i, f in enumerate(forms) if f == form]
        residuals = [math.log(rows[i]["measured_examples_per_s"] / found[i].point) for i in mine]
        found_errors = levels.left_out(residuals, [found[i].u for i in mine], [rows[i]["figure"] for i in mine],
                                       [rows[i]["scored"] for i in mine])
        errors.update(zip(mine, found_errors, strict=True))
    repeats = levels.repeat_errors([r["measured_examples_per_s"] for r in rows], [r["figure"] for r in rows])
    out = []
    for i, row in enumerate(rows):
        columns = intervals.interval_columns(found[i].with_model(errors[i]), "predicted")
        measured = row["measured_examples_per_s"]
        out.append({**row, **columns, "inside": bool(columns["predicted_low"] <= measured <= columns["predicted_high"]),
                    "error": columns["predicted_examples_per_s"] / measured - 1, "repeat_error": repeats[i]})
    return pd.DataFrame(out)


def validated_error(checked: pd.DataFrame) -> schemes.ModelErrors:
    """The model's error of each form over every validated figure of it: what a projection beyond them
    carries."""
    out = {}
    if checked.empty:
        return out
    for form, rows in checked.groupby(checked["scheme"].map(schemes.form_of)):
        residuals = [math.log(m / p) for m, p in zip(rows["measured_examples_per_s"],
                                                     rows["predicted_examples_per_s"], strict=True)]
        out[form] = levels.model_error(residuals, list(rows["u_log"]))
    return out


class NotCalibrated(Exception):
    """A run the calibration cannot predict, and why."""


class HostsCpu(NamedTuple):
    stretch: float  # of each worker's compute
    stretch_from: str  # where the stretch is from
    waiting: intervals.Ceiling  # what a rank's CPU while its collective flies allows
    loopback: tuple[float, float, str] | None  # (low, high, run): its strategy on these cores over loopback
    # the stretch holds what the exchange's own threads take (hosts sharing this machine's cores: all
    # of the sharing is in it), else the profile's compute_stretch adds it
    with_exchange_threads: bool


def hosts_cpu(run: pd.Series, model: ModelCalibration, local: pd.DataFrame) -> HostsCpu:
    """What an emulated run's hosts had of the CPU; NotCalibrated, saying why, for a run whose
    compute was not measured as its hosts had it."""
    budget = recorded(run.get("host_cores"))
    workers, wire = int(run["workers"]), run.get("wire")
    if budget is None:  # the hosts shared this machine's cores
        cores = float(run["cpu_count"]) if pd.notna(run.get("cpu_count")) else 1.0
        all_at_once, stretch_from = shared_cpu_stretch(local, model, workers, cores, run.get("family"), wire)
        return HostsCpu(all_at_once, stretch_from, waiting_cpu_ceiling(wire, workers, model.batch_size, cores),
                        shared_cpu_ceiling(local, run), True)
    if model.cpu_quota_cores is not None and abs(model.cpu_quota_cores - budget) < 1e-6:
        # each host its own budget, the compute measured on one such host: nothing is shared but a
        # host's cores, between its rank's compute and its transport's CPU
        return HostsCpu(1.0, f"hosts of {budget:g} cores each",
                        waiting_cpu_ceiling(wire, workers, model.batch_size, budget, sharing=1), None, False)
    raise NotCalibrated(f"{run['run_id']}: its hosts had {budget:g} cores each, and {model.model}'s compute "
                        f"({model.source}) was not measured on such a host (srun -N 1 on one)")


def run_cores_per_host(run: pd.Series) -> float | None:
    """The cores each of an emulated run's hosts had: its CPU budget (recorded as `host_cores`), else the
    machine's, which they shared."""
    budget = recorded(run.get("host_cores"))
    if budget is not None:
        return budget
    return float(run["cpu_count"]) if pd.notna(run.get("cpu_count")) else None


def emulated_interval(profile: Profile, run: pd.Series, scheme: str, model: ModelCalibration, shaped: ModelTensors,
                      cpu: HostsCpu, level: float = levels.DEFAULT_LEVEL
                      ) -> tuple[float, intervals.Interval, intervals.Interval]:
    """(compute stretch, interval of the terms, that interval under the waiting CPU's ceiling) of an
    emulated run on hosts that had `cpu`.
    A ring's workers compute at the same time
    (they leave each allreduce together): the stretch measured with all of them computing. A
    ps's fetch their parameters one after another from a busy ps and compute at points of the
    step that need not meet: the stretch for the share of the step they compute
    (calibrate.concurrent_stretch), found with the step it gives."""
    workers, ps = int(run["workers"]), PsSetup(int(run["ps"] or 1), False, _placement(run))
    cluster = dataclasses.replace(
        cluster_of(model, workers, float(run["link_mbit"]) / 1e3, profile, model.other_for(scheme, run["wire"]),
                   run_cores_per_host(run)),
        stretch_measured=cpu.with_exchange_threads)
    all_at_once = cpu.stretch
    overlapped = bool(run.get("exchange_overlaps_backward", True))

    def at(stretch: float, compute: levels.Term | None = None, bound: intervals.Ceiling | None = None
           ) -> intervals.Interval:
        return intervals.interval(scheme, run["wire"], shaped, cluster.compute_scaled(stretch), ps, profile,
                                compute=compute, ceiling=bound, overlapped=overlapped, level=level)

    def terms_at(stretch: float) -> StepTerms:  # the point alone: what the stretch settles on
        return intervals.evaluator(scheme, run["wire"], shaped, cluster.compute_scaled(stretch), ps,
                                   overlapped=overlapped)(profile)[2]

    stretch = all_at_once
    terms = terms_at(stretch)
    if scheme in (schemes.PS_SYNC, *ASYNCHRONOUS):
        for _ in range(100):
            settled = concurrent_stretch(all_at_once, workers, terms.compute_s / terms.step_s)
            if abs(settled - stretch) < 1e-4:
                break
            stretch = (stretch + settled) / 2  # damped: the share falls as the stretch rises
            terms = terms_at(stretch)
    compute = compute_term(model)
    return stretch, at(stretch, compute), at(stretch, compute, cpu.waiting)


def error_summary(checked: pd.DataFrame, left_out: Sequence[str] = ()) -> dict:
    """How the scored measurements fared, and the rig's own repeat error beside the projection's;
    `left_out`: the emulated runs not predicted, and why."""
    left_out = list(left_out)
    if checked.empty:
        return {"settings": 0, "left_out": left_out}
    not_scored = checked[~checked["scored"]]
    scored = checked[checked["scored"]]
    rig = scored["repeat_error"].dropna().abs()
    out = {"settings": int(len(scored)), "figures": int(scored["figure"].nunique()),
           "level": float(checked["level"].iloc[0]), "not_scored": int(len(not_scored)),
           "not_scored_why": sorted(set(not_scored["not_scored_why"])),
           "rig_median_repeat_error": float(rig.median()) if len(rig) else None,
           "repeated_settings": int(len(rig)), "left_out": left_out}
    if scored.empty:
        return out
    errors = scored["error"].abs()
    half = (scored["predicted_high"] - scored["predicted_low"]) / (scored["predicted_high"] + scored["predicted_low"])
    return {**out, "inside": int(scored["inside"].sum()), "coverage": float(scored["inside"].mean()),
            "median_half_width": float(half.median()),
            "median_abs_error": float(errors.median()), "worst_abs_error": float(errors.max())}


def summary_line(summary: dict) -> str:
    """The check in one sentence: coverage of the scored measurements, the points' error, and the rig's
    own repeat error beside it (the CLI's and the report's)."""
    if not summary.get("settings"):
        return f"no scored measurement ({summary.get('not_scored', 0)} not scored)"
    rig = summary.get("rig_median_repeat_error")
    figures = f" ({summary['figures']} figures)" if "figures" in summary else ""  # a projection.json of before
    out = (f"{summary['inside']} of {summary['settings']} scored measurements{figures} inside "
           f"their {summary['level']:.0%} intervals (median half-width {summary['median_half_width']:.0%}); points: "
           f"median |error| {summary['median_abs_error']:.0%}, worst {summary['worst_abs_error']:.0%}; "
           + (f"the rig's own repeat error: median {rig:.1%} over {summary.get('repeated_settings')} repeated "
              "measurements" if rig is not None else "no figure measured twice, so no repeat error of the rig"))
    if summary.get("not_scored"):
        out += f"; {summary['not_scored']} not scored ({'; '.join(summary['not_scored_why'][:3])})"
    return out
