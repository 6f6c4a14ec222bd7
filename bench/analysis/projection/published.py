"""Published measurements of real clusters that the projection is checked against. Each
figure is predicted from that table's 1-device row, the model's own tensors and the
cluster's description and a transport profile; nothing is fitted to the figures (the
profile's constants are data, each with its range and source: bench.analysis.projection.profile).

Horovod's README, October 2017: 4 servers x 4 Pascal GPUs, a RoCE-capable 25 Gbit/s network
used over TCP, batch 64 per GPU, tf_cnn_benchmarks, examples/s. How each row maps to a scheme
(docs/projection.md gives the documents and quotes):
- "distributed TensorFlow (parameter servers)": tf_cnn_benchmarks with plain gRPC and
  `--variable_update=parameter_server` on TensorFlow 1.3.0 (horovod/horovod#246; its code read at
  tensorflow/benchmarks' 2017 commits abe3c80 and 267d7e8), whose
  workers of several GPUs sum their towers' gradients before the ps and fetch each variable
  once per worker: synchronous ps, one worker per server (host-aggregated), one ps task per
  server on the worker servers, variables placed by bytes (GreedyLoadBalancingStrategy). One
  worker task per GPU is predicted beside it.
- "TCP Horovod, allreduce on CPU (MPI)": a flat ring over Horovod's MPI path (host memory).
- "TCP Horovod, allreduce on GPU with NCCL": a flat ring over NCCL's socket transport.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.analysis.projection import schemes, tensors
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.schemes import PS_SYNC, PS_SYNC_AGGREGATED, RING, tf_cnn_benchmarks_ps
from strategies.base import GRPC, NCCL
from strategies.base import MPI_CONTROLLER as MPI


@dataclass(frozen=True)
class Setup:
    label: str
    scheme: str
    transport: str
    measured_as: str | None = None  # an alternative reading: the label of the published row it is held against


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

    def cluster(self, model: str, profile: Profile) -> Cluster:
        return Cluster(self.devices, self.devices_per_host, self.link_gbit, self.one_device[model], self.batch_size,
                       profile.get("intra_host_bytes_per_s"))


PS_ROW, MPI_ROW, NCCL_ROW = ("distributed TensorFlow (parameter servers)", "TCP Horovod, allreduce on CPU (MPI)",
                             "TCP Horovod, allreduce on GPU with NCCL")
HOROVOD_2017 = PublishedTable(
    source="Horovod README, October 2017: 4 servers x 4 Pascal GPUs, 25 Gbit/s network over TCP, batch 64 per GPU",
    devices=16, devices_per_host=4, link_gbit=25, batch_size=64,
    one_device={"inception3": 134.4, "resnet101": 119.4, "vgg16": 130.9},
    setups=(Setup(PS_ROW, PS_SYNC_AGGREGATED, GRPC), Setup(MPI_ROW, RING, MPI), Setup(NCCL_ROW, RING, NCCL)),
    measured={(PS_ROW, "inception3"): 1345.8, (PS_ROW, "resnet101"): 959.6, (PS_ROW, "vgg16"): 74.7,
              (MPI_ROW, "inception3"): 2073.3, (MPI_ROW, "resnet101"): 1338.3, (MPI_ROW, "vgg16"): 616.8,
              (NCCL_ROW, "inception3"): 1990.7, (NCCL_ROW, "resnet101"): 1685.1, (NCCL_ROW, "vgg16"): 1308.7},
    alternatives=(Setup(PS_ROW + ", one worker task per GPU", PS_SYNC, GRPC, PS_ROW),),
)


def _row(table: PublishedTable, setup: Setup, model: str, published: float | None, profile: Profile) -> dict:
    cluster = table.cluster(model, profile)
    found = schemes.interval(setup.scheme, setup.transport, tensors.of(model), cluster, tf_cnn_benchmarks_ps(cluster),
                             profile)
    rate, terms = found.midpoint, found.terms
    return {"setup": setup.label, "model": model, "scheme": setup.scheme, "transport": setup.transport,
            "published_examples_per_s": published, "predicted_examples_per_s": rate,
            "predicted_low": found.low, "predicted_high": found.high,
            "inside": bool(published and found.low <= published <= found.high),
            "error": rate / published - 1 if published else None, "compute_s": terms.compute_s,
            "exposed_communication_s": terms.exposed_communication_s, "step_s": terms.step_s,
            "published_step_s": cluster.workers * cluster.batch_size / published if published else None}


def check(profile: Profile, table: PublishedTable = HOROVOD_2017) -> pd.DataFrame:
    """Every published figure of the table against its prediction with `profile`, and each
    alternative reading of a setup beside it (whose error does not count in the summary)."""
    if not all(profile.has(s.transport) for s in (*table.setups, *table.alternatives)):
        return pd.DataFrame()
    rows = [_row(table, s, m, table.measured[(s.label, m)], profile) for s in table.setups for m in table.one_device]
    for alt in table.alternatives:
        rows += [{**_row(table, alt, m, table.measured[(alt.measured_as, m)], profile), "alternative": True}
                 for m in table.one_device]
    out = pd.DataFrame(rows)
    out["alternative"] = out.get("alternative", pd.Series(dtype=bool)).fillna(False).astype(bool)
    return out


def summary(checked: pd.DataFrame) -> dict:
    main = checked[~checked["alternative"]]
    errors = main["error"].abs()
    half = (main["predicted_high"] - main["predicted_low"]) / (main["predicted_high"] + main["predicted_low"])
    return {"figures": int(len(errors)), "median_abs_error": float(errors.median()),
            "worst_abs_error": float(errors.max()), "inside": int(main["inside"].sum()),
            "widest_half_width": float(half.max())}
