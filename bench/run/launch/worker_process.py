"""One task of a TF-cluster run in this process: a task of the strategy's trainer role (a worker;
ps-coordinator's chief) trains and reports, any other (a ps; ps-coordinator's workers) serves."""

from __future__ import annotations

import os
import sys
import traceback

from bench.config import RunConfig
from bench.run.contract import Strategy, WorkerContext, worker_class
from bench.run.launch.tf_config import tf_config
from bench.run.phase import Phase
from bench.run.placement import visible
from bench.run.process.leave import leave
from bench.run.process.records import RunFolder


def run_role(config: RunConfig, strategy_cls: type[Strategy], folder: RunFolder, role: str, index: int,
             cluster: dict[str, list[str]], run_start: float, exit_process: bool = True,
             supervised: bool = True) -> int:
    """Run this task; a worker writes workers/worker<i>.json with what it reports. `supervised`: a launcher
    watches the run (else the task ends itself past its limits)."""
    from bench.run.process.process import failure_report, prepare_process, train
    from bench.run.quiet_tf import import_tensorflow_quietly

    # TensorFlow's own multi-worker strategies read the cluster from here
    os.environ.setdefault("TF_CONFIG", tf_config(cluster, role, index))
    # the GPUs this task sees, chosen before TensorFlow starts: its local rank from the cluster's addresses
    local_rank, local_size = visible.cluster_position(cluster, strategy_cls.gpus(config), role, index)
    code = 0
    phase = Phase.of_task(folder.path, role, index)
    phase("starting")
    if role != strategy_cls.runs_as.trainer_role(config):
        try:
            visible.apply(config, strategy_cls, role, index, local_rank, local_size)
            import_tensorflow_quietly()  # a serving task imports it here (a trainer's prepare_process does)
            placed = visible.configure_memory()
            folder.write_devices(placed["role"], index, placed)
            worker_class(strategy_cls).serve(role, index, config, cluster, phase=phase, supervised=supervised)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            code = 1
    else:
        context = WorkerContext(rank=index, num_workers=len(cluster["worker"]), is_chief=index == 0,
                                run_start=run_start, cluster=cluster, run_dir=str(folder.path), phase=phase,
                                supervised=supervised)
        try:
            visible.apply(config, strategy_cls, role, index, local_rank, local_size)
            runtime = prepare_process(config, strategy_cls)
        except Exception as exc:  # noqa: BLE001 - reported to the launcher through the file and the exit code
            report = failure_report(exc)
        else:
            report = train(config, strategy_cls, context, folder, runtime, show_progress=index == 0)
        code = 1 if "error" in report else 0
        folder.write_task_report(index, report)
    if exit_process:
        leave(code)  # TF servers cannot be shut down cleanly; exiting here avoids hanging in their destructors
    sys.stdout.flush()
    sys.stderr.flush()
    return code
