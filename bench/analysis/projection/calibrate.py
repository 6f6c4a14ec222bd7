"""What the projection is calibrated from, read from a results folder: per model the
gradient bytes, one worker's step compute and its spread (the baseline strategy's
1-worker runs, or a compute time the user types), and per exchange the latency fitted
to the micro-benchmark sweep. Runs on the emulated cluster are never read here: they
are what the projection is checked against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.analysis.micro_summary import SUMMARY_FILE
from bench.analysis.projection import profile
from bench.analysis.projection.fit import fit_transports, step_spread
from bench.errors import UsageError
from bench.metrics import ALLREDUCE_OP, PS_ROUNDTRIP_OP, Gradient, messages
from bench.run.process.summary import read_steps
from strategies.base import ALLREDUCE, PARAMETER_SERVER

# which sweep calibrates which exchange's latency per message: (kind, transports in order of preference).
# The ring's is raw MPI's: a framework's own cost per call (Horovod's cycle and negotiation) is
# not paid per ring hop, so it is a separate per-step overhead (RING_OVERHEAD_FROM less raw MPI).
LATENCY_FROM = {"ring": (ALLREDUCE_OP, ("mpi4py", "horovod-mpi", "horovod-gloo", "tf-collective")),
                "ps": (PS_ROUNDTRIP_OP, ("ps-1ps", "ps-2ps"))}
RING_OVERHEAD_FROM = ("horovod-mpi", "mpi4py")


EXCHANGING = (ALLREDUCE, PARAMETER_SERVER)


@dataclass(frozen=True)
class ModelCalibration:
    model: str
    gradient: Gradient
    batch_size: int  # per worker, of the runs the compute was measured on
    compute_s: float  # one worker's step: forward, backward and update of its batch
    compute_sd_s: float  # spread of that step from one step to the next
    source: str

    @property
    def gradient_bytes(self) -> int:
        return self.gradient.full_bytes


@dataclass(frozen=True)
class Calibration:
    models: dict[str, ModelCalibration]
    latency_s: dict[str, float]  # exchange ("ring", "ps") -> alpha, per message
    latency_source: dict[str, str]
    ring_overhead_s: float = 0.0  # per allreduce step, beyond the ring's own messages

    def describe(self) -> pd.DataFrame:
        return pd.DataFrame([{"model": m.model, "gradient_bytes": m.gradient_bytes, "batch_size": m.batch_size,
                              "compute_ms": m.compute_s * 1e3, "compute_sd_ms": m.compute_sd_s * 1e3,
                              "compute_from": m.source} for m in self.models.values()])


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
    base = mine[mine["scaling_baseline"].fillna(False).astype(bool) & (mine["workers"] == 1)]
    base = base.sort_values("purpose", key=lambda p: p != "throughput")  # synthetic-data runs first
    if compute_ms is not None:
        batch = int(base["batch_size"].iloc[0]) if len(base) else int(mine["batch_size"].iloc[0])
        sd = 0.0
        if len(base):
            first = base.iloc[0]
            mean, spread = step_spread(read_steps(first["path"], missing_ok=True), int(first["warmup_steps"]))
            sd = compute_ms / 1e3 * spread / mean  # the spread measured here, relative to the typed time
        return ModelCalibration(model, gradient, batch, compute_ms / 1e3, sd, "--compute-ms")
    if base.empty:
        raise UsageError(f"--model {model}: no 1-worker baseline run under --from; run one or give --compute-ms")
    run = base.iloc[0]
    mean, sd = step_spread(read_steps(run["path"], missing_ok=True), int(run["warmup_steps"]))
    return ModelCalibration(model, gradient, int(run["batch_size"]), mean, sd, f"run {run['run_id']}")


def gradient_of(run: pd.Series) -> Gradient:
    """A run's gradient make-up from its row of the results table (older rows: all dense)."""
    facts = {"gradient_bytes_per_step": int(run["gradient_bytes_per_step"])}
    for key in ("table_bytes", "rows_touched_per_step", "row_bytes"):
        if key in run and pd.notna(run[key]):
            facts[key] = run[key]
    return Gradient.from_facts(facts)


def sweep_fits(results: Path) -> pd.DataFrame:
    sweeps = [pd.read_csv(p) for p in sorted(results.rglob(SUMMARY_FILE))]
    return fit_transports(pd.concat(sweeps, ignore_index=True)) if sweeps else pd.DataFrame()


def _largest(fitted: pd.DataFrame, kind: str, transport: str) -> pd.Series | None:
    rows = fitted[(fitted["kind"] == kind) & (fitted["transport"] == transport)] if len(fitted) else fitted
    return rows.sort_values("processes").iloc[-1] if len(rows) else None


def latencies(fitted: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    values, sources = {}, {}
    for exchange, (kind, transports) in LATENCY_FROM.items():
        for transport in transports:
            best = _largest(fitted, kind, transport)
            if best is not None:
                values[exchange] = float(best["alpha_us"]) / 1e6
                sources[exchange] = f"{transport} at {int(best['processes'])} processes (micro-benchmark fit)"
                break
        else:  # without a micro-benchmark sweep: the default profile's
            default = profile.load(profile.DEFAULT).constants["latency_s"]
            values[exchange] = default.value
            sources[exchange] = (f"{default.value * 1e6:.0f} us, profile {profile.DEFAULT}'s latency_s "
                                 "(no micro-benchmark under --from)")
    return values, sources


def ring_overhead(fitted: pd.DataFrame) -> float:
    """Horovod's fixed cost per allreduce beyond raw MPI's at the same process count (fit intercepts)."""
    framework, raw = (_largest(fitted, ALLREDUCE_OP, t) for t in RING_OVERHEAD_FROM)
    if framework is None or raw is None or framework["processes"] != raw["processes"]:
        return 0.0
    hops = messages(ALLREDUCE_OP, int(raw["processes"]))
    return max(0.0, (float(framework["alpha_us"]) - float(raw["alpha_us"])) * hops / 1e6)


def shared_cpu_stretch(runs: pd.DataFrame, model: ModelCalibration, workers: int, cores: float,
                       family: str | None = None) -> tuple[float, str]:
    """How much longer one worker's step compute takes when `workers` workers share this machine's
    cores (as the emulated cluster's hosts do), over the calibrated compute: the median compute
    (bench.run.process.breakdown) of this machine's runs of the model with that many workers of an
    exchanging strategy, of `family` where there are such runs (Horovod's background thread takes
    CPU from its workers' compute). Runs recorded without the split count their median step.
    Without such runs: workers / cores."""
    exchanging = runs["family"].isin(EXCHANGING) if len(runs) else pd.Series(dtype=bool)
    same = runs[exchanging & (runs["model"] == model.model) & (runs["workers"] == workers)
                & (runs["batch_size"] == model.batch_size)] if len(runs) else runs
    if family is not None and (same["family"] == family).any():
        same = same[same["family"] == family]
    compute = same["compute_p50_s"] if "compute_p50_s" in same else pd.Series(dtype=float, index=same.index)
    measured = compute.fillna(same["step_time_p50_s"]).dropna() if len(same) else pd.Series(dtype=float)
    if measured.empty:
        return max(1.0, workers / cores), f"{workers} workers / {cores:g} cores"
    return max(1.0, float(measured.median()) / model.compute_s), \
        f"median compute of {len(measured)} one-machine runs at {workers} workers"


def concurrent_stretch(all_at_once: float, workers: int, computing_share: float) -> float:
    """The stretch of one worker's compute when the others each compute `computing_share` of
    the time at random points of it (ps workers, which fetch their parameters one after another
    from a busy ps): from 1, alone, to `all_at_once` (shared_cpu_stretch), every worker
    computing at the same time, in proportion to how many others compute beside it."""
    if workers < 2:
        return 1.0
    return 1.0 + (all_at_once - 1.0) * min(1.0, max(0.0, computing_share))


def calibrate(results: Path, all_runs: pd.DataFrame, models: list[str] | None,
              compute_ms: float | None) -> Calibration:
    """`all_runs`: collect.load of `results` (read once by the caller)."""
    runs = one_machine_runs(all_runs)
    names = models or (sorted(runs["model"].dropna().unique()) if len(runs) else [])
    if not names:
        raise UsageError(f"--from {results}: no finished run to calibrate from")
    fitted = sweep_fits(results)
    latency, source = latencies(fitted)
    return Calibration({m: model_calibration(runs, m, compute_ms) for m in names}, latency, source,
                       ring_overhead(fitted))
