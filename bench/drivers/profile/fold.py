"""A transport profile from the repetitions of `python -m bench profile`: per measured
constant its median, and the least and greatest the repetitions gave; the constants it does
not measure from the shipped profile they were documented in, saying so."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.analysis.projection import levels, profile
from bench.analysis.projection.draws import bootstrap_means
from bench.analysis.projection.profile import CORES_GAIN, LEAST_CORES, PROFILED_HOST_CORES
from bench.analysis.runs.micro_summary import summarize
from bench.drivers.profile.ps_rate import HOST_FILE, LAYOUT, MANY, MANY_TENSORS, ONE_TENSOR, workers_of

RATE, SHARE_COMPUTING = "grpc.process_bytes_per_s", "grpc.rate_share_computing"
BUSY_CPU = profile.LATENCY_BUSY_CPU
# what collective_test.test_message_as_a_step_pays_it keeps of each round, per hop
IDLE_ROUNDS, BUSY_ROUNDS = "message_idle_rounds_s", "message_busy_rounds_s"
AT = "@"  # a figure's name at one buffer size: "mpi.process_bytes_per_s@1048576"
WITH = "*"  # a figure's name with some workers at once: "grpc.process_bytes_per_s*4"
# the buffer of raw MPI's small allreduce the summary's fit starts from: its bytes take 0.08 us at 100 Gbit/s
LATENCY_BYTES = 1024
HOROVOD_WIRES = {"horovod-mpi": "mpi", "horovod-gloo": "gloo"}


COMPUTE_MEANS = ("a CPU rank's compute (TensorFlow matmuls in its own thread pools) while Horovod's loop runs over "
                 "{wire} with no tensor to reduce, every rank computing, over the same compute after hvd.shutdown(); "
                 "the mean of the ranks' medians")

COMPUTING_MEANS = ("Horovod's allreduce of {size} over {wire} alone, its median time, over the same while a thread of "
                   "every rank computes (TensorFlow matmuls): the share of its rate a transport keeps beside a busy "
                   "CPU, as a worker's reductions beside its backward pass; the mean of the ranks'")


# the unit of each constant the profile measures (those of `means`)
UNITS = {"latency_s": "s", BUSY_CPU: "s", "mpi.process_bytes_per_s": "B/s",
         "gloo.process_bytes_per_s": "B/s", "grpc.process_bytes_per_s": "B/s", SHARE_COMPUTING: "of its rate",
         "mpi.wait_cpu_share": "cores",
         "gloo.wait_cpu_share": "cores", "grpc.message_s": "s", "mpi.compute_stretch": "x",
         "gloo.compute_stretch": "x", "mpi.rate_share_computing": "of its rate",
         "gloo.rate_share_computing": "of its rate", PROFILED_HOST_CORES: "cores",
         CORES_GAIN: "x per doubling of cores",
         LEAST_CORES: "cores"}
# a host's own facts: never carried over from the shipped profile where this one did not measure them
OF_THE_HOST = (PROFILED_HOST_CORES, CORES_GAIN, LEAST_CORES)


def means(rate_bytes: int) -> dict[str, str]:
    """What each measured constant is, beyond the software and the command."""
    size = f"{rate_bytes / 2**20:g} MiB"
    curve = (f"; by_bytes, where present: the same at the buffers of a sweep from 1 MiB up to {size} in steps of "
             "sqrt(2) whose repetitions it tells apart from the rate buffer's")
    return {
        "latency_s": "one message's fixed cost between idle ranks: a 1 KiB token passed around the ranks' ring "
                     "(raw MPI, mpi4py), the first rank computing a random gap between rounds, its time per hop in "
                     "every round, the rounds of every repetition pooled; the value their mean",
        BUSY_CPU: "what a busy CPU adds to one message: the same token's time per hop while a thread of every rank "
                  "computes (numpy matmuls), less the same repetition's idle mean, every round kept and pooled; "
                  "the value their mean (at least 0)",
        "mpi.process_bytes_per_s": f"Horovod allreduce bus bandwidth over MPI at {size}{curve}",
        "gloo.process_bytes_per_s": f"Horovod allreduce bus bandwidth over Gloo at {size}{curve}",
        "mpi.wait_cpu_share": f"the cores a Horovod rank's process keeps busy (CPU time over wall time, every "
                              f"thread) while its allreduce of {size} over MPI is in flight",
        "gloo.wait_cpu_share": f"the cores a Horovod rank's process keeps busy (CPU time over wall time, every "
                               f"thread) while its allreduce of {size} over Gloo is in flight",
        "mpi.compute_stretch": COMPUTE_MEANS.format(wire="MPI"),
        "gloo.compute_stretch": COMPUTE_MEANS.format(wire="Gloo"),
        "mpi.rate_share_computing": COMPUTING_MEANS.format(wire="MPI", size=size),
        "gloo.rate_share_computing": COMPUTING_MEANS.format(wire="Gloo", size=size),
        "grpc.process_bytes_per_s": "one ps task's process: bytes pushed and pulled per second in all while every "
                                    f"worker pushes its share of {size} into it and pulls it back at once; "
                                    "by_workers: the same with 1, 2, 4 ... workers at once",
        SHARE_COMPUTING: "a ps task's rate with every worker at once while a process beside it on its node computes "
                         "(numpy matmuls), over the same rate alone in the same repetition",
        "grpc.message_s": f"a ps task's cost per tensor: a 64 KiB push and pull in {MANY} tensors against 1, "
                          "per message",
        PROFILED_HOST_CORES: "the cores the ps task's host gave it: its CPU affinity's (nproc), or its cgroup's CPU "
                             "quota where lower",
        CORES_GAIN: "a ps task's rate's gain per doubling of the cores its workers' streams use: its rate with every "
                    f"worker at once on all of {PROFILED_HOST_CORES} over the same held to 1 core (CPU affinity), per "
                    f"doubling of {PROFILED_HOST_CORES}",
        LEAST_CORES: f"the fewest cores the ps task was held to when {CORES_GAIN} was measured",
    }


def allreduce_figures(folder: Path, rate_sizes: Sequence[int]) -> dict[str, float]:
    """Rate (bus bandwidth at the largest of `rate_sizes`) of each Horovod transport measured in `folder`, and at
    each of them (`name@bytes`), with what compute_figures and message_rounds find there."""
    table = summarize(folder)
    out = {**compute_figures(folder), **message_rounds(folder)}
    if table.empty:
        return out
    for transport, name in HOROVOD_WIRES.items():
        for nbytes in rate_sizes:
            rows = table[(table["transport"] == transport) & (table["bytes"] == nbytes)]
            if len(rows):
                out[f"{name}.process_bytes_per_s{AT}{nbytes}"] = float(rows["busbw_gb_per_s"].max()) * 1e9
        if f"{name}.process_bytes_per_s{AT}{rate_sizes[-1]}" in out:
            out[f"{name}.process_bytes_per_s"] = out[f"{name}.process_bytes_per_s{AT}{rate_sizes[-1]}"]
        shares = table[(table["transport"] == transport) & (table["bytes"] == rate_sizes[-1])]["cpu_share"].dropna()
        if len(shares):
            out[f"{name}.wait_cpu_share"] = float(shares.median())
    return out


def message_rounds(folder: Path) -> dict[str, list[float]]:
    """Every round of the token's time per hop (the first rank's record): idle as `latency_s`, and beside a
    computing thread as `latency_busy_cpu_s`, each round less the idle rounds' mean."""
    for path in sorted(folder.glob("*.json")):
        for bench in json.loads(path.read_text()).get("benchmarks", []):
            info = bench.get("extra_info", {})
            if info.get(IDLE_ROUNDS):
                idle = statistics.fmean(info[IDLE_ROUNDS])
                return {"latency_s": list(info[IDLE_ROUNDS]), BUSY_CPU: [b - idle for b in info[BUSY_ROUNDS]]}
    return {}


def compute_figures(folder: Path) -> dict[str, float]:
    """What every rank measured beside a computing thread (bench/drivers/micro/collective_test.py), each
    the mean over the ranks (every rank's JSON, rank 0's and the hidden others'): `<wire>.compute_stretch`
    and `<wire>.rate_share_computing` of each Horovod transport."""
    found: dict[str, list[float]] = {}
    for path in sorted(folder.glob("*.json")):
        for bench in json.loads(path.read_text()).get("benchmarks", []):
            info = bench.get("extra_info", {})
            wire = HOROVOD_WIRES.get(info.get("transport"))
            for figure in ("compute_stretch", "rate_share_computing"):
                if wire and figure in info:
                    found.setdefault(f"{wire}.{figure}", []).append(float(info[figure]))
    return {name: statistics.fmean(values) for name, values in found.items()}


def grpc_figures(folder: Path) -> dict[str, float]:
    """The ps task's rate with each number of workers at once (`grpc.process_bytes_per_s*k`: every
    worker's bytes over the span from the first start to the last end), with every worker as
    `grpc.process_bytes_per_s`, and its cost per message, from ps-worker*.json."""
    reports = [json.loads(p.read_text()) for p in sorted(folder.glob("ps-worker*.json"))]
    out: dict[str, float] = {}
    levels = sorted({k for r in reports for k in map(workers_of, r) if k is not None})
    for k in levels:
        out[f"{RATE}{WITH}{k}"] = served([part for r in reports for name, part in r.items() if workers_of(name) == k])
    if levels:
        out[RATE] = out[f"{RATE}{WITH}{levels[-1]}"]
    first = next((r for r in reports if ONE_TENSOR in r and MANY_TENSORS in r), None)
    if first:
        one, many = (statistics.median(first[part]["round_s"]) for part in (ONE_TENSOR, MANY_TENSORS))
        out["grpc.message_s"] = max(0.0, (many - one) / (2 * (MANY - 1)))  # a push and a pull per tensor
    return out


def share_computing(alone: dict[str, float], computing: dict[str, float]) -> dict[str, float]:
    """`grpc.rate_share_computing` of one repetition: the rate with every worker beside a computing
    process (`computing`'s grpc_figures) over the same alone (`alone`'s), where both were measured."""
    if RATE not in alone or RATE not in computing:
        return {}
    return {SHARE_COMPUTING: computing[RATE] / alone[RATE]}


def host(folder: Path) -> dict:
    """The ps task's host as it wrote it ({"cores": ..., "cpu": ...}), or {} where it did not."""
    path = folder / HOST_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def cores_gain(alone: dict[str, float], held: dict[str, float], cores: float) -> dict[str, float]:
    """`grpc.cores_gain` of one repetition: the ps task's rate with every worker on all of its host's `cores`
    (`alone`'s grpc_figures) over the same held to 1 core (`held`'s), per doubling of the cores."""
    if RATE not in alone or RATE not in held or cores < 2:
        return {}
    return {CORES_GAIN: (alone[RATE] / held[RATE]) ** (1 / math.log2(cores)), LEAST_CORES: 1.0}


def served(parts: list[dict]) -> float:
    """Bytes/s of workers' parts run at once: every worker's bytes over the span from the first
    start to the last end."""
    return sum(p["bytes"] for p in parts) / (max(p["end"] for p in parts) - min(p["start"] for p in parts))


def layout_rate(folder: Path) -> float:
    """What the ps tasks of the layout check served in all, bytes/s pushed and pulled, from ps-worker*.json."""
    return served([json.loads(p.read_text())[LAYOUT] for p in sorted(folder.glob("ps-worker*.json"))])


def by_bytes(rounds: list[dict[str, float]], name: str) -> list[list[float]]:
    """[[bytes, rate], ...], ascending, of a constant measured at several sizes, or [] where the sizes
    do not tell apart (curve)."""
    return curve(rounds, name, AT)


def by_workers(rounds: list[dict[str, float]], name: str) -> list[list[float]]:
    """[[workers, rate], ...], ascending, of a constant measured with several workers at once, or []
    where the numbers of workers do not tell apart (curve)."""
    return curve(rounds, name, WITH)


def curve(rounds: list[dict[str, float]], name: str, separator: str) -> list[list[float]]:
    """[[x, value], ...], ascending in x, of a constant measured at several points `name<separator>x`.
    A point's value is the median of its repetitions where their range and the last point's (the
    constant's own) do not overlap, else the last point's median: what varies from one operation to
    the next (Open MPI's TCP transport on a capped link: 1.0 to 1.6 times the link's time at any size,
    2026-11-27) is the constant's spread, not a curve."""
    points = sorted({int(key.split(separator)[1]) for r in rounds for key in r if key.startswith(f"{name}{separator}")})
    if len(points) < 2:
        return []
    measured = {x: [r[f"{name}{separator}{x}"] for r in rounds if f"{name}{separator}{x}" in r] for x in points}
    last = measured[points[-1]]
    out = [[float(x), statistics.median(v) if max(v) < min(last) or min(v) > max(last)
            else statistics.median(last)] for x, v in measured.items()]
    return out if any(value != out[-1][1] for _, value in out) else []


def shown_range(values: list[float], value: float) -> tuple[float, float]:
    """What a reader sees of a measured constant's spread: where one new repetition falls at the
    projection's default level (levels.prediction_interval; the samples themselves carry it into the
    projection), or their min-max where a value is not positive."""
    if min(values) <= 0:
        return min(values), max(values)
    low, high = levels.prediction_interval(values, levels.DEFAULT_LEVEL)
    return min(low, value), max(high, value)


def pooled(name: str, repetitions: list[list[float]], means: str, software: str, command: str) -> dict:
    """A constant measured in rounds (a message's time per hop): every round of every repetition kept, the
    value their pooled mean (at least 0), its shown range where that mean falls at the projection's default
    level (a two-stage bootstrap over the repetitions and their rounds, bench.analysis.projection.draws)."""
    found = [v for repetition in repetitions for v in repetition]
    value = max(0.0, statistics.fmean(found))
    tail = (1 - levels.DEFAULT_LEVEL) / 2
    low, high = (max(0.0, float(v)) for v in np.quantile(bootstrap_means(repetitions, name), (tail, 1 - tail)))
    return {"value": value, "low": min(low, value), "high": max(high, value), "rounds": repetitions,
            "unit": UNITS[name], "measures": means, "software": software,
            "source": f"measured: {command}, {len(found)} rounds in {len(repetitions)} repetitions, interleaved "
                      f"(the repetitions' means {', '.join(f'{statistics.fmean(r):.3g}' for r in repetitions)})"}


def fold(rounds: list[dict[str, float]], describes: str, software: str, command: str, rate_bytes: int) -> dict:
    """The profile (profile.json's content) of the repetitions' figures."""
    base = profile.load(profile.DEFAULT)
    meaning = means(rate_bytes)
    constants = {}
    for name in [*base.constants, *(n for n in meaning if n not in base.constants)]:
        known = base.constants.get(name)
        values = [r[name] for r in rounds if name in r]
        if values and isinstance(values[0], list):
            constants[name] = pooled(name, values, meaning[name], software, command)
        elif values:
            value = statistics.median(values)
            low, high = shown_range(values, value)
            constants[name] = {"value": value, "low": low, "high": high, "samples": values,
                               "unit": UNITS[name], "measures": meaning[name], "software": software,
                               "source": f"measured: {command}, {len(values)} repetitions, interleaved "
                                         f"({', '.join(f'{v:.4g}' for v in values)})"}
            for field, found in (("by_bytes", by_bytes(rounds, name)), ("by_workers", by_workers(rounds, name))):
                if len(found) > 1:
                    constants[name][field] = found
        elif known is not None and name not in OF_THE_HOST:
            constants[name] = {"value": known.value, "low": known.low, "high": known.high, "unit": known.unit,
                               **({"samples": list(known.samples)} if known.samples else {}),
                               "measures": known.measures, "software": known.software,
                               "source": f"not measured by ./run_bench.sh profile; as documented in profile "
                                         f"{base.name}: {known.source}"}
    return {"name": "measured", "describes": describes, "constants": constants}
