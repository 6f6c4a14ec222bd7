"""Runs under Slurm: real munged, slurmctld and slurmd daemons on the emulated cluster's
hosts, reached with salloc and sbatch as a user reaches their cluster (root only)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.processes import (
    CLUSTER_LIMIT_S,
    ENDING_LIMIT_S,
    LEFTOVER_GRACE_S,
    PRESET_LIMIT_S,
    RUN_LIMIT_S,
    TRAINING_LIMIT_S,
    bench,
)
from tests.slurm_cluster import WHY_NOT, slurm_cluster

pytestmark = pytest.mark.slow
NAME = "dbslurm"  # not the user's default cluster: tests never touch a cluster of theirs
HOSTS = 3
SMALL = ("--model", "mlp", "--data", "digits", "--batch-size", "32")


if WHY_NOT:
    pytestmark = [pytest.mark.slow, pytest.mark.skip(reason=WHY_NOT)]


GPUS = 4  # each node declares them to Slurm: a job that asks for none gets none, and a step none


@pytest.fixture(scope="module")
def cluster_env():
    """The cluster up with its Slurm, each node declaring GPUS GPUs; the environment after
    `eval "$(./run_bench.sh cluster env)"`, the stand-in nvidia-smi first on its PATH."""
    with slurm_cluster(NAME, HOSTS, dict(os.environ), gpus_per_host=GPUS) as env:
        yield env


@pytest.fixture(scope="module")
def slurm_env(cluster_env):
    """The same without the stand-in nvidia-smi: nodes whose processes find no GPU, as CPU nodes'."""
    stand_in = str(Path(cluster_env["SLURM_CONF"]).parent / "bin")
    return {**cluster_env, "PATH": ":".join(p for p in cluster_env["PATH"].split(":") if p != stand_in)}


@pytest.fixture
def shared(shared_folder):
    return shared_folder


def salloc(env: dict, nodes: int, *args: str, timeout: float = RUN_LIMIT_S) -> subprocess.CompletedProcess:
    return subprocess.run(["salloc", "-N", str(nodes), sys.executable, "-m", "bench", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def records(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*/run.json"))]


def node_processes(*names: str) -> list[str]:
    """What runs on the hosts besides their slurmd (nothing, once a run has ended)."""
    from bench.infra.emulated import network

    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while True:
        left = [f"{ns}: {Path(f'/proc/{pid}/cmdline').read_text(errors='replace')[:80]}"
                for ns in names for pid in network.processes_in(ns) if Path(f"/proc/{pid}").exists()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


HOST_NAMES = [f"{NAME}-h{k}" for k in range(HOSTS)]

SAME_TF_STEPS = pytest.mark.extended(
    "a TensorFlow cluster's tasks as job steps, as ps-sync's [ps-sync --workers 2 --ps 1] here; its exchange across "
    "hosts: test_emulated.py's every_exchange_runs_across_hosts and what_compression_and_averaging_save")
SAME_RANKS_STEP = pytest.mark.extended(
    "Horovod's ranks as one srun step, as allreduce's [allreduce --workers 2] here; local SGD's averaging across "
    "hosts: test_emulated.py's what_compression_and_averaging_save[local-sgd]")
SPREAD = [  # (flags, nodes the run takes)
    (("--strategy", "ps-sync", "--workers", "2", "--ps", "1"), 3),
    pytest.param(("--strategy", "ps-async", "--workers", "2", "--ps", "1"), 3, marks=SAME_TF_STEPS),
    pytest.param(("--strategy", "local-sgd-ps", "--workers", "2", "--ps", "1"), 3, marks=SAME_TF_STEPS),
    (("--strategy", "ps-coordinator", "--workers", "1", "--ps", "1"), 3),  # and its coordinator
    (("--strategy", "allreduce", "--workers", "2"), 2),
    (("--strategy", "allreduce", "--workers", "2", "--hvd-controller", "gloo"), 2),
    pytest.param(("--strategy", "local-sgd", "--workers", "2"), 2, marks=SAME_RANKS_STEP),
    (("--strategy", "allreduce-tf", "--workers", "2"), 2),
    (("--strategy", "single",), 1),
]


def spread_id(case) -> str:
    flags = case.values[0] if hasattr(case, "values") else case[0]
    return " ".join(flags[1:])


@pytest.mark.parametrize("flags,nodes", SPREAD, ids=[spread_id(case) for case in SPREAD])
def test_every_strategy_places_its_processes_on_the_allocated_nodes(slurm_env, shared, flags, nodes):
    done = salloc(slurm_env, HOSTS, *flags, *SMALL, "--steps", "30", "--output", str(shared))
    assert done.returncode == 0, done.stderr[-2000:]
    [record] = records(shared)
    assert record["status"] == "ok"
    placement = record["placement"]
    assert placement["scheduler"] == "slurm" and placement["job_id"]
    used = {where["node"] for where in placement["hosts"].values()}
    assert len(used) == nodes and used <= set(HOST_NAMES), placement
    assert len(placement["hosts"]) == nodes  # one process per node: the allocation has enough
    assert all(step.startswith(f"{placement['job_id']}.") for step in placement["steps"].values())
    assert not node_processes(*HOST_NAMES)


def test_a_plan_on_two_nodes_of_4_gpus_puts_four_ranks_on_each_node_on_gpus_0_to_3(slurm_env, shared):
    done = salloc(slurm_env, 2, "--strategy", "allreduce", "--workers", "8", "--gpus-per-host", "4", "--dry-run",
                  "--json", "--output", str(shared))
    assert done.returncode == 0, done.stderr[-2000:]
    processes = json.loads(done.stdout)["processes"]
    nodes = sorted({p["host"] for p in processes})
    assert len(nodes) == 2 and set(nodes) <= set(HOST_NAMES)
    for node in nodes:
        assert sorted(p["gpus"] for p in processes if p["host"] == node) == [[0], [1], [2], [3]]
    assert not list(shared.iterdir())  # a plan: nothing started, nothing written


# Slurm binds the nodes' declared GPUs to each step (real slurmd and slurmstepd set CUDA_VISIBLE_DEVICES and
# SLURM_STEP_GPUS); TensorFlow sees none (there is no device behind them), so every run computes --on-cpu, and what
# each process was given is read back from run.json
# two training processes a node at least (allreduce of 8 and ps-sync of 6 with 2 ps ran the same way by hand: each
# process a GPU of its own; here fewer, as every process is a TensorFlow start-up on 2 cores)
EVERY_KIND = [("allreduce", "--workers", "4"), ("ps-sync", "--workers", "4", "--ps", "2"),
              ("ps-async", "--workers", "4", "--ps", "1"), ("allreduce-tf", "--workers", "4"),
              ("ps-coordinator", "--workers", "2", "--ps", "1"), ("local-sgd", "--workers", "4"),
              ("mirrored", "--workers", "4"), ("single",)]
# a job of --gpus-per-node: ranks, and tasks with a ps step asking for none (refused beside the job's inherited
# SLURM_GPUS_PER_NODE until steps dropped it)
EACH_STEP_KIND = [EVERY_KIND[0], ("ps-sync", "--workers", "2", "--ps", "1")]
# a job of --gres=gpu:4: ranks, tasks with two ps, one process of four GPUs (--gpus=4) and one of one
EACH_KIND_GRES = [EVERY_KIND[0], EVERY_KIND[1], ("mirrored", "--workers", "4"), ("single",)]


def run_in_one_allocation(env: dict, shared: Path, request: str, runs: list[tuple[str, ...]]) -> list[dict]:
    """Each run of `runs` (a strategy and its flags) a few steps, one after the other inside one
    `salloc -N 2 REQUEST` (a salloc each would cost its start-up again); their records."""
    lines = [shlex.join([sys.executable, "-m", "bench", "--strategy", *run, *SMALL, "--steps", "5", "--warmup-steps",
                         "1", "--on-cpu", "--output", str(shared)]) + " || exit 1" for run in runs]
    done = subprocess.run(["salloc", "-N", "2", request, "bash", "-c", "\n".join(lines)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=RUN_LIMIT_S * 2)
    assert done.returncode == 0, done.stderr[-3000:]
    found = records(shared)
    assert [r["config"]["strategy"] for r in found] == [run[0] for run in runs]
    return found


def assert_each_process_on_gpus_of_its_own(record: dict) -> None:
    """Every training process's GPU UUIDs distinct from every other's on its node, those of the node's own GPUs;
    ps tasks and a coordinator on none; mirrored's four towers on four, the rest on one."""
    from bench.infra.emulated.gpus import uuid_of

    assert record["status"] == "ok", record["status"]
    taken: dict[str, list[str]] = {}
    for label, placed in record["devices"].items():
        role = label.split()[0]
        want = 0 if role in ("ps", "coordinator") else GPUS if record["config"]["strategy"] == "mirrored" else 1
        assert len(placed["gpu_uuids"]) == want, (label, placed)
        node = placed["host"]
        assert set(placed["gpu_uuids"]) <= {uuid_of(NAME, node, k) for k in range(GPUS)}
        taken.setdefault(node, []).extend(placed["gpu_uuids"])
        if want:
            assert placed["bound_by_slurm"] and placed["computed_on"] == "cpu (--on-cpu)"
            assert placed["tensorflow_gpus"] == []  # no device stands behind a declared GPU
    for node, uuids in taken.items():
        assert len(uuids) == len(set(uuids)), (record["config"]["strategy"], node, uuids)


@pytest.mark.extended("each kind of step (ranks, TensorFlow tasks with ps, one process of 1 and of 4 GPUs) in both "
                      "requests: test_inside_salloc_*_each_kind_of_step_gets_gpus_of_its_own")
def test_inside_salloc_gres_gpu_4_every_strategys_processes_get_gpus_of_their_own(cluster_env, shared):
    for record in run_in_one_allocation(cluster_env, shared, f"--gres=gpu:{GPUS}", EVERY_KIND):
        assert_each_process_on_gpus_of_its_own(record)
        assert {p["node"] for p in record["placement"]["hosts"].values()} <= set(HOST_NAMES[:2])


def test_inside_salloc_gres_gpu_4_each_kind_of_step_gets_gpus_of_its_own(cluster_env, shared):
    for record in run_in_one_allocation(cluster_env, shared, f"--gres=gpu:{GPUS}", EACH_KIND_GRES):
        assert_each_process_on_gpus_of_its_own(record)
        assert {p["node"] for p in record["placement"]["hosts"].values()} <= set(HOST_NAMES[:2])


def test_inside_salloc_gpus_per_node_4_each_kind_of_step_gets_gpus_of_its_own(cluster_env, shared):
    for record in run_in_one_allocation(cluster_env, shared, f"--gpus-per-node={GPUS}", EACH_STEP_KIND):
        assert_each_process_on_gpus_of_its_own(record)


def test_ps_take_nodes_of_their_own_or_share_when_the_allocation_is_small(slurm_env, shared):
    done = salloc(slurm_env, 2, "--strategy", "ps-sync", "--workers", "2", "--ps", "1", *SMALL, "--steps", "20",
                  "--output", str(shared))
    assert done.returncode == 0, done.stderr[-2000:]
    placement = records(shared)[0]["placement"]
    assert placement["ps_nodes"] == "shared with workers"
    assert placement["hosts"]["ps 0"]["node"] in {placement["hosts"][f"worker {i}"]["node"] for i in range(2)}


# a run, and the profile (which once measured for 11 minutes into a node's own /tmp and failed every step)
@pytest.mark.parametrize("args", [("--strategy", "ps-sync", "--workers", "2", "--ps", "1", *SMALL, "--steps", "20"),
                                  ("profile",)], ids=["run", "profile"])
def test_a_folder_the_nodes_cannot_see_is_refused_before_any_step(slurm_env, args):
    private = Path(tempfile.mkdtemp(prefix="distbench-private-"))  # /tmp: each node has its own
    done = salloc(slurm_env, 2, *args, "--output", str(private))
    assert done.returncode == 2
    [line] = [ln for ln in done.stderr.splitlines() if "error" in ln]
    assert "not visible on node(s)" in line and "shared file system" in line
    assert not [p for p in private.iterdir() if p.is_dir()]
    shutil.rmtree(private, ignore_errors=True)


def test_a_profile_of_more_ranks_than_the_allocation_holds_is_refused_before_any_measurement(slurm_env, shared):
    # it once measured every repetition, each allreduce step refused by Slurm, and failed at the end
    done = salloc(slurm_env, 2, "profile", "--ranks-per-node", "2", "--output", str(shared))
    assert done.returncode == 2
    [line] = [ln for ln in done.stderr.splitlines() if "error" in ln]
    assert "4 ranks on 2 nodes, more than Slurm job" in line and "salloc -N 2 --ntasks-per-node 2" in line
    assert not list(shared.iterdir())


def test_more_workers_than_the_allocation_holds_are_refused(slurm_env, shared):
    done = salloc(slurm_env, 2, "--strategy", "allreduce", "--workers", "3", *SMALL, "--steps", "20",
                  "--output", str(shared))
    assert done.returncode == 2
    assert "more than Slurm job" in done.stderr and "salloc -N 3" in done.stderr
    assert not records(shared)


def test_a_preset_whose_runs_do_not_fit_the_allocation_is_refused_before_any_run(slurm_env, shared):
    done = salloc(slurm_env, 2, "stragglers", "--workers", "4", "--output", str(shared))
    assert done.returncode == 2
    assert "holds 2 processes" in done.stderr and "salloc -N 4" in done.stderr
    assert not list(shared.iterdir())


def test_the_sbatch_example_runs_a_narrowed_comparison_on_the_nodes(slurm_env, shared):
    # the comparison inside an allocation (sbatch's, as a user submits it): the worker counts that
    # do not fit are left out, every run is a Slurm job step on its own nodes, the report is written
    out = shared / "job.out"
    done = subprocess.run(["sbatch", "--wait", "-N", str(HOSTS), "-o", str(out), "examples/slurm/compare.sbatch",
                           "--strategies", "ps-async,allreduce", "--workers", "2,4", "--models", "mlp", "--steps",
                           "20", "--convergence-steps", "0", "--output", str(shared / "results")],
                          cwd=ROOT, env=slurm_env, capture_output=True, text=True, timeout=PRESET_LIMIT_S)
    said = out.read_text() if out.exists() else ""
    assert done.returncode == 0, (done.stderr, said)
    assert "--workers 4 left out" in said
    assert (shared / "results" / "report.html").exists() and (shared / "results" / "summary.csv").exists()
    runs = {r["config"]["strategy"]: r for r in records(next(p for p in (shared / "results").iterdir() if p.is_dir()))}
    assert sorted(runs) == ["allreduce", "ps-async"]
    assert all(r["status"] == "ok" and r["placement"]["scheduler"] == "slurm" for r in runs.values())
    nodes = {name: {h["node"] for h in r["placement"]["hosts"].values()} for name, r in runs.items()}
    assert (len(nodes["ps-async"]), len(nodes["allreduce"])) == (3, 2)  # a process per node


def start_long_run(env: dict, shared: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(["salloc", "-N", str(HOSTS), sys.executable, "-m", "bench", "--strategy", "ps-sync",
                             "--workers", "2", "--ps", "1", *SMALL, "--steps", "100000", "--output", str(shared),
                             *flags], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for_steps(shared: Path, launcher: subprocess.Popen) -> dict:
    deadline = time.monotonic() + TRAINING_LIMIT_S
    while time.monotonic() < deadline:
        assert launcher.poll() is None, launcher.stderr.read()[-2000:]
        for run in shared.glob("*/steps.csv"):
            if run.stat().st_size > 2000 and "steps" in json.loads((run.parent / "run.json").read_text()).get(
                    "placement", {}):
                return json.loads((run.parent / "run.json").read_text())
        time.sleep(0.5)
    raise AssertionError("the run never trained")


def test_scancel_ends_the_run_as_interrupted_with_nothing_left_on_any_node(slurm_env, shared):
    launcher = start_long_run(slurm_env, shared)
    record = wait_for_steps(shared, launcher)
    subprocess.run(["scancel", record["placement"]["job_id"]], env=slurm_env, check=True)
    launcher.wait(timeout=ENDING_LIMIT_S)
    [record] = records(shared)
    assert record["status"].startswith("interrupted: Slurm job") and "cancelled" in record["status"]
    assert record["summary"]["total_steps"] > 0  # what was recorded before is kept
    assert not node_processes(*HOST_NAMES)


def test_a_task_that_dies_fails_the_run_and_ends_every_other_step(slurm_env, shared):
    done = salloc(slurm_env, HOSTS, "--strategy", "ps-sync", "--workers", "2", "--ps", "1", *SMALL, "--steps",
                  "400", "--kill-worker", "1@30", "--output", str(shared))
    assert done.returncode == 1
    [record] = records(shared)
    assert record["status"].startswith("failed: worker 1"), record["status"]
    assert "SIGKILL" in record["status"] or "status 137" in record["status"], record["status"]
    assert record["ended_after_failure_s"] < 10  # "within seconds": srun ends its other steps in 1-2 s here
    assert not node_processes(*HOST_NAMES)


def test_recover_restarts_a_dead_worker_as_a_new_step_on_its_node(slurm_env, shared):
    done = salloc(slurm_env, HOSTS, "--strategy", "ps-sync", "--workers", "2", "--ps", "1", *SMALL, "--steps",
                  "120", "--kill-worker", "1@30", "--recover", "--checkpoint-every-steps", "20", "--output",
                  str(shared))
    assert done.returncode == 0, done.stderr[-2000:]
    [record] = records(shared)
    assert record["status"] == "ok" and len(record["summary"]["recoveries"]) == 1
    assert record["placement"]["hosts"]["worker 1"]["node"] == f"{NAME}-h1"
    assert not node_processes(*HOST_NAMES)


def test_a_lost_node_fails_the_run_with_that_reason_and_nothing_is_left_elsewhere(slurm_env, shared):
    from bench.infra.emulated import network, slurm

    launcher = start_long_run(slurm_env, shared)
    wait_for_steps(shared, launcher)
    lost = f"{NAME}-h1"
    [slurmd] = [p for p in network.processes_in(lost, daemons=True)
                if Path(f"/proc/{p}/comm").read_text().strip() == "slurmd"]
    os.kill(slurmd, signal.SIGKILL)
    try:
        launcher.wait(timeout=2 * ENDING_LIMIT_S)  # a lost node is declared down after 18 s
        [record] = records(shared)
        assert record["status"].startswith(f"failed: node {lost} of Slurm job"), record["status"]
        assert not node_processes(*(h for h in HOST_NAMES if h != lost))
    finally:  # the emulated node's tasks outlive its slurmd (a real lost node takes them with it)
        network.end_processes([lost])
        slurm.start_node(NAME, network.get(NAME).hosts[1])
        deadline = time.monotonic() + CLUSTER_LIMIT_S  # the restarted slurmd back to idle
        while slurm.idle_nodes(NAME) < HOSTS and time.monotonic() < deadline:
            time.sleep(0.5)


def test_cluster_down_leaves_no_daemon_and_no_namespace(tmp_path):
    name = "dbslurm2"
    up = bench("cluster", "up", "--hosts", "2", "--link-mbit", "1000", "--name", name, timeout=CLUSTER_LIMIT_S)
    assert up.returncode == 0, up.stderr
    assert "2 nodes idle" in up.stdout
    down = bench("cluster", "down", "--name", name, timeout=CLUSTER_LIMIT_S)
    assert down.returncode == 0, down.stderr
    from bench.infra.emulated import network, slurm

    assert not slurm.daemon_pids(name)
    assert not [ns for ns in network.namespaces() if ns.startswith(f"{name}-")]
    assert not slurm.state_dir(name).exists()
    assert subprocess.run(["ip", "link", "show", network.login_device(name)], capture_output=True).returncode != 0


def test_the_users_projection_path_profile_on_two_nodes_then_project_and_report(slurm_env, shared):
    # docs/projection.md's path: the nodes' transport profile measured across them, then a cluster
    # described with it, and the report. PRESET_LIMIT_S: the profile is a dozen measurements of a
    # few processes each (1.5 min here). At 8 MiB a rate over the 1000 Mbit/s link is 70 ms a message,
    # its fixed cost (10 us) 0.1 % of it: the same rate as at the default 64 MiB, in an eighth of the time.
    # The least repetitions (3, not the default 6): the path is under test here, not the nodes' figures
    done = salloc(slurm_env, 2, "profile", "--repeats", "3", "--rounds", "2", "--ps-workers", "1",
                  "--bytes", str(8 * 2**20),
                  "--output", str(shared), timeout=PRESET_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads((shared / "profile.json").read_text())
    assert "2 nodes of a Slurm allocation" in measured["describes"]
    constants = measured["constants"]
    for name in ("latency_s", "mpi.process_bytes_per_s", "gloo.process_bytes_per_s", "grpc.process_bytes_per_s",
                 "grpc.rate_share_computing",
                 "grpc.message_s", "mpi.wait_cpu_share", "gloo.wait_cpu_share", "mpi.compute_stretch",
                 "gloo.compute_stretch", "mpi.rate_share_computing", "gloo.rate_share_computing",
                 "latency_busy_cpu_s"):
        c = constants[name]
        assert c["source"].startswith("measured: ./run_bench.sh profile --repeats 3"), (name, c)
        assert "8 MiB" in c["measures"] or name in ("grpc.message_s", "latency_s", "latency_busy_cpu_s",
                                                    "mpi.compute_stretch", "gloo.compute_stretch",
                                                    "grpc.rate_share_computing"), (name, c)
        # what a busy CPU adds may be nothing on idle nodes (a computing CPU need not wake: 12-15 us less here)
        assert c["low"] <= c["value"] <= c["high"] and c["value"] >= (0 if name == "latency_busy_cpu_s" else 1e-12)
    # a message's cost kept round by round: 60 rounds in each of the 3 repetitions, across the link
    assert [len(r) for r in constants["latency_s"]["rounds"]] == [60, 60, 60]
    assert 5e-6 < constants["latency_s"]["value"] < 5e-3
    # across a 1000 Mbit/s link: Horovod's rates are the link's (goodput 117.7 MB/s), not loopback's GB/s.
    # Below it by what varies: Open MPI's operations took 1.0-1.6x the link's time, and one repetition's
    # median was 62 MB/s on a quiet machine (2026-11-27); this test runs beside the suite's background runs
    assert 25e6 < constants["mpi.process_bytes_per_s"]["value"] < 125e6
    # a rank over MPI polls while its allreduce waits on the link, one over Gloo sleeps (0.93-0.98 of a core
    # against 0.11-0.13 at 1000 Mbit/s on a quiet machine, 2026-11-28; busy cores only lower the polling one's)
    assert constants["mpi.wait_cpu_share"]["value"] > constants["gloo.wait_cpu_share"]["value"]
    assert constants["nccl.flow_share"]["source"].startswith("not measured by ./run_bench.sh profile")
    done = bench("project", "--profile", str(shared / "profile.json"), "--model", "resnet50",
                 "--device-examples-per-s", "200", "--batch-size", "64", "--devices-per-host", "8", "--link-gbit",
                 "100", "--workers", "16,128,1024", "--output", str(shared), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["profile"]["name"] == "measured" and result["profile"]["why"].startswith("--profile ")
    assert {r["workers"] for r in result["projection"]} == {16, 128, 1024}
    assert all(r["throughput_low"] <= r["throughput_examples_per_s"] <= r["throughput_high"]
               for r in result["projection"])
    from bench.analysis.report.build import write_report

    page = write_report([shared], shared).read_text()
    assert 'id="projection-cluster"' in page and "Transport profile: measured" in page
