"""`python -m bench project --device-examples-per-s X ...`: a cluster described as its users
describe it, projected with no run of it here; and the check against published tables.

    python -m bench project --model inception3 --device-examples-per-s 134.4 --batch-size 64 \\
        --devices-per-host 4 --link-gbit 25 --workers 16 --json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from bench.analysis.projection import published, schemes, tensors, transports
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.parameter_servers import PLACEMENTS, ROUND_ROBIN
from bench.analysis.projection.schemes import PsSetup
from bench.analysis.report.projection import PROJECTION_FILE
from bench.errors import UsageError
from bench.run import models


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a cluster nobody ran here (--device-examples-per-s switches to it)")
    g.add_argument("--device-examples-per-s", type=float, default=None,
                   help="one device's examples/s at --batch-size (a vendor table, or a run.json from a GPU machine)")
    g.add_argument("--batch-size", type=int, default=None, help="per device")
    g.add_argument("--devices-per-host", type=int, default=None, help="devices sharing one host's link (default: 1)")
    g.add_argument("--intra-host-gbit", type=float, default=None,
                   help="between a device and its host, and devices of one host "
                        f"(default: {DEFAULTS['intra_host_gbit']:g}, PCIe 3.0 x16)")
    g.add_argument("--ps-colocated", action="store_true", default=None,
                   help="with --ps: the ps tasks on worker hosts (default without --ps: one per worker host, there)")
    g.add_argument("--ps-placement", choices=PLACEMENTS, default=None,
                   help="variables over ps tasks: replica_device_setter's round-robin (default), or balanced by bytes")


# the cluster flags' defaults, filled in once a cluster is described (elsewhere they are refused)
DEFAULTS = {"devices_per_host": 1, "intra_host_gbit": transports.PCIE_BYTES_PER_S * 8 / 1e9,
            "ps_colocated": False, "ps_placement": ROUND_ROBIN}


def refuse_cluster_flags(args: argparse.Namespace) -> None:
    """Without --device-examples-per-s no cluster is described: its flags would go unused."""
    typed = [name for name in ("batch_size", *DEFAULTS) if getattr(args, name) is not None]
    if typed:
        flags = ", ".join("--" + name.replace("_", "-") for name in typed)
        raise UsageError(f"{flags}: only with --device-examples-per-s (a cluster described, not calibrated from runs)")


def check(args: argparse.Namespace) -> None:
    """Refuse a badly described cluster; fill in the defaults of the flags not typed."""
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.batch_size is None or args.batch_size < 1:
        raise UsageError("--device-examples-per-s needs --batch-size B (>= 1): the batch that rate was measured at")
    if not args.device_examples_per_s > 0:
        raise UsageError(f"--device-examples-per-s: must be > 0, got {args.device_examples_per_s}")
    if not args.model:
        raise UsageError(f"--device-examples-per-s needs --model M (one of {', '.join(models.MODELS)})")
    args.model = [models.resolve(name) for name in args.model]
    for name in args.model:
        models.check(name)
        if models.reads(name) == models.IDS or (models.user.is_spec(name) and models.signature(name).table_bytes):
            raise UsageError(f"--model {models.label(name)}: the cluster projection takes dense models; "
                             "its embedding table is not modelled")
    if args.devices_per_host < 1 or not args.intra_host_gbit > 0:
        raise UsageError("--devices-per-host must be >= 1 and --intra-host-gbit > 0")
    if args.ps_colocated and not args.ps:
        raise UsageError("--ps-colocated goes with --ps K (without --ps, one ps task per worker host is colocated)")


def projection(args: argparse.Namespace) -> pd.DataFrame:
    rows = []
    for name in args.model:
        model_tensors = tensors.of(name)
        for n in args.workers:
            for gbit in args.link_gbit:
                cluster = Cluster(n, args.devices_per_host, gbit, args.device_examples_per_s, args.batch_size,
                                  args.intra_host_gbit * 1e9 / 8)
                for k in args.ps or [cluster.hosts]:
                    ps = PsSetup(k, args.ps_colocated or not args.ps, args.ps_placement)
                    rows += schemes.rows(models.label(name), model_tensors, cluster, ps)
    return pd.DataFrame(rows)


def constants() -> list[dict]:
    """Every constant the projection used that was not measured in this call, with its source."""
    fixed = [("tcp_goodput", transports.TCP_GOODPUT, transports.TCP_GOODPUT_SOURCE),
             ("latency_s", transports.LATENCY_S, transports.LATENCY_SOURCE),
             ("intra_host_bytes_per_s", transports.PCIE_BYTES_PER_S, transports.PCIE_SOURCE),
             ("forward_share", transports.FORWARD_SHARE, transports.FORWARD_SHARE_SOURCE),
             ("fusion_bytes", transports.FUSION_BYTES, transports.FUSION_SOURCE),
             ("cycle_s", transports.CYCLE_S, transports.FUSION_SOURCE),
             ("coordinator_function_s", transports.COORDINATOR_FUNCTION_S, transports.COORDINATOR_SOURCE)]
    out = [{"name": n, "value": v, "source": s} for n, v, s in fixed]
    for t in transports.TRANSPORTS.values():
        out.append({"name": f"{t.name}.flow_share", "value": t.flow_share, "source": t.source})
        if t.process_bytes_per_s:
            out.append({"name": f"{t.name}.process_bytes_per_s", "value": t.process_bytes_per_s, "source": t.source})
        if t.message_s:
            out.append({"name": f"{t.name}.message_s", "value": t.message_s, "source": t.message_source})
    return out


def published_result() -> dict:
    checked = published.check()
    return {"source": published.HOROVOD_2017.source, "rows": records(checked), "summary": published.summary(checked)}


def records(frame: pd.DataFrame) -> list[dict]:
    """Rows for JSON: NaN (no value) as null."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def main(args: argparse.Namespace) -> int:
    table = projection(args)
    result = {"cluster": {"devices_per_host": args.devices_per_host, "device_examples_per_s":
                          args.device_examples_per_s, "batch_size": args.batch_size,
                          "intra_host_gbit": args.intra_host_gbit, "ps_placement": args.ps_placement},
              "constants": constants(), "projection": records(table), "published": published_result()}
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        (out / PROJECTION_FILE).write_text(json.dumps(result, indent=1, default=float))
    if args.json:
        print(json.dumps(result, default=float))
        return 0
    show(table, result["published"])
    return 0


def show(table: pd.DataFrame, checked: dict) -> None:
    pd.set_option("display.width", 200)
    columns = ["model", "workers", "hosts", "link_gbit", "scheme", "transport", "ps", "throughput_examples_per_s",
               "scaling_efficiency", "compute_s", "exposed_communication_s"]
    print(table[columns].to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    print(f"\nChecked against {checked['source']}:")
    print(published_table(pd.DataFrame(checked["rows"])).to_string(index=False))
    s = checked["summary"]
    print(f"median |error| {s['median_abs_error']:.0%}, worst {s['worst_abs_error']:.0%} over {s['figures']} "
          "figures (alternative readings not counted)")


def published_table(checked: pd.DataFrame) -> pd.DataFrame:
    """setup, model, published, predicted, error, and the step's compute and exposed communication."""
    return pd.DataFrame({
        "setup": checked["setup"], "model": checked["model"],
        "published": checked["published_examples_per_s"].map("{:,.1f}".format),
        "predicted": checked["predicted_examples_per_s"].map("{:,.1f}".format),
        "error": checked["error"].map("{:+.0%}".format),
        "step ms (published)": checked["published_step_s"].map(lambda v: f"{v * 1e3:,.0f}"),
        "compute ms": checked["compute_s"].map(lambda v: f"{v * 1e3:,.0f}"),
        "exposed comm. ms": checked["exposed_communication_s"].map(lambda v: f"{v * 1e3:,.0f}")})
