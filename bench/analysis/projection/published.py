"""Published measurements of real clusters that the projection is checked against. Each
figure is predicted from that table's 1-device row, the model's own tensors and the
cluster's description and a transport profile; nothing is fitted to the figures (the
profile's constants are data, each with its range and source: bench.analysis.projection.profile).

Horovod's README, October 2017: 4 servers x 4 Pascal GPUs, a RoCE-capable 25 Gbit/s network
used over TCP, batch 64 per GPU, tf_cnn_benchmarks, examples/s. How each row maps to a scheme
(docs/projection.md grades them, with the quotes):
- "distributed TensorFlow (parameter servers)": tf_cnn_benchmarks with plain gRPC and
  `--variable_update=parameter_server` on TensorFlow 1.3.0 (horovod/horovod#246; its code read at
  tensorflow/benchmarks' 2017 commits abe3c80 and 267d7e8), whose
  workers of several GPUs sum their towers' gradients before the ps and fetch each variable
  once per worker: synchronous ps, one worker per server (host-aggregated), one ps task per
  server on the worker servers, variables placed by bytes (GreedyLoadBalancingStrategy). One
  worker task per GPU is predicted beside it.
- "TCP Horovod, allreduce on CPU (MPI)": a flat ring over Horovod's MPI path (host memory).
- "TCP Horovod, allreduce on GPU with NCCL": a flat ring over NCCL's socket transport.
- "distributed TensorFlow (variables on CPU)": the parameter-server row with
  `--local_parameter_device=cpu` (README of 2017-08-22 to 2017-10-02): the same scheme, its
  sum on the worker's CPU.

Each row is graded from the documents before it is predicted (docs/projection.md, "The
published check"): A, its setup documented and every constant sourced for that software and
year (scored); B, its setup documented, some constants stand-ins (scored for coverage); C, its
setup not documented, or the figure not stable across the versions of its own page (reported,
not scored). Each figure's interval carries the spread of the device's published one-device
figures where a second one is cited (`DEVICE_RATES`), and the model's error of form from the
table's other scored rows of the same form (leave-one-out, bench.analysis.projection.levels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from bench.analysis.projection import intervals, levels, schemes
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.schemes import PS_SYNC, PS_SYNC_AGGREGATED, RING, tf_cnn_benchmarks_ps
from bench.run.contract import GRPC, NCCL
from bench.run.contract import MPI_CONTROLLER as MPI
from bench.run.models import tensors

SCORED = ("A", "B")  # the grades whose figures count in the check; C is reported only
STABLE = 1.1  # a figure is stable where every version of its page gave it within this ratio


@dataclass(frozen=True)
class Setup:
    label: str
    scheme: str
    transport: str
    measured_as: str | None = None  # an alternative reading: the label of the published row it is held against
    grade: str = "B"  # A, B or C (module docstring), decided from the documents


# one device's examples/s as other published tables of the same device and batch give it: the spread a
# described device's rate carries (model -> ((examples/s, source), ...)); a model without one carries none
DEVICE_RATES = {
    "inception3": ((142.0, "tensorflow.org/performance/benchmarks (2017): DGX-1, one Tesla P100, synthetic data, "
                           "batch 64, tf_cnn_benchmarks"),),
}


@dataclass(frozen=True)
class PublishedTable:
    source: str
    devices: int
    devices_per_host: int
    link_gbit: float
    batch_size: int
    one_device: dict[str, float]  # model -> examples/s of one device
    setups: tuple[Setup, ...]
    measured: dict[tuple[str, str], float]  # (setup label, model) -> examples/s of the whole cluster
    alternatives: tuple[Setup, ...] = ()  # predicted beside a setup whose published description admits two
    # (setup label, model) -> what the other versions of the page gave for the same figure
    history: dict[tuple[str, str], tuple[float, ...]] | None = None

    def stable(self, label: str, model: str) -> bool:
        figures = (self.measured[(label, model)], *(self.history or {}).get((label, model), ()))
        return max(figures) / min(figures) <= STABLE

    def device_term(self, model: str) -> levels.Term | None:
        """The device's rate's spread: this table's one-device figure and the cited others', as a range."""
        cited = [v for v, _ in DEVICE_RATES.get(model, ())]
        if not cited:
            return None
        values = [self.one_device[model], *cited]
        return levels.range_term("device examples/s", min(values), max(values))

    def cluster(self, model: str, profile: Profile) -> Cluster:
        return Cluster(self.devices, self.devices_per_host, self.link_gbit, self.one_device[model], self.batch_size,
                       profile.get("intra_host_bytes_per_s"))


PS_ROW, MPI_ROW, NCCL_ROW = ("distributed TensorFlow (parameter servers)", "TCP Horovod, allreduce on CPU (MPI)",
                             "TCP Horovod, allreduce on GPU with NCCL")
CPU_PS_ROW = "distributed TensorFlow (variables on CPU)"
HOROVOD_2017 = PublishedTable(
    source="Horovod README, October 2017: 4 servers x 4 Pascal GPUs, 25 Gbit/s network over TCP, batch 64 per GPU",
    devices=16, devices_per_host=4, link_gbit=25, batch_size=64,
    one_device={"inception3": 134.4, "resnet101": 119.4, "vgg16": 130.9},
    setups=(Setup(PS_ROW, PS_SYNC_AGGREGATED, GRPC), Setup(CPU_PS_ROW, PS_SYNC_AGGREGATED, GRPC),
            Setup(MPI_ROW, RING, MPI), Setup(NCCL_ROW, RING, NCCL)),
    measured={(PS_ROW, "inception3"): 1345.8, (PS_ROW, "resnet101"): 959.6, (PS_ROW, "vgg16"): 74.7,
              (CPU_PS_ROW, "inception3"): 1576.4, (CPU_PS_ROW, "resnet101"): 1168.8, (CPU_PS_ROW, "vgg16"): 79.5,
              (MPI_ROW, "inception3"): 2073.3, (MPI_ROW, "resnet101"): 1338.3, (MPI_ROW, "vgg16"): 616.8,
              (NCCL_ROW, "inception3"): 1990.7, (NCCL_ROW, "resnet101"): 1685.1, (NCCL_ROW, "vgg16"): 1308.7},
    alternatives=(Setup(PS_ROW + ", one worker task per GPU", PS_SYNC, GRPC, PS_ROW),),
    # the README at 68ea5929 (2017-08-22) gave the ps row as 1,378.4 / 996.8 / 310.4 (FACTS.md)
    history={(PS_ROW, "inception3"): (1378.4,), (PS_ROW, "resnet101"): (996.8,), (PS_ROW, "vgg16"): (310.4,)},
)


def _row(table: PublishedTable, setup: Setup, model: str, published: float | None, profile: Profile,
         level: float) -> tuple[dict, intervals.Interval]:
    cluster = table.cluster(model, profile)
    found = intervals.interval(setup.scheme, setup.transport, tensors.of(model), cluster, tf_cnn_benchmarks_ps(cluster),
                             profile, compute=table.device_term(model), level=level)
    terms = found.terms
    grade = setup.grade if table.stable(setup.measured_as or setup.label, model) else "C"
    return {"setup": setup.label, "model": model, "scheme": setup.scheme, "transport": setup.transport,
            "grade": grade, "scored": grade in SCORED,
            "published_examples_per_s": published, "predicted_examples_per_s": found.point,
            "compute_s": terms.compute_s, "exposed_communication_s": terms.exposed_communication_s,
            "step_s": terms.step_s,
            "published_step_s": cluster.workers * cluster.batch_size / published if published else None}, found


def check(profile: Profile, table: PublishedTable = HOROVOD_2017, level: float = levels.DEFAULT_LEVEL) -> pd.DataFrame:
    """Every published figure of the table against its prediction with `profile`, and each
    alternative reading of a setup beside it (whose error does not count in the summary). Each
    figure's model error is calibrated on the table's other scored figures, never its own."""
    if not all(profile.has(s.transport) for s in (*table.setups, *table.alternatives)):
        return pd.DataFrame()
    found = [(*_row(table, s, m, table.measured[(s.label, m)], profile, level), False)
             for s in table.setups for m in table.one_device]
    found += [(*_row(table, alt, m, table.measured[(alt.measured_as, m)], profile, level), True)
              for alt in table.alternatives for m in table.one_device]
    scored = [i for i, (row, _, alternative) in enumerate(found) if row["scored"] and not alternative]
    residuals = {i: math.log(found[i][0]["published_examples_per_s"] / found[i][1].point) for i in scored}
    rows = []
    for i, (row, interval, alternative) in enumerate(found):
        others = [j for j in scored if j != i and schemes.form_of(found[j][0]["scheme"]) ==
                  schemes.form_of(row["scheme"])]
        model = levels.model_error([residuals[j] for j in others], [found[j][1].u for j in others])
        interval = interval.with_model(model)
        published = row["published_examples_per_s"]
        rows.append({**row, **intervals.interval_columns(interval, "predicted"), "alternative": alternative,
                     "inside": bool(interval.low <= published <= interval.high),
                     "error": interval.point / published - 1})
    return pd.DataFrame(rows)


def development_error(profile: Profile, table: PublishedTable = HOROVOD_2017) -> schemes.ModelErrors:
    """The model's error of each form for a described cluster, calibrated on the development table's
    scored figures of that form (all of them: the cluster described is none of them); empty where the
    profile cannot predict that table."""
    checked = check(profile, table)
    if checked.empty:
        return {}
    scored = checked[checked["scored"] & ~checked["alternative"]]
    out = {}
    for form, rows in scored.groupby(scored["scheme"].map(schemes.form_of)):
        residuals = [math.log(p / q) for p, q in zip(rows["published_examples_per_s"],
                                                     rows["predicted_examples_per_s"], strict=True)]
        out[form] = levels.model_error(residuals, list(rows["u_log"]))
    return out


def summary(checked: pd.DataFrame) -> dict:
    """Coverage against the stated level, over the scored figures; the points' error."""
    main = checked[~checked["alternative"] & checked["scored"]]
    errors = main["error"].abs()
    half = (main["predicted_high"] - main["predicted_low"]) / (main["predicted_high"] + main["predicted_low"])
    level = float(checked["level"].iloc[0]) if len(checked) else levels.DEFAULT_LEVEL
    return {"figures": int(len(errors)), "level": level, "inside": int(main["inside"].sum()),
            "coverage": float(main["inside"].mean()) if len(main) else None,
            "median_abs_error": float(errors.median()), "worst_abs_error": float(errors.max()),
            "median_half_width": float(half.median()), "widest_half_width": float(half.max()),
            "not_scored": int((~checked["scored"] & ~checked["alternative"]).sum())}
