"""Every figure the suite reports, defined once; every consumer calls these.

Run figures (from a run's steps.csv and evals.csv; bench.run.process.summary applies them):
- step split: each stamped step's time as compute, communication, waiting and other
  (`split_steps`, STEP_PARTS; the definition is written beside them, below).
- measured steps: every worker's steps from its local step `warmup_steps` on
  (`measured_steps`: the summary, the report's plots and the link meter use it). A
  resumed run (--resume) warms up again: in each later attempt, from `warmup_steps`
  past the attempt's first local step.
- throughput (examples/s): examples whose gradients reached the model (`applied`;
  all examples computed, except where a strategy drops stale gradients) over the
  measured span, from the first measured step's start to the last one's end; in a
  resumed run, the sum of each attempt's span (the time between attempts is not in it).
  `computed_throughput_examples_per_s` counts every example a worker computed.
- its 95% interval: batch means over consecutive steps. The measured steps, in
  order of their end, are cut into up to 10 batches of consecutive steps; each
  batch has its examples and its own elapsed time (end of its last step minus end
  of the previous batch's last step), so the interval reflects how step times
  vary. Half-width: Student t (k-1 degrees of freedom) times the standard error of
  the ratio estimator sum(examples) / sum(seconds) over the k batches.
- step time (s): t_end - t_start of each measured step of each worker; p50/p90/p99.
- start-up (s): from the run's start (the launcher's clock) to its first training step.
- time to target (s): from the first training step to the first evaluation whose
  accuracy >= target (start-up is not in it).
- checkpoint overhead: the chief's saves (checkpoints.csv: when each began, how long it
  took) stop its training, and every worker that waits for it. Throughput between
  checkpoints: the applied examples of the measured steps that end outside every save,
  over the measured span less the seconds of the saves inside it. Overhead: 1 - throughput
  / throughput between checkpoints.
- recovery (--recover; run.json's `recoveries`, each with the run-clock second `at_s` the
  failure was seen, the global step reached and the one the run went on from): downtime
  (s), from the failure to the end of the first step begun after it by what was restarted
  (the worker, or any worker of a restarted job); steps lost, the global steps done again
  (step reached - step gone on from); time lost (s), from the failure until a step begun
  after it took the run past the global step it had reached.
- scaling efficiency: throughput / (workers x throughput of the 1-worker run of the
  baseline strategy, same model and per-worker batch).

Bytes (bench.metrics.Gradient: D = the float32 gradient bytes of the dense variables one
worker produces per step; T = the embedding tables' bytes; u = distinct table rows one
worker's batch touches, measured on its batches; r = bytes of a row; i = 4, an int32 index):
- ring allreduce: every rank sends and receives 2(n-1)/n x (D + T) per step (the ring
  factor; the tables go dense: Horovod's sparse_as_dense).
- allgather of the touched rows (Horovod's default for tf.IndexedSlices, TensorFlow's
  collectives): every rank sends and receives (n-1) x u x (r + i), plus the ring
  allreduce of D.
- parameter servers: a worker sends D + u x (r + 2i) (gradients, the touched rows with
  their indices, and the ids it reads) and receives D + u x r (parameters, the touched rows);
  k ps tasks sharing the variables evenly each take 1/k of every worker's traffic.
- parameter averaging (local SGD): no gradient moves; every H steps each rank
  ring-allreduces its weights (D + T), and its optimizer slots where they are averaged
  too: 2(n-1)/n x (D + T) x (1 + slots) / H per step, after S synchronous steps that
  ring-allreduce the gradient.
- gradient compression (a dense gradient of D bytes on the wire): fp16 sends D/2; top-k
  with ratio k sends k x D of values and as many int32 indices, 2k x D; ring allreduce
  cannot sum top-k pairs, so they are allgathered: every rank sends and receives
  (n-1) x 2k x D. Parameters pulled from a ps and tables' touched rows go uncompressed.
- link utilisation: bytes in the busier direction x 8 / seconds / the link's bit rate.

Bandwidth, as NCCL's tests define it (their doc/PERFORMANCE.md):
- algbw = bytes / time of the operation as a whole.
- busbw = algbw x the bytes the busiest link carries per byte of buffer: the ring
  factor for allreduce, 2 for a ps round trip (up and back), 1 for a local copy.
  The figure to hold against a link's bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

MAX_BATCHES = 10
MIN_STEPS_PER_BATCH = 3

# kinds of operation a micro-benchmark times (its records' "kind")
ALLREDUCE_OP, PS_ROUNDTRIP_OP, COPY_OP = "allreduce", "ps_roundtrip", "copy"


# the backward pass costs twice the forward pass's FLOPs, layer by layer (Kaplan et al. 2020, section 2.1:
# 2N forward, 4N backward per parameter and token); the projection's forward share is the same fact
BACKWARD_PER_FORWARD = 2.0


def model_flops_per_example(forward_flops: float) -> float:
    """FLOPs of one example's forward and backward pass, counted once (no recomputation, no update)."""
    return forward_flops * (1.0 + BACKWARD_PER_FORWARD)


def mfu(examples_per_s: float, flops_per_example: float, peak_flops_per_s: float) -> float:
    """Model FLOP/s utilization: the model's FLOP/s at this throughput over the peak of the devices used."""
    return examples_per_s * flops_per_example / peak_flops_per_s


SHOWN_DIGITS = 3  # significant digits of a figure shown to a reader (the one-line result, the report)


def significant(value: float, digits: int = SHOWN_DIGITS) -> str:
    """`value` to `digits` significant digits, with thousands separators, never in exponent form:
    13,191 -> "13,200", 2.08 -> "2.08", 0.01234 -> "0.0123"."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    places = digits - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, places)
    if rounded and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(abs(value))):
        places -= 1  # 999.6 rounds to 1,000: one place fewer
    return f"{round(value, places):,.{max(0, places)}f}"


def attempts(steps: pd.DataFrame, restarts_s: list[float]) -> np.ndarray:
    """The attempt each row belongs to (0: the first), by its start and when each later
    attempt of a resumed run began (seconds on the run's clock)."""
    return np.searchsorted(np.sort(restarts_s), steps["t_start_s"].to_numpy(), side="right")


def measured_steps(steps: pd.DataFrame, warmup_steps: int, restarts_s: list[float] = ()) -> pd.DataFrame:
    """Rows from each worker's local step `warmup_steps` on (local steps count from 0); in a
    resumed run, from `warmup_steps` past each worker's first local step in each attempt."""
    if not len(restarts_s):
        return steps[steps["local_step"] >= warmup_steps]
    first = steps.groupby([attempts(steps, restarts_s), steps["worker"].to_numpy()])["local_step"].transform("min")
    return steps[steps["local_step"] >= first + warmup_steps]


def recovery_costs(steps: pd.DataFrame, recoveries: list[dict]) -> list[dict]:
    """Each recovery with its downtime_s, steps_lost and time_lost_s (None: never happened)."""
    out = []
    for rec in recoveries:
        after = steps[steps["t_start_s"] > rec["at_s"]]
        restarted = after[after["worker"] == rec["worker"]] if rec.get("worker") is not None else after
        past = after[after["global_step"] > rec["step_at_failure"]]
        out.append({**rec, "downtime_s": _since(restarted, rec["at_s"]),
                    "steps_lost": int(rec["step_at_failure"] - rec["restart_step"]),
                    "time_lost_s": _since(past, rec["at_s"])})
    return out


def _since(rows: pd.DataFrame, at_s: float) -> float | None:
    return float(rows["t_end_s"].min() - at_s) if len(rows) else None


def applied_examples(steps: pd.DataFrame) -> np.ndarray:
    """Examples of each step whose gradient reached the model (a step marked applied=0 adds none)."""
    examples = steps["examples"].to_numpy(dtype=float)
    if "applied" not in steps:
        return examples
    applied = steps["applied"].to_numpy(dtype=float)
    return np.where(np.isnan(applied) | (applied != 0), examples, 0.0)


def step_batches(steps: pd.DataFrame, examples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(examples, seconds) of up to MAX_BATCHES batches of consecutive steps (by end time)."""
    if len(steps) < 2:
        return np.array([]), np.array([])
    order = np.argsort(steps["t_end_s"].to_numpy(), kind="stable")
    ends = steps["t_end_s"].to_numpy()[order]
    count = max(1, min(MAX_BATCHES, len(steps) // MIN_STEPS_PER_BATCH))
    bounds = np.linspace(0, len(steps), count + 1).astype(int)
    edges = np.concatenate([[steps["t_start_s"].min()], ends[bounds[1:] - 1]])
    return np.add.reduceat(examples[order], bounds[:-1]), np.diff(edges)


def t975(dof: int) -> float:
    """Student's t quantile at 0.975 for `dof` degrees of freedom: the half-width of a 95%
    interval in standard errors. Solved by bisection on the distribution's closed form for an
    integer dof (Abramowitz & Stegun 26.7.3-4), to the last bits of a float: scipy.special, which
    gives the same, cost every run's launcher 0.3 CPU-s to import (0.72-0.89 against 0.43-0.51
    for numpy and pandas alone, on the project's 2-core machine)."""
    if dof < 1:
        raise ValueError(f"t975 needs dof >= 1, got {dof}")
    low, high = 0.0, 16.0
    while _t_two_sided(high, dof) < 0.95:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        low, high = (mid, high) if _t_two_sided(mid, dof) < 0.95 else (low, mid)
    return high


def _t_two_sided(t: float, dof: int) -> float:
    """P(|T| <= t) for Student's t with an integer `dof` (Abramowitz & Stegun 26.7.3, odd; 26.7.4, even)."""
    theta = math.atan(t / math.sqrt(dof))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if dof % 2:
        term, total = math.cos(theta), 0.0
        for j in range(1, (dof - 1) // 2 + 1):
            total += term
            term *= cos2 * (2 * j) / (2 * j + 1)
        return 2 / math.pi * (theta + sin * total)
    term, total = 1.0, 0.0
    for j in range(1, dof // 2 + 1):
        total += term
        term *= cos2 * (2 * j - 1) / (2 * j)
    return sin * total


def ratio_and_ci95(examples: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
    """sum(examples)/sum(seconds) and the half-width of its 95% interval over the batches."""
    total = float(np.sum(seconds))
    if len(seconds) == 0 or total <= 0:
        return math.nan, math.nan
    ratio = float(np.sum(examples)) / total
    k = len(seconds)
    if k < 2:
        return ratio, math.nan
    residuals = examples - ratio * seconds
    stderr = math.sqrt(float(np.sum(residuals**2)) / (k * (k - 1))) / (total / k)
    return ratio, t975(k - 1) * stderr


def throughput(measured: pd.DataFrame, examples: np.ndarray, restarts_s: list[float] = ()) -> tuple[float, float]:
    """Examples/s over the measured steps and its 95% interval (batch means); a resumed run's
    batches are cut within each attempt."""
    if not len(restarts_s):
        return ratio_and_ci95(*step_batches(measured, examples))
    attempt = attempts(measured, restarts_s)
    parts = [step_batches(measured[attempt == k], examples[attempt == k]) for k in np.unique(attempt)]
    return ratio_and_ci95(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def mean_and_ci95(samples: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (nan with < 2 samples)."""
    if len(samples) == 0:
        return math.nan, math.nan
    mean = float(np.mean(samples))
    if len(samples) < 2:
        return mean, math.nan
    half = t975(len(samples) - 1) * np.std(samples, ddof=1) / math.sqrt(len(samples))
    return mean, float(half)


def throughput_between_saves(measured: pd.DataFrame, examples: np.ndarray, saves: pd.DataFrame) -> float:
    """Examples/s outside the checkpoint saves (`saves`: wall_s when each began, save_s its length)."""
    start, end = float(measured["t_start_s"].min()), float(measured["t_end_s"].max())
    began = saves["wall_s"].to_numpy(dtype=float)
    ended = began + saves["save_s"].to_numpy(dtype=float)
    saving_s = float(np.sum(np.clip(ended, start, end) - np.clip(began, start, end)))
    t_end = measured["t_end_s"].to_numpy(dtype=float)[:, None]
    outside = ~np.any((t_end >= began) & (t_end <= ended), axis=1)
    return float(np.sum(examples[outside])) / (end - start - saving_s)


def step_time_percentiles(steps: pd.DataFrame) -> dict[str, float]:
    durations = (steps["t_end_s"] - steps["t_start_s"]).to_numpy()
    if len(durations) == 0:
        return {f"step_time_p{p}_s": math.nan for p in (50, 90, 99)}
    return {f"step_time_p{p}_s": float(np.percentile(durations, p)) for p in (50, 90, 99)}


def time_to_accuracy(evals: pd.DataFrame, target: float) -> tuple[float, float]:
    """(seconds since the run's start, global step) of the first evaluation reaching `target`; nan if never."""
    reached = evals[evals["accuracy"] >= target]
    if reached.empty:
        return math.nan, math.nan
    first = reached.sort_values("wall_s").iloc[0]
    return float(first["wall_s"]), float(first["global_step"])


def scaling_efficiency(throughput: float, workers: int, baseline_throughput: float) -> float:
    """throughput / (workers x 1-worker baseline throughput); 1.0 is perfect scaling."""
    if not baseline_throughput or workers < 1 or math.isnan(baseline_throughput):
        return math.nan
    return throughput / (workers * baseline_throughput)


def ring_factor(ranks: int) -> float:
    """Bytes each rank sends (and receives) per byte of buffer in a ring allreduce: 2(n-1)/n."""
    return 2 * (ranks - 1) / ranks if ranks > 1 else 0.0


INDEX_BYTES = 4


@dataclass(frozen=True)
class Gradient:
    """What one worker's gradient of one step is made of, in bytes."""

    dense_bytes: int  # D: float32 gradients of the dense variables
    table_bytes: int = 0  # T: the embedding tables, the size of their gradient sent dense
    rows_touched: float = 0.0  # u: distinct table rows one worker's batch reads (mean over its batches)
    row_bytes: int = 0  # r: bytes of one table row

    @property
    def full_bytes(self) -> int:
        """D + T: the gradient as a dense allreduce sends it."""
        return self.dense_bytes + self.table_bytes

    @property
    def rows_bytes(self) -> float:
        """u x r: the touched rows' values."""
        return self.rows_touched * self.row_bytes

    @property
    def slices_bytes(self) -> float:
        """u x (r + i): the touched rows with their indices (a tf.IndexedSlices)."""
        return self.rows_touched * (self.row_bytes + INDEX_BYTES)

    @classmethod
    def from_facts(cls, facts: dict[str, Any]) -> Gradient:
        """From run.json's "model" facts (a run recorded before tables existed is all dense)."""
        table = int(facts.get("table_bytes") or 0)
        return cls(dense_bytes=int(facts.get("dense_bytes", facts["gradient_bytes_per_step"] - table)),
                   table_bytes=table, rows_touched=float(facts.get("rows_touched_per_step") or 0.0),
                   row_bytes=int(facts.get("row_bytes") or 0))


def ring_allreduce_bytes(gradient_bytes: float, ranks: int) -> int:
    """Sent (and received) per rank per step by ring allreduce of a buffer of `gradient_bytes`."""
    return int(ring_factor(ranks) * gradient_bytes)


def averaging_bytes(state_bytes: float, ranks: int, period: int, steps: int, sync_steps: int = 0,
                    gradient_bytes: float = 0.0) -> int:
    """Sent (and received) per rank per step, averaged over a run of `steps`, by parameter
    averaging: a ring allreduce of the averaged state (`state_bytes`: weights, and optimizer
    slots where they are averaged too) every `period` steps, after `sync_steps` steps that
    ring-allreduce the gradient (`gradient_bytes`) each. The last step averages too."""
    sync = min(sync_steps, steps)
    averages = -(-(steps - sync) // period)
    total = sync * ring_allreduce_bytes(gradient_bytes, ranks) + averages * ring_allreduce_bytes(state_bytes, ranks)
    return int(total / max(steps, 1))


def allgather_bytes(contributed_bytes: float, ranks: int) -> int:
    """Sent (and received) per rank by a ring allgather in which every rank contributes as much."""
    return int((ranks - 1) * contributed_bytes)


def sparse_allreduce_bytes(gradient: Gradient, ranks: int, dense_factor: float = 1.0) -> int:
    """Sent (and received) per rank: the dense part allreduced (scaled by `dense_factor`, 0.5
    for float16), the touched rows allgathered."""
    return ring_allreduce_bytes(gradient.dense_bytes * dense_factor, ranks) \
        + allgather_bytes(gradient.slices_bytes, ranks)


def compressed_fraction(kind: str, ratio: float | None = None) -> float:
    """Bytes on the wire per byte of a dense float32 gradient: none, fp16 or top-k (values and
    int32 indices) with `ratio`."""
    return {"none": 1.0, "fp16": 0.5}.get(kind) or 2.0 * float(ratio)


def topk_allgather_bytes(gradient_bytes: float, ratio: float, ranks: int) -> int:
    """Sent (and received) per rank when every rank's top-k pairs of a dense gradient are allgathered."""
    return allgather_bytes(gradient_bytes * compressed_fraction("topk", ratio), ranks)


def ps_worker_bytes(gradient: Gradient, dense_fraction: float = 1.0) -> tuple[int, int]:
    """(sent, received) per worker per step with the ps tasks: gradients (the dense ones times
    `dense_fraction`, what compression leaves; the touched rows of a table with their indices,
    and the ids it reads) up, parameters (the touched rows) down."""
    sent = gradient.dense_bytes * dense_fraction + gradient.slices_bytes + gradient.rows_touched * INDEX_BYTES
    return int(sent), int(gradient.dense_bytes + gradient.rows_bytes)


def ps_server_bytes(gradient: Gradient, workers: int, ps_tasks: int, dense_fraction: float = 1.0) -> tuple[int, int]:
    """(sent, received) per ps task per global step of `workers` workers, the variables shared
    evenly: its share of what the workers receive and send."""
    worker_sent, worker_received = ps_worker_bytes(gradient, dense_fraction)
    share = workers / max(ps_tasks, 1)
    return int(worker_received * share), int(worker_sent * share)


def link_utilisation(busier_direction_bytes: float, seconds: float, link_mbit: float) -> float:
    """Share of a link's capacity used in its busier direction."""
    return busier_direction_bytes * 8 / seconds / (link_mbit * 1e6)


def algbw(nbytes: int, seconds: float) -> float:
    """Bytes per second of the operation as a whole."""
    return nbytes / seconds


def bus_factor(kind: str, processes: int) -> float:
    """Bytes the busiest link carries per byte of buffer, by the kind of operation."""
    return {ALLREDUCE_OP: ring_factor(processes), PS_ROUNDTRIP_OP: 2.0, COPY_OP: 1.0}[kind]


def messages(kind: str, processes: int) -> int:
    """Latency-bound messages in a row per operation: 2(n-1) ring steps, a push and a pull, one copy."""
    return {ALLREDUCE_OP: 2 * (processes - 1), PS_ROUNDTRIP_OP: 2, COPY_OP: 1}[kind]


def busbw(kind: str, nbytes: int, seconds: float, processes: int) -> float:
    """Bytes per second over the busiest link, by the kind of operation."""
    return algbw(nbytes, seconds) * bus_factor(kind, processes)

# The step split (bench.run.process.breakdown writes it, docs/step-time.md explains it).
# Every worker stamps the steps `stamped` names inside its graph (strategies/workers/stamps.py)
# and writes, for those steps, to steps.csv (the columns are empty on the others):
# - compute_s: forward and backward of its batch (and an update it applies itself);
# - exchange_s: from its gradients ready to its step's exchange done: gradients and
#   parameters moving, and waiting for other workers;
# - waiting_s: the waiting in exchange_s where the worker can see it (a ps-sync worker
#   waiting for its token, towers of one process waiting for their slowest); empty for a
#   collective (allreduce), where it is told from every worker's
# - ready_s: when its gradients were ready (run clock). A collective cannot start before
#   its last worker is ready, so a worker's waiting is the time from its own ready_s to the
#   latest ready_s of that step (at most its exchange).
#
# split_steps splits each row into (breakdown.csv):
# - compute_s, communication_s = exchange_s - waiting_s, waiting_s;
# - other_s = the step's wall time (t_end_s - t_start_s) minus the three: what the host
#   does outside the graph (Python, dispatch, fetching the result). Near 0 when the
#   three parts account for the step.
STEP_PARTS = ("compute_s", "communication_s", "waiting_s", "other_s")


def split_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per stamped step of `steps` (steps.csv) with its time split into STEP_PARTS; empty when
    the records have no stamps (a run of an older version)."""
    import pandas as pd

    if "compute_s" not in steps or steps["compute_s"].isna().all():
        return pd.DataFrame(columns=["worker", "local_step", "step_s", *STEP_PARTS])
    rows = steps[steps["compute_s"].notna()]
    waiting = rows["waiting_s"].astype(float)
    collective = waiting.isna() & rows["ready_s"].notna()
    if collective.any():
        last_ready = rows.loc[collective].groupby("local_step")["ready_s"].transform("max")
        told = (last_ready - rows.loc[collective, "ready_s"]).clip(lower=0)
        waiting = waiting.copy()
        waiting[collective] = np.minimum(told, rows.loc[collective, "exchange_s"])
    waiting = waiting.fillna(0.0)
    out = pd.DataFrame({
        "worker": rows["worker"].astype(int),
        "local_step": rows["local_step"].astype(int),
        "step_s": rows["t_end_s"] - rows["t_start_s"],
        "compute_s": rows["compute_s"],
        "communication_s": rows["exchange_s"] - waiting,
        "waiting_s": waiting,
    })
    out["other_s"] = out["step_s"] - out["compute_s"] - out["communication_s"] - out["waiting_s"]
    return out.reset_index(drop=True)


# Exposed communication per tensor (a traced step, bench.run.process.tracing): in each part of a
# step's exchange, each tensor's exchange runs from its start (its gradient ready, its pull asked
# for) to its end. From `after` (the end of the backward pass, or the step's start for a pull) until
# the part's last end, every moment is charged to the tensors in flight then, by their bytes (they
# share the link and the process); a moment with none in flight (a wake-up, a queue) goes to the
# tensors that end next. The charges sum to the part's exposed time, from `after` to its last end:
# the split's communication of the same step, tensor by tensor.
def exposed_by_tensor(done_s: dict[str, float], after_s: float, sizes: dict[str, float] | None = None,
                      start_s: dict[str, float] | None = None) -> dict[str, float]:
    """Each tensor's seconds of its exchange the compute did not hide (see above); a tensor without a
    start is in flight from `after_s`."""
    charged = dict.fromkeys(done_s, 0.0)
    starts = {name: min((start_s or {}).get(name, after_s), done_s[name]) for name in done_s}
    weight = {name: max(float((sizes or {}).get(name, 0.0)), 1.0) for name in done_s}
    points = sorted({after_s, *(t for t in [*starts.values(), *done_s.values()] if t > after_s)})
    for begin, end in zip(points, points[1:]):
        flight = [n for n in done_s if starts[n] <= begin and done_s[n] >= end]
        if not flight:
            next_end = min(e for e in done_s.values() if e >= end)
            flight = [n for n, e in done_s.items() if e == next_end]
        total = sum(weight[n] for n in flight)
        for name in flight:
            charged[name] += (end - begin) * weight[name] / total
    return charged
