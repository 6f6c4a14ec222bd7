"""A transport profile from the repetitions of `python -m bench profile`: per measured
constant its median, and the least and greatest the repetitions gave; the constants it does
not measure from the shipped profile they were documented in, saying so."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench.analysis.micro_summary import summarize
from bench.analysis.projection import profile
from bench.analysis.projection.fit import fit_transports
from bench.drivers.profile.ps_rate import MANY, MANY_TENSORS, ONE_TENSOR, RATE


def means(rate_bytes: int) -> dict[str, str]:
    """What each measured constant is, beyond the software and the command."""
    size = f"{rate_bytes / 2**20:g} MiB"
    return {
        "latency_s": f"one message's fixed cost: the per-hop intercept of MPI's own allreduce (mpi4py) fitted over "
                     f"1 KiB to {size}",
        "mpi.process_bytes_per_s": f"Horovod allreduce bus bandwidth over MPI at {size}",
        "gloo.process_bytes_per_s": f"Horovod allreduce bus bandwidth over Gloo at {size}",
        "grpc.process_bytes_per_s": "one ps task's process: bytes pushed and pulled per second in all while several "
                                    f"workers push {size} into it and pull it back at once",
        "grpc.message_s": f"a ps task's cost per tensor: a 64 KiB push and pull in {MANY} tensors against 1, "
                          "per message",
    }


def allreduce_figures(folder: Path, rate_bytes: int) -> dict[str, float]:
    """Rate (bus bandwidth at `rate_bytes`) of each Horovod transport measured in `folder`, and raw MPI's per-hop
    latency (Horovod's own intercept holds its cycle and negotiation, which the projection models apart)."""
    table = summarize(folder)
    out: dict[str, float] = {}
    if table.empty:
        return out
    for transport, name in (("horovod-mpi", "mpi"), ("horovod-gloo", "gloo")):
        rows = table[(table["transport"] == transport) & (table["bytes"] == rate_bytes)]
        if len(rows):
            out[f"{name}.process_bytes_per_s"] = float(rows["busbw_gb_per_s"].max()) * 1e9
    fits = fit_transports(table)
    mpi = fits[fits["transport"] == "mpi4py"] if len(fits) else fits
    if len(mpi):
        out["latency_s"] = float(mpi["alpha_us"].iloc[0]) / 1e6
    return out


def grpc_figures(folder: Path) -> dict[str, float]:
    """The ps task's rate with every worker at once, and its cost per message, from ps-worker*.json."""
    reports = [json.loads(p.read_text()) for p in sorted(folder.glob("ps-worker*.json"))]
    rate = [r[RATE] for r in reports if RATE in r]
    out: dict[str, float] = {}
    if rate:
        span = max(r["end"] for r in rate) - min(r["start"] for r in rate)
        out["grpc.process_bytes_per_s"] = sum(r["bytes"] for r in rate) / span
    first = next((r for r in reports if ONE_TENSOR in r and MANY_TENSORS in r), None)
    if first:
        one, many = (statistics.median(first[part]["round_s"]) for part in (ONE_TENSOR, MANY_TENSORS))
        out["grpc.message_s"] = max(0.0, (many - one) / (2 * (MANY - 1)))  # a push and a pull per tensor
    return out


def fold(rounds: list[dict[str, float]], describes: str, software: str, command: str, rate_bytes: int) -> dict:
    """The profile (profile.json's content) of the repetitions' figures."""
    base = profile.load(profile.DEFAULT)
    meaning = means(rate_bytes)
    constants = {}
    for name, known in base.constants.items():
        values = [r[name] for r in rounds if name in r]
        if values:
            constants[name] = {"value": statistics.median(values), "low": min(values), "high": max(values),
                               "unit": known.unit, "measures": meaning.get(name, known.measures), "software": software,
                               "source": f"measured: {command}, {len(values)} repetitions, interleaved "
                                         f"({', '.join(f'{v:.4g}' for v in values)})"}
        else:
            constants[name] = {"value": known.value, "low": known.low, "high": known.high, "unit": known.unit,
                               "measures": known.measures, "software": known.software,
                               "source": f"not measured by ./run_bench.sh profile; as documented in profile "
                                         f"{base.name}: {known.source}"}
    return {"name": "measured", "describes": describes, "constants": constants}
