"""`python -m bench worker ...`: one task of a multi-process run (started by the launcher)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from bench.config import RunConfig
from bench.launch.tf_config import tf_config
from bench.run.records import RunFolder
from strategies import registry
from strategies.base import WorkerContext


def run_role(config: RunConfig, folder: RunFolder, role: str, index: int, cluster: dict[str, list[str]],
             run_start: float, exit_process: bool = True) -> int:
    """Run this task; a worker writes workers/worker<i>.json with what it reports."""
    from bench.run.harness import run_worker
    from bench.run.process import failure_reason, prepare_process
    from bench.run.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()  # a ps task imports it too (a worker's prepare_process would)
    strategy_cls = registry.get(config.strategy)
    # TensorFlow's own multi-worker strategies read the cluster from here
    os.environ.setdefault("TF_CONFIG", tf_config(cluster, role, index))
    code = 0
    if role != "worker":
        try:
            strategy_cls.implementation().serve(role, index, config, cluster)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            code = 1
    else:
        report: dict = {}
        try:
            report["runtime"] = prepare_process(config)
            context = WorkerContext(rank=index, num_workers=len(cluster["worker"]), is_chief=index == 0,
                                    run_start=run_start, cluster=cluster, run_dir=str(folder.path))
            outcome = run_worker(config, context, folder, show_progress=index == 0)
            report.update(startup_s=outcome.startup_s, local_steps=outcome.local_steps,
                          strategy_info=outcome.strategy_info)
        except Exception as exc:  # noqa: BLE001 - reported to the launcher through the file and the exit code
            traceback.print_exc()
            report["error"] = failure_reason(exc)
            code = 1
        folder.write_task_report(index, report)
    sys.stdout.flush()
    sys.stderr.flush()
    if exit_process:
        # TF servers cannot be shut down cleanly; exiting here avoids hanging in their destructors
        os._exit(code)
    return code


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench worker", description="one task of a run (internal)")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--role", required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--cluster", required=True)
    p.add_argument("--run-start", type=float, required=True)
    p.add_argument("--config", required=True)
    args = p.parse_args(argv)
    config = RunConfig.from_dict(json.loads(args.config))
    return run_role(config, RunFolder(Path(args.run_dir)), args.role, args.index, json.loads(args.cluster),
                    args.run_start)
