"""One table from the JSON files of a micro-benchmark run: every measurement with its
bus bandwidth and that bandwidth as a fraction of raw MPI's (mpi4py) at the same size
and process count, measured in the same run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from bench.metrics import messages

SUMMARY_FILE = "micro-summary.csv"
# the collectives the micro-benchmarks time, each under mpirun (or horovodrun) with n ranks
COLLECTIVES = ("mpi4py", "horovod-mpi", "horovod-mpi-tuned", "horovod-gloo", "tf-collective")
REFERENCE = "mpi4py"


def summarize(folder: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")):  # .rank<N>: not rank 0
        for bench in json.loads(path.read_text()).get("benchmarks", []):
            info = bench.get("extra_info", {})
            if "busbw_bytes_per_s" not in info:
                continue
            rows.append({"transport": info["transport"], "kind": info["kind"], "processes": info["processes"],
                         "bytes": info["bytes"], "tensors": info.get("tensors", 1),
                         "median_s": bench["stats"]["median"],
                         "algbw_gb_per_s": info["algbw_bytes_per_s"] / 1e9,
                         "busbw_gb_per_s": info["busbw_bytes_per_s"] / 1e9,
                         "cpu_share": info.get("cpu_share")})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    ref = table[table["transport"] == REFERENCE].set_index(["processes", "bytes"])["busbw_gb_per_s"]
    ref_any = table[table["transport"] == REFERENCE].groupby("bytes")["busbw_gb_per_s"].max()

    def fraction(row: pd.Series) -> float | None:
        key = (row["processes"], row["bytes"])
        if key in ref.index:
            return row["busbw_gb_per_s"] / ref[key]
        if row["bytes"] in ref_any.index:  # ps and copy have other process counts: best mpi4py figure
            return row["busbw_gb_per_s"] / ref_any[row["bytes"]]
        return None

    table["fraction_of_mpi4py"] = table.apply(fraction, axis=1)
    return table.sort_values(["kind", "transport", "processes", "bytes"]).reset_index(drop=True)


def dispatch_costs(folder: Path) -> pd.DataFrame:
    """A coordinator's time per scheduled function (bench/drivers/micro/coordinator_test.py), one row per run of it."""
    rows = [{"transport": info["transport"], "functions": info["functions"], "function_ms": info["function_s"] * 1e3}
            for path in sorted(folder.glob("*.json")) if not path.name.startswith(".")
            for bench in json.loads(path.read_text()).get("benchmarks", [])
            for info in [bench.get("extra_info", {})] if "function_s" in info]
    return pd.DataFrame(rows)


def one_tensor(table: pd.DataFrame) -> pd.DataFrame:
    """The measurements of one tensor per process (per ps task), those sizes are swept over; a
    summary written before tensors were counted holds only those."""
    return table[table["tensors"] == 1] if "tensors" in table else table


def best_fractions(table: pd.DataFrame) -> pd.DataFrame:
    """Each transport's best bus bandwidth, as a fraction of mpi4py's best in the same run."""
    best = table.groupby(["transport", "processes"])["busbw_gb_per_s"].max().reset_index()
    ref = best[best["transport"] == REFERENCE].set_index("processes")["busbw_gb_per_s"]
    top = ref.max() if len(ref) else None
    best["fraction_of_mpi4py_best"] = best.apply(
        lambda r: r["busbw_gb_per_s"] / (ref[r["processes"]] if r["processes"] in ref.index else top)
        if top else None, axis=1)
    return best


def write_summary(table: pd.DataFrame, folder: Path) -> Path:
    path = folder / SUMMARY_FILE
    table.to_csv(path, index=False)
    return path


def tensor_costs(table: pd.DataFrame) -> pd.DataFrame:
    """The cost of one more tensor in a ps round trip of the same bytes (bench.drivers.micro's
    test_ps_push_pull_of_many_tensors): the least-squares slope of the time over the tensors,
    per message (a tensor's push and its pull are two), one row per transport and processes."""
    rows = []
    if "tensors" not in table:
        return pd.DataFrame(rows)
    for (transport, kind, processes, nbytes), group in table.groupby(["transport", "kind", "processes", "bytes"]):
        if group["tensors"].nunique() < 2:
            continue
        slope = float(np.polyfit(group["tensors"].astype(float), group["median_s"], 1)[0])
        rows.append({"transport": transport, "kind": kind, "processes": int(processes), "bytes": int(nbytes),
                     "tensors": sorted(int(t) for t in group["tensors"]),
                     "message_us": slope / messages(kind, int(processes)) * 1e6})
    return pd.DataFrame(rows)
