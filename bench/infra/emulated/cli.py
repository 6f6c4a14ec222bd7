"""`python -m bench cluster up|down|status`: the emulated cluster's command line."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from bench.errors import UsageError
from bench.infra.emulated import cpu_budget, linkcheck, network, slurm
from bench.infra.emulated.claim import claim, release
from bench.usage import OneLineParser, refuse

CHECK_MESSAGE_BYTES = 65536  # a step's small message: what the links' bucket lets through at once, if too large


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench cluster",
                      description="Hosts in network namespaces on this machine, links capped with tc (root only).")
    sub = p.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
    up = sub.add_parser("up", help="create the hosts, or re-cap the links of a cluster that is up")
    up.add_argument("--hosts", type=int, required=True, help="number of hosts (namespaces NAME-h0...)")
    up.add_argument("--link-mbit", type=float, required=True, help="each host's link, each way, in Mbit/s")
    up.add_argument("--host-cores", type=_budgets, default=None,
                    help="each host's CPU budget in cores (a cgroup CPU quota), one for every host or one per host "
                         "(0.5,0.5,1); together at most the machine's cores; without it the hosts share them")
    up.add_argument("--gpus-per-host", type=int, default=0,
                    help="GPUs each host declares to Slurm (GRES device files with no driver behind them: Slurm binds "
                         "them to job steps, TensorFlow sees none); default: %(default)s")
    sub.add_parser("env", help="the export lines after which salloc, sbatch and srun reach its Slurm")
    for action in ("down", "status"):
        sub.add_parser(action, help={"down": "end its processes and remove every namespace and link",
                                     "status": "hosts, addresses, link caps, bytes and processes"}[action])
    check = sub.add_parser("check", help="measure one TCP stream from host 0 to host 1 against the cap")
    check.add_argument("--seconds", type=float, default=2.0, help="length of the transfer (default: %(default)s)")
    for s in sub.choices.values():
        s.add_argument("--name", default=network.DEFAULT_NAME, help="cluster name (default: %(default)s)")
    return p


def _budgets(text: str) -> float | tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"give cores, or cores per host (0.5,0.5,1), got {text!r}") from None
    return values[0] if len(values) == 1 else values


def describe(cluster: network.Cluster) -> str:
    traffic = network.counters(cluster)
    rate = f"{cluster.link_mbit:g} Mbit/s each way" if cluster.link_mbit else "not capped"
    cpu = (f"{cluster.budget_cores:g} cores each" if cluster.budget_cores
           else f"{', '.join(f'{c:g}' for c in cluster.cores_by_host)} cores" if cluster.budgets_differ
           else f"sharing this machine's {cpu_budget.machine_cores()} cores")
    lines = [f"cluster {cluster.name}: {len(cluster.hosts)} hosts on {cluster.subnet}, links {rate}, CPU {cpu}",
             f"{'namespace':<14} {'address':<15} {'sent':>12} {'received':>12}  processes"]
    for host in cluster.hosts:
        sent, received = traffic.get(host.index, (0, 0))
        lines.append(f"{host.namespace:<14} {host.address:<15} {sent:>12,} {received:>12,}  "
                     f"{len(network.processes_in(host.namespace))}")
    return "\n".join(lines)


def start_slurm(cluster: network.Cluster, gpus_per_host: int) -> str:
    started = time.monotonic()
    slurm.up(cluster, gpus_per_host)
    gres = f" with {gpus_per_host} GPU(s) each" if gpus_per_host else ""
    return (f"slurm: controller {slurm.CONTROLLER} at {network.login_address(cluster)}, "
            f"{len(cluster.hosts)} nodes{gres} idle after {time.monotonic() - started:.1f} s; "
            f'use it with: eval "$(./run_bench.sh cluster env)"')


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        if args.action in ("up", "down"):
            held = claim(args.name)  # not under a preset's runs
            try:
                if args.action == "up":
                    if args.gpus_per_host < 0:
                        raise UsageError(f"--gpus-per-host: must be >= 0, got {args.gpus_per_host}")
                    cluster = network.up(args.hosts, args.link_mbit, args.name, args.host_cores)
                    print(describe(cluster))
                    print(start_slurm(cluster, args.gpus_per_host))
                else:
                    slurm.down(args.name)
                    removed = network.down(args.name)
                    print(f"removed {len(removed)} namespaces" + (f": {', '.join(removed)}" if removed else ""))
            finally:
                release(held)
        elif args.action == "env":
            print("\n".join(slurm.env_lines(args.name)))
        elif args.action == "check":
            cluster = network.get(args.name, min_hosts=2)
            rate = linkcheck.measure(cluster, 0, 1, args.seconds)
            cap = (f" of the {cluster.link_mbit:g} Mbit/s cap ({rate / cluster.link_mbit:.0%})"
                   if cluster.link_mbit else "")
            print(f"{cluster.hosts[0].namespace} -> {cluster.hosts[1].namespace}: {rate:,.1f} Mbit/s{cap}")
            took = linkcheck.message_s(cluster, 0, 1, CHECK_MESSAGE_BYTES)
            wire = (f" ({CHECK_MESSAGE_BYTES * 8 / (cluster.link_mbit * 1e3):.2f} ms at the cap)"
                    if cluster.link_mbit else "")
            print(f"one {CHECK_MESSAGE_BYTES // 1024} KiB message after idle, and its answer: "
                  f"{took * 1e3:.2f} ms{wire}")
        else:
            cluster = network.find(args.name)
            print(describe(cluster) if cluster else f"cluster {args.name}: not up")
    except UsageError as exc:
        return refuse(exc)
    return 0
