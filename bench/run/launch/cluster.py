"""Runs a strategy that needs a cluster of processes (ps tasks and workers).

Locally: every task is a child process on a free loopback port, supervised until
the run ends. Multi-host: this process is the one task named by --job-name and
--task-index (or TF_CONFIG), and the same code runs on every host.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench.config import RunConfig
from bench.errors import UsageError
from bench.infra.tools import port_in_use
from bench.run import models
from bench.run.contract import GO_ON, RESTART_JOB, Strategy
from bench.run.faults.kill_watch import kill_watch
from bench.run.launch import gpu_plan
from bench.run.launch.close import close_watched_run
from bench.run.launch.hang import account, hang_account
from bench.run.launch.processes import Child, start
from bench.run.launch.recovery import WORKER_RESTARTED, recoveries_left, recovering, recovery, rejoin_config
from bench.run.launch.run_hosts import RunHosts
from bench.run.launch.supervisor import Restarts, steps_written, supervise
from bench.run.launch.tf_config import hand_started_cluster, tf_config
from bench.run.process.aggregation import mark_aggregated
from bench.run.process.leave import leave
from bench.run.process.lifecycle import join_environment, joined_run, open_run, start_run
from bench.run.process.records import RECOVERIES, RUN_FILE, STEPS_FILE, RunFolder


def task_argv(config: RunConfig, cluster: dict[str, list[str]], role: str, index: int) -> list[str]:
    """One task's command: the one a user runs on each host of a real cluster, with the hosts'
    addresses. Started by a launcher, the task joins its run (bench.run.process.lifecycle.joined_run)."""
    task = config.replace(worker_hosts=tuple(cluster["worker"]), ps_hosts=tuple(cluster.get("ps", ())),
                          chief_host=(cluster.get("chief") or [None])[0], job_name=role, task_index=index,
                          emulated_cluster=None, hosts=())
    return [sys.executable, "-m", "bench", "--config-json", task.to_json()]


def run_cluster(config: RunConfig, strategy: type[Strategy]) -> int:
    if config.job_name is not None:
        return run_task(config, strategy)
    return recovering(config, lambda attempt: run_local(attempt, strategy))


def run_local(config: RunConfig, strategy: type[Strategy]) -> tuple[int, RunFolder]:
    """One attempt of a cluster on this machine (or an emulated one): its exit status and folder."""
    processes = {r: n for r, n in strategy.processes(config).items() if n > 0}
    hosts = RunHosts.of(config, processes, strategy.gpus(config))
    kind = hosts.kind
    plan = gpu_plan.of_kind(config, strategy, kind)  # refused here, before any process, if the hosts cannot give it
    cluster = kind.tf_cluster()
    folder, run_start = start_run(config, strategy)
    folder.update_run(cluster=cluster, **hosts.placement_record(), **gpu_plan.recorded(plan))

    def start_task(task: RunConfig, role: str, i: int) -> Child:
        env = {"TF_CONFIG": tf_config(cluster, role, i), **join_environment(folder, run_start), **scratch_env}
        argv = kind.command(role, i, task_argv(task, cluster, role, i), env)
        return start(f"{role} {i}", argv, folder.path / "logs" / f"{role}{i}.log", env=env,
                     echo=(role, i) == (strategy.runs_as.trainer_role(config), 0), hold_stdin=kind.holds_stdin)

    rejoined: list[dict] = []

    def restart_worker(rank: int, why: str) -> Child:
        task = rejoin_config(config, folder.path)
        rejoined.append(recovery(time.time() - run_start, why, WORKER_RESTARTED, task.resume_step,
                                 task.resume_step, worker=rank))
        print(f"{folder.run_id}: recovering: {why}; worker {rank} rejoins at global step {task.resume_step}",
              file=sys.stderr, flush=True)
        return start_task(task, "worker", rank)

    worker_loss = strategy.runs_as.worker_loss(config)
    restarts = (Restarts(restart_worker, recoveries_left(folder))
                if config.recover and worker_loss != RESTART_JOB else None)
    with hosts.held(folder.path, run_start) as scratch_env:
        children = {role: [start_task(config, role, i) for i in range(len(tasks))] for role, tasks in cluster.items()}
        hosts.started(folder, sum(len(tasks) for tasks in cluster.values()))
        workers = children.pop(strategy.runs_as.trainer_role(config))
        helpers = [c for group in children.values() for c in group]
        outcome = supervise(workers, helpers, worker_loss == GO_ON, steps_written(folder),
                            config.stall_timeout_s, restarts=restarts, watch=kill_watch(config, folder, children),
                            startup_timeout_s=config.startup_timeout_s, serving_workers=children.get("worker"),
                            on_hang=hang_account(folder.path / "logs"))
    replicas = strategy.runs_as.gradients_per_step(config)
    records = mark_aggregated(folder.path / STEPS_FILE, replicas, config.steps) if replicas else {}
    if rejoined:  # before the run is closed: its summary reads them
        folder.update_run(**{RECOVERIES: [*(folder.read_run().get(RECOVERIES) or []), *rejoined]})
    code = close_watched_run(folder, config, strategy, outcome.status, run_start, outcome, hosts,
                             lost_workers=outcome.lost_workers, records=records,
                             failure_consequences=outcome.consequences, workers=folder.task_reports())
    return code, folder


def is_chief_task(config: RunConfig, strategy: type[Strategy]) -> bool:
    return config.job_name == strategy.runs_as.trainer_role(config) and config.task_index == 0


def hand_started_folder(config: RunConfig, strategy: type[Strategy]) -> RunFolder:
    """The run folder of a task started by hand: every task of one run on one file system shares
    `--output/--run-name`; a folder that already holds this task (or, for the chief, a run) is an
    earlier run's, and is refused rather than appended to."""
    path = Path(config.output) / (config.run_name or f"{config.strategy}-{models.label(config.model)}-cluster")
    taken = UsageError(f"{path} already holds {config.job_name} {config.task_index} of an earlier run: "
                       "choose another --run-name (or --output)")
    if is_chief_task(config, strategy) and (path / RUN_FILE).exists():
        raise taken
    folder = RunFolder(path)
    try:
        folder.claim(config.job_name, config.task_index)  # atomic: of two tasks claiming one slot, one fails
    except FileExistsError:
        raise taken from None
    folder.ensure_files()
    return folder


def run_task(config: RunConfig, strategy: type[Strategy]) -> int:
    """One task of a multi-host cluster, started by hand (or by a scheduler) on its host."""
    from bench.run.launch import worker_process

    cluster = hand_started_cluster(config)
    me = cluster[config.job_name][config.task_index]
    port = int(me.rpartition(":")[2])
    if port_in_use(port):
        raise UsageError(f"port {port} of {config.job_name} {config.task_index} ({me}) is in use")
    joined = joined_run()  # started by a launcher (the emulated cluster's): its folder, its clock
    if joined:
        folder, run_start = joined
    else:
        folder, run_start = hand_started_folder(config, strategy), time.time()
    is_chief = is_chief_task(config, strategy) and not joined
    if is_chief:
        folder = open_run(config, strategy, run_start, folder=folder)
        folder.update_run(cluster=cluster)
    code = worker_process.run_role(config, strategy, folder, config.job_name, config.task_index, cluster, run_start,
                                   exit_process=False, supervised=bool(joined))
    if is_chief:
        report = folder.task_reports().get(0, {})
        status = "ok" if code == 0 else f"failed: {report.get('error', 'chief failed')}"
        # where every task that shares this folder was, from the phase files beside the logs
        where = {} if code == 0 else {"hang": account([], folder.path / "logs")}
        close_watched_run(folder, config, strategy, status, run_start, **where)
    leave(code)  # a TF server cannot be shut down; leaving the interpreter normally may hang on it
