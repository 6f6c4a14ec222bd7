"""`python -m bench profile --ps-layout W:P --against PROFILE --link-gbit G`: the check of a ps task
under concurrency. W workers and P ps tasks are placed over the allocation's nodes as `--hosts`
places a run's tasks (workers first, then the ps tasks, round-robin: ssh_hosts.wrapped), every
worker pushes its share of the buffer split over the tasks and pulls it back, all at once, and
what the tasks serve in all (bytes/s, pushed and pulled) is measured `--repeats` times. The same
figure is predicted by the parameter-server model from PROFILE (a profile made elsewhere, say on 2
of the nodes) for that placement and link (bench.analysis.projection.ps_round), with its
prediction interval at `--level`, the model's error of form in it calibrated on the earlier checks
in the same --output folder (each predicted again; this one's own figure never among them); each
repetition is inside it or not. Writes ps-layout.json."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench.analysis.projection import levels, ps_round
from bench.analysis.projection import profile as profiles
from bench.analysis.projection.cluster_cli import check_level
from bench.drivers.profile import fold
from bench.drivers.profile.ps_rate import share_bytes
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


def host_indexes(layout: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(each worker's host, each task's host) as numbers, from a check's recorded nodes."""
    names = sorted({*layout["worker_nodes"], *layout["ps_nodes"]})
    return tuple(map(names.index, layout["worker_nodes"])), tuple(map(names.index, layout["ps_nodes"]))


def predicted(result: dict, level: float, model: levels.Term | None = None) -> dict[str, float]:
    """A check's figure predicted by the model as it is now, from what the check recorded."""
    workers_on, tasks_on = host_indexes(result["layout"])
    return ps_round.served(profiles.load(result["predicted"]["from"]), workers_on, tasks_on, result["link_gbit"],
                           result["bytes_per_worker"], level, model, result.get("host_cores"))


def earlier_checks(output: Path, level: float) -> tuple[list[tuple[float, float, float]], list[str]]:
    """(measured median, predicted point, its u) of every earlier check in `output` whose profile is
    still there, predicted again by the model as it is now; and their files."""
    found, files = [], []
    for path in sorted(output.glob(f"profile-*/{RESULT_FILE}")):
        result = json.loads(path.read_text())
        if not result.get("measured_bytes_per_s") or not Path(result["predicted"]["from"]).is_file():
            continue
        again = predicted(result, level)
        found.append((statistics.median(result["measured_bytes_per_s"]), again["bytes_per_s"], again["u_log"]))
        files.append(str(path))
    return found, files


def run(args: argparse.Namespace, where: Where, out: Path) -> int:
    workers, tasks = layout(args.ps_layout)
    nodes = wrapped(where.nodes, {"worker": workers, "ps": tasks})  # as --hosts places a run's tasks
    result = {"layout": {"workers": workers, "ps": tasks, "worker_nodes": nodes["worker"], "ps_nodes": nodes["ps"]},
              "where": where.describes, "link_gbit": args.link_gbit, "rounds": args.rounds,
              "bytes_per_worker": share_bytes(args.bytes, workers),  # each worker's, as the profile's rate parts
              "predicted": {"from": str(Path(args.against_profile.path).resolve())}}  # read again by later checks
    began, measured, failed = time.monotonic(), [], []
    for r in range(1, args.repeats + 1):
        part = out / f"repetition{r}"
        part.mkdir(parents=True)
        if where.ps_job(workers, part, args.rounds, result["bytes_per_worker"], args.timeout_s, tasks=tasks,
                        ps_cores=args.ps_cores):
            measured.append(fold.layout_rate(part))
            print(f"profile: --ps-layout {args.ps_layout}, repetition {r}: {measured[-1] / 1e6:.4g} MB/s",
                  file=sys.stderr, flush=True)
        else:
            failed.append(r)
    # the hosts' cores as the ps task found them (a fact of the hosts, not of what they served); the model's
    # error of form from the earlier checks in the same folder (each predicted again)
    result["host_cores"] = fold.host(out / "repetition1").get("cores")
    others, files = earlier_checks(Path(args.output), args.level)
    model = ps_round.checked_error(others) if others else None
    prediction = predicted(result, args.level, model)
    inside = [prediction["low"] <= m <= prediction["high"] for m in measured]
    result.update(measured_bytes_per_s=measured, failed_repetitions=failed, inside=inside,
                  predicted={**prediction, **result["predicted"], "model_error_from": files},
                  took_s=round(time.monotonic() - began, 1))
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1))
    if failed:
        print(f"profile: --ps-layout: repetitions {failed} failed (see {out}/*/profile.log)", file=sys.stderr)
        return 1
    error = f"the model's error from {len(files)} earlier checks" if files else "no earlier check: no model error"
    print(f"ps tasks served {statistics.median(measured) / 1e6:.4g} MB/s (median of {len(measured)}: "
          f"{', '.join(f'{m / 1e6:.4g}' for m in measured)}); predicted {prediction['bytes_per_s'] / 1e6:.4g} "
          f"({prediction['low'] / 1e6:.4g}-{prediction['high'] / 1e6:.4g} at {args.level:.0%}, {error}): "
          f"{sum(inside)} of {len(inside)} inside. {out / RESULT_FILE}")
    return 0
