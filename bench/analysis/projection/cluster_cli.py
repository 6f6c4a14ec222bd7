"""`python -m bench project --device-examples-per-s X ...`: a cluster described as its users
describe it, projected with no run of it here; and the check against published tables.

    python -m bench project --model inception3 --device-examples-per-s 134.4 --batch-size 64 \\
        --devices-per-host 4 --link-gbit 25 --workers 16 --json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.analysis.projection import cores, levels, profile, published, table, transports
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.files import PROJECTION_FILE
from bench.analysis.projection.parameter_servers import PLACEMENTS, ROUND_ROBIN
from bench.analysis.projection.schemes import PsSetup
from bench.errors import UsageError
from bench.run import models
from bench.run.models import tensors


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a cluster nobody ran here (--device-examples-per-s switches to it)")
    g.add_argument("--device-examples-per-s", type=float, default=None,
                   help="one device's examples/s at --batch-size (a vendor table, or a run.json from a GPU machine)")
    g.add_argument("--batch-size", type=int, default=None, help="per device")
    g.add_argument("--devices-per-host", type=int, default=None, help="devices sharing one host's link (default: 1)")
    g.add_argument("--intra-host-gbit", type=float, default=None,
                   help="between a device and its host, and devices of one host (default: the profile's)")
    g.add_argument("--ps-colocated", action="store_true", default=None,
                   help="with --ps: the ps tasks on worker hosts (default without --ps: one per worker host, there)")
    g.add_argument("--ps-placement", choices=PLACEMENTS, default=None,
                   help="variables over ps tasks: replica_device_setter's round-robin (default), or balanced by bytes")


# the cluster flags' defaults, filled in once a cluster is described (elsewhere they are refused);
# --intra-host-gbit's is the profile's
DEFAULTS = {"devices_per_host": 1, "intra_host_gbit": None, "ps_colocated": False, "ps_placement": ROUND_ROBIN}


def add_host_cores_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host-cores", type=float, default=None,
                   help="each host's cores as nproc counts them (hardware threads): what a ps task on it may use "
                        "(default: those of the host the profile was measured on)")


def add_level_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", type=float, default=levels.DEFAULT_LEVEL,
                   help="the probability that a new measurement falls inside a figure's interval "
                        f"(default {levels.DEFAULT_LEVEL:g})")


def check_level(args: argparse.Namespace) -> None:
    if not 0.5 <= args.level < 1:
        raise UsageError(f"--level: a probability from 0.5 to below 1, got {args.level:g}")


def add_profile_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=None,
                   help="transport profile: a file (./run_bench.sh profile writes results/profile.json) or a shipped "
                        f"name ({', '.join(profile.shipped())}); default: {profile.DEFAULT}")
    p.add_argument("--latency-us", type=float, default=None,
                   help="your network's one-way latency between two hosts in us (ping's round trip / 2): the "
                        "profile's latency_s, exact; what a busy CPU adds stays the profile's")


def chosen_profile(args: argparse.Namespace, results: Path | None = None) -> tuple[profile.Profile, str]:
    """The profile of --profile; else the one ./run_bench.sh profile wrote into `results` (--from's
    folder); else the default one; and why it is the one used. --latency-us replaces its wire's latency."""
    used, why = _profile_of(args, results)
    if args.latency_us is None:
        return used, why
    if not args.latency_us > 0:
        raise UsageError(f"--latency-us: must be > 0, got {args.latency_us:g}")
    return (used.stated("latency_s", args.latency_us * 1e-6, f"stated: --latency-us {args.latency_us:g}"),
            f"{why}; latency_s {args.latency_us:g} us as --latency-us stated")


def _profile_of(args: argparse.Namespace, results: Path | None) -> tuple[profile.Profile, str]:
    if args.profile:
        return profile.load(args.profile), f"--profile {args.profile}"
    if results is not None and (results / profile.PROFILE_FILE).is_file():
        found = results / profile.PROFILE_FILE
        return profile.load(str(found)), f"measured: {found} (./run_bench.sh profile) under --from"
    return profile.load(profile.DEFAULT), (f"no --profile given: {profile.DEFAULT}, this project's own machine over "
                                           "loopback, stands in for your cluster's transports; measure them with "
                                           "./run_bench.sh profile, or name a documented profile")


def refuse_cluster_flags(args: argparse.Namespace) -> None:
    """Without --device-examples-per-s no cluster is described: its flags would go unused."""
    typed = [name for name in ("batch_size", *DEFAULTS) if getattr(args, name) is not None]
    if typed:
        flags = ", ".join("--" + name.replace("_", "-") for name in typed)
        raise UsageError(f"{flags}: only with --device-examples-per-s (a cluster described, not calibrated from runs)")


@dataclass(frozen=True)
class Chosen:
    """The profile a described cluster is projected with, why it is that one, and whether the
    cluster's intra-host rate is the profile's (with its range) or the user's."""

    profile: profile.Profile
    why: str
    intra_host_from_profile: bool
    per_host: cores.CoresPerHost  # the cluster's cores per host


def check(args: argparse.Namespace) -> Chosen:
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
    used, why = chosen_profile(args)
    chosen = Chosen(used, why, intra_host_from_profile=args.intra_host_gbit is None,
                    per_host=cores.decide(args.host_cores, used))
    if args.intra_host_gbit is None:
        args.intra_host_gbit = used.get("intra_host_bytes_per_s") * 8 / 1e9
    if args.devices_per_host < 1 or not args.intra_host_gbit > 0:
        raise UsageError("--devices-per-host must be >= 1 and --intra-host-gbit > 0")
    if args.ps_colocated and not args.ps:
        raise UsageError("--ps-colocated goes with --ps K (without --ps, one ps task per worker host is colocated)")
    return chosen


def projection(args: argparse.Namespace, chosen: Chosen) -> pd.DataFrame:
    """Every scheme's figure per model, workers, link and ps count, each with the model's error of form
    as the development table showed it (published.development_error)."""
    error = published.development_error(chosen.profile)
    rows = []
    for name in args.model:
        model_tensors = tensors.of(name)
        for n in args.workers:
            for gbit in args.link_gbit:
                cluster = Cluster(n, args.devices_per_host, gbit, args.device_examples_per_s, args.batch_size,
                                  args.intra_host_gbit * 1e9 / 8, cores_per_host=chosen.per_host.cores)
                for k in args.ps or [cluster.hosts]:
                    ps = PsSetup(k, args.ps_colocated or not args.ps, args.ps_placement)
                    rows += table.rows(models.label(name), model_tensors, cluster, ps, chosen.profile,
                                         chosen.intra_host_from_profile, level=args.level, model_error=error)
    return pd.DataFrame(rows)


def constants(used: profile.Profile) -> list[dict]:
    """Every constant the projection used that was not measured in this call, with its range and source."""
    model_facts = [{"name": "forward_share", "value": transports.FORWARD_SHARE, "low": transports.FORWARD_SHARE,
                    "high": transports.FORWARD_SHARE, "source": transports.FORWARD_SHARE_SOURCE}]
    return model_facts + used.records()


def published_result(used: profile.Profile, level: float = levels.DEFAULT_LEVEL) -> dict:
    checked = published.check(used, level=level)
    if checked.empty:
        return {}
    return {"source": published.HOROVOD_2017.source, "profile": used.name, "rows": records(checked),
            "summary": published.summary(checked)}


def records(frame: pd.DataFrame) -> list[dict]:
    """Rows for JSON: NaN (no value) as null."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def main(args: argparse.Namespace, chosen: Chosen) -> int:
    table = projection(args, chosen)
    result = {"cluster": {"devices_per_host": args.devices_per_host, "device_examples_per_s":
                          args.device_examples_per_s, "batch_size": args.batch_size,
                          "intra_host_gbit": args.intra_host_gbit, "ps_placement": args.ps_placement,
                          "host_cores": chosen.per_host.record()},
              "profile": {**chosen.profile.summary(), "why": chosen.why},
              "constants": constants(chosen.profile), "projection": records(table),
              "published": published_result(chosen.profile, args.level)}
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        (out / PROJECTION_FILE).write_text(json.dumps(result, indent=1, default=float))
    if args.json:
        print(json.dumps(result, default=float))
        return 0
    print(f"profile: {chosen.profile.name} ({chosen.why})")
    print(f"host cores: {chosen.per_host.said}")
    show(table, result["published"])
    return 0


def show(table: pd.DataFrame, checked: dict) -> None:
    pd.set_option("display.width", 200)
    columns = ["model", "workers", "hosts", "link_gbit", "scheme", "transport", "ps", "throughput_examples_per_s",
               "throughput_low", "throughput_high", "scaling_efficiency", "compute_s", "exposed_communication_s",
               "widest_term"]
    print(table[columns].to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    if not checked:
        return
    print(f"\nChecked against {checked['source']} with profile {checked['profile']}:")
    print(published_table(pd.DataFrame(checked["rows"])).to_string(index=False))
    s = checked["summary"]
    print(f"{s['inside']} of {s['figures']} scored figures inside their {s['level']:.0%} intervals (median "
          f"half-width {s['median_half_width']:.0%}); points: median |error| {s['median_abs_error']:.0%}, worst "
          f"{s['worst_abs_error']:.0%} ({s['not_scored']} graded C and the alternative readings not counted)")


def published_table(checked: pd.DataFrame) -> pd.DataFrame:
    """setup, model, published, predicted, error, and the step's compute and exposed communication."""
    return pd.DataFrame({
        "setup": checked["setup"], "model": checked["model"], "grade": checked["grade"],
        "published": checked["published_examples_per_s"].map("{:,.1f}".format),
        "predicted": checked["predicted_examples_per_s"].map("{:,.1f}".format),
        "interval": [f"{lo:,.0f}-{hi:,.0f}" for lo, hi in zip(checked["predicted_low"], checked["predicted_high"],
                                                              strict=True)],
        "error": checked["error"].map("{:+.0%}".format),
        "step ms (published)": checked["published_step_s"].map(lambda v: f"{v * 1e3:,.0f}"),
        "compute ms": checked["compute_s"].map(lambda v: f"{v * 1e3:,.0f}"),
        "exposed comm. ms": checked["exposed_communication_s"].map(lambda v: f"{v * 1e3:,.0f}")})
