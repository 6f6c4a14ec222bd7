"""run.json's schema: its version and its top-level fields. Records written by older versions
are brought to the current shape by their one reader (bench.analysis.runs.upgrade)."""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 4
# version 1: no schema_version; purpose parsed out of run_name, scenario out of the config
# flags; "strategy" a name before the strategy's facts were recorded; "startup_s" at the top
# level before the summary held it; bytes per step in strategy_info before "exchange".
# version 2: the strategy's facts without "wire".
# version 3: the strategy's facts without "exchange_overlaps_backward".

THROUGHPUT, CONVERGENCE = "throughput", "convergence"
PURPOSES = (THROUGHPUT, CONVERGENCE)

RUN_FIELDS: dict[str, str] = {
    "schema_version": "this schema's version (SCHEMA_VERSION)",
    "run_id": "the run folder's name",
    "purpose": "throughput (no evaluation) or convergence (evaluated)",
    "scenario": "clean, straggler, kill, recover or ps-kill: which faults the run was given",
    "status": "running, ok, failed: REASON or interrupted (REASON)",
    "owner": "host and pid of the process that owns the record while it runs",
    "started_at": "UTC time the run opened",
    "run_start_epoch_s": "the clock every process measures from",
    "config": "the RunConfig, as given and defaulted",
    "strategy": "what the strategy declared of itself (name, family, variant, ...)",
    "strategy_description": "one line about the strategy",
    "environment": "the machine the chief trained on (host, CPU, GPUs), Python, TensorFlow, Horovod, MPI, "
                   "the suite's commit",
    "model": "the built model's facts (parameters, gradient bytes, tables)",
    "exchange": "bytes per worker step by the strategy's formula, per role",
    "cluster": "multi-process runs: the TF cluster (role -> host:port)",
    "plan": "launched runs: each process's host, role, index, local rank, GPUs, memory policy and collective, as its "
            "launcher planned them before any started (bench.run.placement.plan)",
    "devices": "each process's own record of its placement (\"worker 0\" -> host, local rank, GPUs, "
               "CUDA_VISIBLE_DEVICES as set and as given, memory policy, collective, the GPUs TensorFlow saw; a "
               "Horovod process also horovod_built: what hvd.nccl_built(), cuda_built(), mpi_built() and gloo_built() "
               "said) (bench.run.placement.visible, bench.run.process.process)",
    "placement": "runs placed on hosts, as their host kind describes them (bench.run.launch.host_kind): under "
                 "Slurm scheduler, job_id, ps_nodes, hosts (node and address per process), steps; over ssh the "
                 "hosts; on the emulated cluster its hosts",
    "network": "on the emulated cluster: hosts, link cap, bytes per step per host against the formulas",
    "ended_at": "UTC time the run closed",
    "ended_s": "seconds from run start to its end",
    "summary": "the summary figures (bench.run.process.summary)",
    "startup_s": "the chief's seconds from run start to its first step (also in summary)",
    "runtime": "the chief's TensorFlow runtime: devices, threads, memory settings",
    "strategy_info": "what the chief's worker reported of its strategy's run",
    "workers": "each worker's own report (multi-process runs), by index",
    "launcher": "MPI runs: the command that started the ranks",
    "records": "what the strategy's own records add (gradients dropped, staleness)",
    "lost_workers": "workers lost without failing the run",
    "failed_at_s": "failed runs: seconds from run start to the first failure",
    "ended_after_failure_s": "failed runs: seconds from the first failure to every process ended",
    "failure_consequences": "processes that ended within a second of the first failure, and how",
    "resumed_at": "each later attempt of a resumed run (--resume)",
    "relaunched": "MPI runs: each relaunch of the ranks after one died inside MPI_Init (when, why)",
    "recoveries": "each restart --recover made",
    "not_recovered": "why --recover could not restart the run",
    "last_step": "a run closed by the report after its owner was gone: its last recorded step",
    "closed_by": "who wrote the final status when it was not the run's owner",
}


def purpose_of(config: dict[str, Any]) -> str:
    """A run's purpose from its config: what it was told (--purpose), else whether it is evaluated
    (random images have no validation split)."""
    if config.get("purpose") in PURPOSES:
        return config["purpose"]
    return THROUGHPUT if config.get("data") == "synthetic" or config.get("eval_every") == 0 else CONVERGENCE


def scenario_of(config: dict[str, Any]) -> str:
    if config.get("kill_ps"):
        return "ps-kill"
    if config.get("kill_worker"):
        return "recover" if config.get("recover") else "kill"
    if config.get("straggler") or config.get("straggler_random"):
        return "straggler"
    return "clean"


def identity(config: dict[str, Any]) -> dict[str, Any]:
    """The fields a new record opens with."""
    return {"schema_version": SCHEMA_VERSION, "purpose": purpose_of(config), "scenario": scenario_of(config)}
