"""What a projection from runs is calibrated from, read from a results folder: per model its
gradient's make-up (the runs' recorded bytes and touched rows), one worker's step compute and
its spread (the baseline strategy's 1-worker runs, or a compute time the user types), each
exchange's own host work per step (the other strategies' 1-worker runs), and the model's own
code to trace its tensors. The transports come from a profile
(bench.analysis.projection.profile). Runs on the emulated cluster are never read here: they
are what the projection is checked against."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.analysis.projection.cluster import StepTerms
from bench.analysis.projection.fit import step_spread
from bench.analysis.projection.intervals import Ceiling
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.schemes import scheme_of
from bench.config import RunConfig
from bench.errors import UsageError
from bench.metrics import Gradient
from bench.run import models
from bench.run.contract import ALLREDUCE, PARAMETER_SERVER, WHOLE_COMPUTE
from bench.run.process.resume import read_record
from bench.run.process.schema import THROUGHPUT
from bench.run.process.summary import read_steps

EXCHANGING = (ALLREDUCE, PARAMETER_SERVER)
# the runs whose split's compute measures how much sharing the cores stretches it: an exchange beside the
# compute, the whole compute in the split
STRETCH_FROM = tuple(f for f in EXCHANGING if f in WHOLE_COMPUTE)


@dataclass(frozen=True)
class ModelCalibration:
    model: str  # its label in the results
    spec: str  # what builds it: a registered name, or a user's file (bench.run.models)
    sizes: tuple[tuple[str, int], ...]  # what it was built at (bench.run.models.settings)
    gradient: Gradient
    batch_size: int  # per worker, of the runs the compute was measured on
    compute_s: float  # one worker's step: forward, backward and update of its batch
    compute_sd_s: float  # spread of that step from one step to the next
    source: str
    # half-width of compute_s's interval: one run's 95% interval, or over repeated runs from the lowest
    # of theirs to the highest (model_calibration): how well the runs know it
    compute_ci_s: float = 0.0
    # ((scheme, wire, seconds), ...): the host's per-step work of each exchange (Cluster.other_s; host_work)
    other_s: tuple[tuple[str, str, float], ...] = ()
    cpu_quota_cores: float | None = None  # the CPU limit of the run the compute was measured in (none: None)
    compute_samples: tuple[float, ...] = ()  # each repeated 1-worker run's mean step: the run-to-run spread

    @property
    def gradient_bytes(self) -> int:
        return self.gradient.full_bytes

    def other_for(self, scheme: str, wire: str) -> float:
        """The host's per-step work of `scheme` over `wire`: its 1-worker run's, else the median of the
        scheme's over other wires, else 0 (no 1-worker run of the scheme)."""
        exact = [s for sc, w, s in self.other_s if (sc, w) == (scheme, wire)]
        found = exact or [s for sc, w, s in self.other_s if sc == scheme]
        return float(statistics.median(found)) if found else 0.0


@dataclass(frozen=True)
class Calibration:
    models: dict[str, ModelCalibration]
    profile: Profile  # the transports
    profile_why: str

    def describe(self) -> pd.DataFrame:
        return pd.DataFrame([{"model": m.model, "gradient_bytes": m.gradient_bytes, "batch_size": m.batch_size,
                              "compute_ms": m.compute_s * 1e3, "compute_ci95_ms": m.compute_ci_s * 1e3,
                              "compute_sd_ms": m.compute_sd_s * 1e3,
                              "compute_from": m.source} for m in self.models.values()])


def recorded(value: float | None) -> float | None:
    """A recorded figure, or None where the run has none (None or NaN)."""
    return None if value is None or pd.isna(value) else float(value)


def one_machine_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The finished runs of a results table that did not run on the emulated cluster."""
    if runs.empty or "ok" not in runs:
        return runs
    emulated = runs["link_mbit"].notna() if "link_mbit" in runs else False
    return runs[runs["ok"] & ~emulated]


def model_calibration(runs: pd.DataFrame, model: str, compute_ms: float | None) -> ModelCalibration:
    mine = runs[runs["model"] == model] if len(runs) else runs
    known = mine["gradient_bytes_per_step"].dropna() if len(mine) else pd.Series(dtype=float)
    if known.empty:
        raise UsageError(f"--model {model}: no finished run of it under --from to read its gradient bytes")
    gradient = gradient_of(mine.loc[known.index[0]])
    spec, sizes = built_as(mine.loc[known.index[0]])
    base = mine[mine["scaling_baseline"].fillna(False).astype(bool) & (mine["workers"] == 1)]
    base = base.sort_values("purpose", key=lambda p: p != "throughput")  # synthetic-data runs first
    if compute_ms is not None:
        batch = int(base["batch_size"].iloc[0]) if len(base) else int(mine["batch_size"].iloc[0])
        sd, work = 0.0, ()
        if len(base):
            first = base.iloc[0]
            mean, spread = step_spread(read_steps(first["path"], missing_ok=True), int(first["warmup_steps"]))
            sd = compute_ms / 1e3 * spread / mean  # the spread measured here, relative to the typed time
            work = host_work(mine, first, gradient)
        return ModelCalibration(model, spec, sizes, gradient, batch, compute_ms / 1e3, sd, "--compute-ms",
                                other_s=work)
    if base.empty:
        raise UsageError(f"--model {model}: no 1-worker baseline run under --from; run one or give --compute-ms")
    run = base.iloc[0]
    repeats = _repeats_of(base, run)
    spreads = [step_spread(read_steps(r["path"], missing_ok=True), int(r["warmup_steps"]))
               for _, r in repeats.iterrows()]
    mean = statistics.fmean(m for m, _ in spreads)
    sd = statistics.fmean(s for _, s in spreads)
    # each run's own 95% interval on its examples/s (batch means, bench.metrics), relative, on its
    # step; over repeated runs, from the lowest of their intervals to the highest
    ends = [(m * (1 - r), m * (1 + r)) for (m, _), r in zip(spreads, _relative_ci(repeats), strict=True)]
    half = max(mean - min(low for low, _ in ends), max(high for _, high in ends) - mean)
    source = f"run {run['run_id']}" if len(repeats) == 1 else \
        f"{len(repeats)} runs: {', '.join(str(r) for r in repeats['run_id'])}"
    return ModelCalibration(model, spec, sizes, gradient, int(run["batch_size"]), mean, sd, source,
                            min(half, 0.5 * mean), host_work(mine, run, gradient),
                            recorded(run.get("cpu_quota_cores")), tuple(m for m, _ in spreads))


def _repeats_of(base: pd.DataFrame, run: pd.Series) -> pd.DataFrame:
    """The 1-worker runs that repeat `run`: same purpose, batch and CPU limit."""
    quota = recorded(run.get("cpu_quota_cores"))
    same = (base["purpose"].fillna("") == (run["purpose"] if pd.notna(run["purpose"]) else "")) \
        & (base["batch_size"] == run["batch_size"])
    if "cpu_quota_cores" in base:
        same &= base["cpu_quota_cores"].map(lambda q: recorded(q) == quota)
    return base[same]


def _relative_ci(runs: pd.DataFrame) -> list[float]:
    """Each run's 95% interval's half-width relative to its examples/s (0 where not recorded)."""
    out = []
    for _, r in runs.iterrows():
        ci = r.get("throughput_ci95_examples_per_s")
        out.append(float(ci) / float(r["throughput_examples_per_s"]) if pd.notna(ci) and ci else 0.0)
    return out


def host_work(runs: pd.DataFrame, baseline: pd.Series, gradient: Gradient) -> tuple[tuple[str, str, float], ...]:
    """Per (scheme, wire) of the model's 1-worker runs: the host's per-step work outside compute and
    the exchange (the split's other_p50_s, bench.metrics.split_steps) beyond the baseline run's, whose
    own is inside its step and so inside the compute. Runs recorded without the split give none."""
    if "other_p50_s" not in runs or pd.isna(baseline.get("other_p50_s")):
        return ()
    found: dict[tuple[str, str], list[float]] = {}
    for _, run in runs[(runs["workers"] == 1) & runs["other_p50_s"].notna()].iterrows():
        scheme = run_scheme(run, gradient.table_bytes > 0)
        if scheme is not None and isinstance(run.get("wire"), str):
            found.setdefault((scheme, run["wire"]), []).append(
                max(0.0, float(run["other_p50_s"]) - float(baseline["other_p50_s"])))
    return tuple((scheme, wire, float(statistics.median(v))) for (scheme, wire), v in sorted(found.items()))


def run_scheme(run: pd.Series, has_table: bool) -> str | None:
    """The exchange scheme of a run, from its row of the results table (schemes.scheme_of)."""
    return scheme_of(run.get("family"), bool(run.get("asynchronous")), bool(run.get("table_dense")), has_table)


def gradient_of(run: pd.Series) -> Gradient:
    """A run's gradient make-up from its row of the results table (older rows: all dense)."""
    facts = {"gradient_bytes_per_step": int(run["gradient_bytes_per_step"])}
    for key in ("table_bytes", "rows_touched_per_step", "row_bytes"):
        if key in run and pd.notna(run[key]):
            facts[key] = run[key]
    return Gradient.from_facts(facts)


def built_as(run: pd.Series) -> tuple[str, tuple[tuple[str, int], ...]]:
    """What builds a run's model, and at what size: its config's name (a user's file by its path; the
    results table has its label) and bench.run.models.settings."""
    try:
        config = RunConfig.from_dict(read_record(Path(run["path"]))["config"])
        return config.model, tuple(sorted(models.settings(config).items()))
    except (ValueError, KeyError, TypeError, UsageError):
        return str(run["model"]), ()


def preferring(runs: pd.DataFrame, column: str, wanted: object) -> pd.DataFrame:
    """The runs whose `column` is `wanted` where there are such, else all of them."""
    if wanted is None or column not in runs or not (runs[column] == wanted).any():
        return runs
    return runs[runs[column] == wanted]


def shared_cpu_stretch(runs: pd.DataFrame, model: ModelCalibration, workers: int, cores: float,
                       family: str | None = None, wire: str | None = None) -> tuple[float, str]:
    """How much longer one worker's step compute takes when `workers` workers share this machine's
    cores (as the emulated cluster's hosts do), over the calibrated compute: the median compute
    (bench.run.process.breakdown) of this machine's runs of the model with that many workers of an
    exchanging strategy whose split holds the whole compute (STRETCH_FROM: not a ps's, whose forward
    pass overlapping its parameters' arrival counts as communication; resnet20's ps-sync at 2 workers
    read 1.06 times the 1-worker compute where its rings read 1.82 and its steps took twice as long),
    of `family` where it is one and has such runs, and of those over `wire` where there are such
    (what an exchange's own threads take from the compute is its transport's: Horovod's background
    loop, Open MPI's progress polling; resnet20 at 2 workers computed 2.13x alone under Horovod over
    MPI, 1.52x under TensorFlow's collectives). Runs recorded without the split count their median
    step. Without such runs: workers / cores."""
    exchanging = runs["family"].isin(STRETCH_FROM) if len(runs) else pd.Series(dtype=bool)
    same = runs[exchanging & (runs["model"] == model.model) & (runs["workers"] == workers)
                & (runs["batch_size"] == model.batch_size)] if len(runs) else runs
    if family is not None and (same["family"] == family).any():
        same = preferring(same[same["family"] == family], "wire", wire)
    compute = same["compute_p50_s"] if "compute_p50_s" in same else pd.Series(dtype=float, index=same.index)
    measured = compute.fillna(same["step_time_p50_s"]).dropna() if len(same) else pd.Series(dtype=float)
    if measured.empty:
        return max(1.0, workers / cores), f"{workers} workers / {cores:g} cores"
    return max(1.0, float(measured.median()) / model.compute_s), \
        f"median compute of {len(measured)} one-machine runs at {workers} workers"


def shared_cpu_ceiling(runs: pd.DataFrame, run: pd.Series) -> tuple[float, float, str] | None:
    """The throughput an emulated `run` cannot pass, as (low, high, what): its strategy's at the same
    model, batch and worker count on this machine over loopback (the one-machine `runs`), whose
    processes share the cores the emulated hosts share, with every CPU cost of the exchange (the ps's
    serving, gRPC's serialisation, Python) that the model's terms leave out (embedding at 4 workers and
    1000 Mbit/s: ps-sync's emulated run made 23,500 examples/s, its loopback run 25,900, the terms alone
    39,100). Of the run's ps count and wire where there are such runs; its 95% interval; None without
    one."""
    if runs.empty:
        return None
    same = runs[(runs["strategy"] == run["strategy"]) & (runs["model"] == run["model"])
                & (runs["workers"] == run["workers"]) & (runs["batch_size"] == run["batch_size"])]
    for column, wanted in (("purpose", THROUGHPUT), ("ps", run.get("ps")), ("wire", run.get("wire"))):
        same = preferring(same, column, wanted)
    same = same.dropna(subset=["throughput_examples_per_s"])
    if same.empty:
        return None
    rate = same["throughput_examples_per_s"]
    ci = same["throughput_ci95_examples_per_s"].fillna(0.0) if "throughput_ci95_examples_per_s" in same else 0.0
    return (float((rate - ci).min()), float((rate + ci).max()),
            f"{len(same)} one-machine run(s) of {run['strategy']} at {int(run['workers'])} workers")


def waiting_cpu_ceiling(wire: str | None, workers: int, batch_size: int, cores: float,
                        sharing: int | None = None) -> Ceiling:
    """The examples/s an emulated ring cannot pass where its ranks keep cores busy while their
    collectives are in flight (Open MPI's progress polling, Horovod's loop: the profile's
    `<wire>.wait_cpu_share`), as an intervals.Ceiling (None at a point without that share, or for
    a step without a collective). Its hosts share this machine's `cores`, so a step lasts at
    least its compute as the workers stretch it computing at once, the host's own work, and
    every rank's CPU while its reductions are in flight spread over the cores:
    (compute + waiting + other) + workers x in-flight time x share / cores; below the terms'
    own step it does not bind (cnn at 4 workers over MPI at 100 Mbit/s: a 1.05 s step measured,
    0.54 predicted by the terms, 0.04 + 4 x 0.49 x 1 / 2 by this). `sharing`: the ranks that share
    those cores, when not all the workers (hosts with a CPU budget each: 1 rank on its host's cores)."""
    def ceiling(point: Profile, terms: StepTerms) -> float | None:
        share = point.get(f"{wire}.wait_cpu_share")
        if share is None or terms.collective_s <= 0 or workers < 2:
            return None
        ranks = workers if sharing is None else sharing
        floor = terms.compute_s + terms.waiting_s + terms.other_s + ranks * terms.collective_s * share / cores
        return workers * batch_size / floor

    return ceiling


def concurrent_stretch(all_at_once: float, workers: int, computing_share: float) -> float:
    """The stretch of one worker's compute when the others each compute `computing_share` of
    the time at random points of it (ps workers, which fetch their parameters one after another
    from a busy ps): from 1, alone, to `all_at_once` (shared_cpu_stretch), every worker
    computing at the same time, in proportion to how many others compute beside it."""
    if workers < 2:
        return 1.0
    return 1.0 + (all_at_once - 1.0) * min(1.0, max(0.0, computing_share))


def calibrate(results: Path, all_runs: pd.DataFrame, models: list[str] | None, compute_ms: float | None,
              profile: Profile, why: str) -> Calibration:
    """`all_runs`: collect.load of `results` (read once by the caller)."""
    runs = one_machine_runs(all_runs)
    names = models or (sorted(runs["model"].dropna().unique()) if len(runs) else [])
    if not names:
        raise UsageError(f"--from {results}: no finished run to calibrate from")
    return Calibration({m: model_calibration(runs, m, compute_ms) for m in names}, profile, why)
