"""`python -m bench profile --ps-layout W:P --against PROFILE --link-gbit G`: the check of a ps task
under concurrency. W workers and P ps tasks are placed over the allocation's nodes as `--hosts`
places a run's tasks (workers first, then the ps tasks, round-robin: ssh_hosts.wrapped), every
worker pushes its share of the buffer split over the tasks and pulls it back, all at once, and
what the tasks serve in all (bytes/s, pushed and pulled) is measured `--repeats` times. The same
figure is predicted by the parameter-server model from PROFILE (a profile made elsewhere, say on 2
of the nodes) for that placement and link (bench.analysis.projection.ps_round), with its
prediction interval at `--level`; each repetition is inside it or not. Writes ps-layout.json."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench.analysis.projection import profile as profiles
from bench.analysis.projection import ps_round
from bench.analysis.projection.cluster_cli import check_level
from bench.drivers.profile import fold
from bench.drivers.profile.ps_rate import LEAST_PUSH_BYTES
from bench.drivers.profile.where import Where
from bench.errors import UsageError
from bench.run.launch.ssh_hosts import wrapped

RESULT_FILE = "ps-layout.json"


def layout(text: str) -> tuple[int, int]:
    """W:P, each at least 1."""
    workers, _, tasks = text.partition(":")
    if not (workers.isdigit() and tasks.isdigit()) or int(workers) < 1 or int(tasks) < 1:
        raise UsageError(f"--ps-layout {text}: give WORKERS:PS, each at least 1 (4:2)")
    return int(workers), int(tasks)


def check_args(args: argparse.Namespace) -> None:
    """Refuse, before any measurement, what the check cannot predict from."""
    if args.against is None or args.link_gbit is None:
        raise UsageError("--ps-layout needs --against PROFILE (what predicts it) and --link-gbit G (the nodes' link)")
    args.against_profile = profiles.load(args.against)
    if args.link_gbit <= 0:
        raise UsageError("--link-gbit must be > 0")
    check_level(args)


def placed(where: Where, workers: int, tasks: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(each worker's node, each task's node), as indexes of the allocation's nodes."""
    on = wrapped(tuple(range(len(where.nodes))), {"worker": workers, "ps": tasks})
    return tuple(on["worker"]), tuple(on["ps"])


def run(args: argparse.Namespace, where: Where, out: Path) -> int:
    workers, tasks = layout(args.ps_layout)
    worker_hosts, task_hosts = placed(where, workers, tasks)
    nbytes = max(LEAST_PUSH_BYTES, args.bytes // workers) // 4 * 4  # each worker's, as the profile's rate parts
    predicted = ps_round.served(args.against_profile, worker_hosts, task_hosts, args.link_gbit, nbytes, args.level)
    began, measured, failed = time.monotonic(), [], []
    for r in range(1, args.repeats + 1):
        part = out / f"repetition{r}"
        part.mkdir(parents=True)
        if where.ps_job(workers, part, args.rounds, nbytes, args.timeout_s, tasks=tasks):
            measured.append(fold.layout_rate(part))
            print(f"profile: --ps-layout {args.ps_layout}, repetition {r}: {measured[-1] / 1e6:.4g} MB/s",
                  file=sys.stderr, flush=True)
        else:
            failed.append(r)
    inside = [predicted["low"] <= m <= predicted["high"] for m in measured]
    result = {"layout": {"workers": workers, "ps": tasks, "worker_nodes": [where.nodes[h] for h in worker_hosts],
                         "ps_nodes": [where.nodes[h] for h in task_hosts]},
              "where": where.describes, "link_gbit": args.link_gbit, "bytes_per_worker": nbytes,
              "rounds": args.rounds, "measured_bytes_per_s": measured, "failed_repetitions": failed,
              "predicted": {**predicted, "from": args.against_profile.path}, "inside": inside,
              "took_s": round(time.monotonic() - began, 1)}
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1))
    if failed:
        print(f"profile: --ps-layout: repetitions {failed} failed (see {out}/*/profile.log)", file=sys.stderr)
        return 1
    print(f"ps tasks served {statistics.median(measured) / 1e6:.4g} MB/s (median of {len(measured)}: "
          f"{', '.join(f'{m / 1e6:.4g}' for m in measured)}); predicted {predicted['bytes_per_s'] / 1e6:.4g} "
          f"({predicted['low'] / 1e6:.4g}-{predicted['high'] / 1e6:.4g} at {args.level:.0%}): "
          f"{sum(inside)} of {len(inside)} inside. {out / RESULT_FILE}")
    return 0
