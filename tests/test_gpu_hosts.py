"""A GPU user's first run on a Slurm cluster of 4-GPU nodes, decided without a GPU: what each step asks of Slurm,
how GPUs are told apart (UUID), how a step is timed, what reaches each process, and what is refused. Slurm's own
binding of declared GPUs is exercised on the emulated cluster (tests/test_slurm.py); here each decision is a
function of what it reads."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from bench.config import RunConfig
from bench.drivers.gpu_check import placement_problems
from bench.errors import RunFailed
from bench.run.launch.slurm import srun
from bench.run.launch.slurm.srun import JOB_GPU_REQUEST, Allocation, SlurmPlacement, node_resources
from bench.run.placement.gpus import choose, uuids_of
from bench.run.process.utilization import devices
from tests.conftest import ROOT

DETAIL_GRES = """JobId=7 JobName=bash
   TRES=cpu=2,node=2,billing=2
   JOB_GRES=gpu:8
     Nodes=h[0-1] CPU_IDs=0 Mem=0 GRES=gpu:4(IDX:0-3)
   TresPerNode=gres:gpu:4
"""
DETAIL_UNEVEN = """   JOB_GRES=gpu:6
     Nodes=h0 CPU_IDs=0-3 Mem=0 GRES=gpu:a100:4(IDX:0-3)
     Nodes=h1 CPU_IDs=8,10 Mem=0 GRES=gpu:a100:2(IDX:1,3)
   TresPerJob=gres:gpu:6
"""


def names(nodelist: str) -> list[str]:
    return {"h[0-1]": ["h0", "h1"]}.get(nodelist, [nodelist])


def allocation(gpus: dict[str, int], cpus: int | None = None) -> Allocation:
    nodes = tuple(gpus)
    return Allocation("7", nodes, {n: n for n in nodes}, len(nodes),
                      {n: tuple(str(k) for k in range(g)) for n, g in gpus.items() if g},
                      dict.fromkeys(nodes, cpus) if cpus else {})


def test_each_nodes_gpus_and_cpus_are_read_from_the_jobs_per_node_lines_not_its_accounting():
    # the emulated nodes' job shows no gres/gpu in TRES= (accounting off): the per-node GRES line is what holds them
    assert node_resources(DETAIL_GRES, names) == ({"h0": ("0", "1", "2", "3"), "h1": ("0", "1", "2", "3")},
                                                  {"h0": 1, "h1": 1})
    assert node_resources(DETAIL_UNEVEN, names) == ({"h0": ("0", "1", "2", "3"), "h1": ("1", "3")},
                                                    {"h0": 4, "h1": 2})
    assert node_resources("     Nodes=h0 CPU_IDs=0-1 Mem=0 GRES=", names) == ({}, {"h0": 2})


def test_nodes_of_unlike_gpus_take_workers_by_their_own_gpus_and_ranks_follow_a_hostfile(tmp_path):
    held = allocation({"h0": 4, "h1": 2})
    assert held.holds(None, 1) == 6
    placed = SlurmPlacement.for_processes(held, {"worker": 6}, "t", None, {"worker": 1})
    assert sorted(placed.roles["worker"]) == ["h0"] * 4 + ["h1"] * 2
    argv, env = placed.ranks(["x"], False, {}, tmp_path)
    assert "--distribution=arbitrary" in argv
    assert Path(env["SLURM_HOSTFILE"]).read_text().split() == placed.roles["worker"]
    with pytest.raises(Exception, match=r"holds \(6: 2 nodes, up to 4 workers a node by its GPUs\).*salloc -N 3"):
        SlurmPlacement.for_processes(held, {"worker": 7}, "t", None, {"worker": 1})


def test_a_one_process_run_asks_slurm_for_the_gpus_its_process_takes(monkeypatch, tmp_path):
    monkeypatch.setattr(Allocation, "current", classmethod(lambda cls: allocation({"h0": 4, "h1": 4})))
    monkeypatch.setattr(srun, "check_shared", lambda placement, folder: None)
    started = []
    monkeypatch.setattr(srun, "steps_ended", lambda placement: contextlib.nullcontext())
    monkeypatch.setattr(srun.subprocess, "run", lambda argv, check: started.append(argv) or
                        subprocess.CompletedProcess(argv, 0))
    for gpus, asked in (({"worker": 4}, "--gpus=4"), ({"worker": 1}, "--gpus=1")):  # mirrored's towers; single
        assert srun.run_as_step("{}", tmp_path, gpus, None) == 0
        assert asked in started[-1] and "--gres=none" not in started[-1]


def test_overlapping_task_steps_ask_for_their_nodes_gpus_and_each_process_takes_its_local_ranks():
    # three overlapping steps that each asked --gpus-per-task=1 all got GPU 0 (Slurm 22.05 shares GRES between
    # overlapping steps): each asks for the node's GPUs and takes those of its place among the node's GPU tasks
    placed = SlurmPlacement.for_processes(allocation({"h0": 4, "h1": 4}), {"worker": 6, "ps": 2}, "t", None,
                                          {"worker": 1, "ps": 0})
    worker = placed.srun("worker", 0, ["x"])
    assert "--gpus=4" in worker and "--overlap" in worker
    assert "--gres=none" in placed.srun("ps", 0, ["x"])
    assert [choose(1, rank, ["0", "1", "2", "3"], False, bound=True) for rank in range(3)] == [["0"], ["1"], ["2"]]
    assert choose(1, 0, ["2"], False, bound=True) == ["2"]  # a rank Slurm bound one GPU to takes it


def test_steps_ask_with_their_own_flags_not_with_the_jobs_gpu_request_they_inherit():
    # salloc --gpus-per-node=4 exports SLURM_GPUS_PER_NODE=4, which srun reads as its flag: a ps step's --gres=none
    # beside it was refused ("Invalid Trackable RESource (TRES) specification")
    placed = SlurmPlacement.for_processes(allocation({"h0": 4}), {"worker": 2, "ps": 1}, "t", None,
                                          {"worker": 1, "ps": 0})
    for argv in (placed.srun("ps", 0, ["x"]), placed.srun_ranks(["x"])):
        assert argv[0] == "env" and argv[argv.index("srun") - len(JOB_GPU_REQUEST):argv.index("srun")] == [
            f"--unset={name}" for name in JOB_GPU_REQUEST]
        assert "SLURM_GPUS_PER_NODE" in JOB_GPU_REQUEST


def test_each_step_asks_for_its_share_of_its_nodes_cpus():
    four = SlurmPlacement.for_processes(allocation({"h0": 4, "h1": 4}, cpus=8), {"worker": 8}, "t", None,
                                        {"worker": 1})
    assert "--cpus-per-task=2" in four.srun("worker", 0, ["x"])
    ranks = four.srun_ranks(["x"])
    assert "--cpus-per-task=2" in ranks and "--overcommit" not in ranks
    one_cpu = SlurmPlacement.for_processes(allocation({"h0": 4, "h1": 4}, cpus=1), {"worker": 8}, "t", None,
                                           {"worker": 1})
    assert "--overcommit" in one_cpu.srun_ranks(["x"])  # salloc -N 2 --gres=gpu:4 holds a CPU a node
    assert "--cpus-per-task=1" in one_cpu.srun("worker", 0, ["x"])


def confined_ranks(nodes: int = 2, per_node: int = 4) -> dict:
    """run.json's devices of ranks whose steps Slurm confined: each sees its one GPU as index 0, and its nvidia-smi
    lists that GPU alone; TensorFlow saw it."""
    out = {}
    for rank in range(nodes * per_node):
        node, local = f"h{rank % nodes}", rank // nodes
        table = [{"index": "0", "name": "A100", "uuid": f"GPU-{node}-{local}", "memory_mib": "40960"}]
        out[f"worker {rank}"] = {"host": node, "gpus": [0], "gpu_uuids": uuids_of(["0"], table),
                                 "bound_by_slurm": True, "tensorflow_gpus": [{"device": "GPU:0", "name": "A100"}]}
    return out


def test_gpus_are_counted_by_uuid_where_every_confined_step_numbers_its_own_from_0():
    record = {"devices": confined_ranks()}
    assert devices(record) == (8.0, "8 GPU(s) on 2 host(s)")  # by index: 1 a node, the MFU 4x too high
    assert placement_problems({**record, "plan": [{"role": "worker", "index": r, "gpus": [r // 2]}
                                                  for r in range(8)]}) == []
    record["devices"]["worker 2"]["gpu_uuids"] = record["devices"]["worker 0"]["gpu_uuids"]
    [problem] = placement_problems({**record, "plan": [{"role": "worker", "index": r, "gpus": [0]}
                                                       for r in range(8)]})
    assert "worker 2 and worker 0 both on GPU GPU-h0-0" == problem


def test_a_uuid_in_cuda_visible_devices_is_itself_and_an_index_is_nvidia_smis_row():
    table = [{"index": "0", "uuid": "GPU-aa"}, {"index": "1", "uuid": "GPU-bb"}]
    assert uuids_of(["1", "GPU-aa"], table) == ["GPU-bb", "GPU-aa"]
    assert uuids_of(["0", "1"], []) == []  # GPUs declared where nvidia-smi lists none have no UUID


class EagerWorker:
    """A worker whose step returns once its work is queued, as an eager or tf.function step on a GPU does."""

    def __init__(self, work_s: float) -> None:
        self.work_s = work_s
        self.pending: threading.Thread | None = None

    def step(self, stamp: bool):
        self.pending = threading.Thread(target=time.sleep, args=(self.work_s,))
        self.pending.start()
        return "result"

    def device_done(self) -> None:
        self.pending.join()


def test_a_step_that_returns_before_its_device_work_is_timed_with_that_work():
    from bench.run.process.harness import timed_step

    worker = EagerWorker(0.2)
    t_start, result, t_end = timed_step(worker, False, time.monotonic, worker.device_done)
    # 0.2 s of queued work: only the wait for the device puts it inside the step (the step itself returns at once)
    assert result == "result" and t_end - t_start >= 0.2
    from bench.run.process.device_wait import device_wait

    assert device_wait() is None  # no GPU here: CPU ops run synchronously, so a step's return is its end


def test_a_process_given_gpus_its_tensorflow_cannot_see_fails_in_one_line_unless_asked_to_run_on_the_cpu():
    from bench.run.placement.visible import on_cpu_or_refused

    placed = {"gpus": [2], "gpu_uuids": ["GPU-x"]}
    with pytest.raises(RunFailed, match="given GPU\\(s\\) 2 but TensorFlow sees none: this TensorFlow is a CPU"):
        on_cpu_or_refused([], placed, on_cpu=False)
    assert on_cpu_or_refused([], placed, on_cpu=True) == [] and placed["computed_on"] == "cpu (--on-cpu)"
    assert on_cpu_or_refused([], {"gpus": [0], "gpu_uuids": []}, on_cpu=False) == []  # declared, none found


def test_servers_of_tasks_that_serve_get_the_processes_memory_policy(monkeypatch):
    import tensorflow as tf

    from bench.run.placement import visible
    from strategies.workers.ps import ParameterServerWorker
    from strategies.workers.ps_coordinator import PSCoordinatorWorker

    monkeypatch.setenv(visible.PLACEMENT, json.dumps({"record": {"memory": "fraction 0.25"}}))
    made = []

    class Server:
        def __init__(self, *args, **kwargs):
            made.append(kwargs.get("config"))
            raise StopIteration  # built: what it was given is all this test reads

    monkeypatch.setattr(tf.distribute, "Server", Server)
    cluster = {"ps": ["localhost:1"], "worker": ["localhost:2"]}
    for worker in (PSCoordinatorWorker, ParameterServerWorker):
        with pytest.raises(StopIteration):
            worker.serve("ps", 0, RunConfig(strategy="ps-async"), cluster)
    assert [c.gpu_options.per_process_gpu_memory_fraction for c in made] == [0.25, 0.25]


def test_nccl_and_ucx_settings_reach_every_remote_task_and_rank(monkeypatch, tmp_path):
    from bench.run.launch.ssh_hosts import HostPlacement

    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    monkeypatch.setenv("UCX_NET_DEVICES", "mlx5_0:1")
    placed = HostPlacement.for_processes(("a", "b"), {"worker": 2, "ps": 1})
    remote = placed.command("worker", 0, ["python", "-m", "bench"], {})[-1]
    assert "NCCL_SOCKET_IFNAME=ib0" in remote and "UCX_NET_DEVICES=mlx5_0:1" in remote
    argv, _ = placed.ranks(["python"], False, {}, tmp_path)
    assert ["-x", "NCCL_SOCKET_IFNAME"] == argv[argv.index("NCCL_SOCKET_IFNAME") - 1:][:2]


def test_the_model_probe_child_starts_no_gpu(tmp_path, monkeypatch):
    """The child that builds a user's model once sees no GPU, whatever this process was given: the model records
    what the child's environment said."""
    from bench.run.models import user

    saw = tmp_path / "saw"
    spec = tmp_path / "recording.py"
    spec.write_text(f"import os\nimport sys\nsys.path.insert(0, {str(ROOT / 'tests' / 'data')!r})\n"
                    "import keras_digits\n\n\ndef build():\n"
                    f"    open({str(saw)!r}, 'w').write(os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))\n"
                    "    return keras_digits.build()\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(user, "_runtime_started", lambda: False)  # as in a launcher: the model is built in a child
    assert user.probe(f"{spec}:build").kind == user.KERAS
    assert saw.read_text() == "-1"


def test_share_gpus_with_an_nccl_collective_is_refused_in_one_line_before_anything_starts(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench", "--strategy", "allreduce-tf", "--workers", "4",
                           "--gpus-per-host", "2", "--share-gpus", "--output", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not list(tmp_path.iterdir())
    [line] = done.stderr.strip().splitlines()
    assert "--share-gpus: allreduce-tf all-reduces through NCCL, which refuses two ranks on one GPU" in line


def test_a_rank_whose_mpi_sets_no_local_rank_variable_asks_mpi(monkeypatch):
    from bench.run.launch import mpi_environment
    from bench.run.placement.gpus import LOCAL_RANK_VARIABLES, LOCAL_SIZE_VARIABLES

    for name in (*LOCAL_RANK_VARIABLES, *LOCAL_SIZE_VARIABLES, "OMPI_COMM_WORLD_SIZE", "HOROVOD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PMI_RANK", "5")
    monkeypatch.setenv("PMI_SIZE", "8")  # an MPI the suite names no local-rank variable of
    host = types.SimpleNamespace(Get_rank=lambda: 1, Get_size=lambda: 4)
    world = types.SimpleNamespace(Split_type=lambda kind: host)
    fake = types.SimpleNamespace(COMM_WORLD=world, COMM_TYPE_SHARED="shared")
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=fake))
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", fake)
    assert mpi_environment.local_position() == (1, 4)
    monkeypatch.setenv("PALS_LOCAL_RANKID", "3")  # Cray PALS: named
    assert mpi_environment.local_position()[0] == 3


def stand_in_nvidia_smi(tmp_path: Path, gpus: int) -> dict[str, str]:
    """An environment whose nvidia-smi is the emulated cluster's stand-in, listing `gpus` GPUs for this host."""
    import os
    import shutil
    import socket

    from bench.infra.emulated.gpus import NAME, STAND_IN

    (tmp_path / "bin").mkdir()
    shutil.copy(STAND_IN, tmp_path / "bin" / "nvidia-smi")
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / f"{socket.gethostname()}.csv").write_text(
        "".join(f"{k},{NAME},GPU-{k:08d}-0000-0000-0000-000000000000,16384\n" for k in range(gpus)))
    return {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "DISTBENCH_GPU_TABLES": str(tmp_path / "tables")}


def test_gpu_check_counts_the_gpus_cuda_visible_devices_gives_and_asks_tensorflow_what_build_it_is(tmp_path):
    env = {**stand_in_nvidia_smi(tmp_path, 4), "CUDA_VISIBLE_DEVICES": "1,2"}
    done = subprocess.run([sys.executable, "-m", "bench", "gpu-check", "--output", str(tmp_path / "out")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    said = done.stdout.splitlines()
    assert said[0].endswith(", 2 of them given (CUDA_VISIBLE_DEVICES)") and said[0].startswith("gpu-check: 4 GPU(s)")
    assert done.returncode == 1 and "a CPU build (tf.test.is_built_with_cuda() is False)" in said[1]


def test_gpu_check_runs_the_baseline_first_and_starts_no_run_that_would_end_past_its_budget():
    from bench.drivers.gpu_check import CHECK_BUDGET_S, REPORT_LIMIT_S, RUN_LIMIT_S, checked_order, may_start
    from strategies import registry

    order = checked_order(list(registry.all_strategies()))
    assert registry.get(order[0]).baseline and sorted(order) == sorted(registry.all_strategies())
    last_start = CHECK_BUDGET_S - RUN_LIMIT_S - REPORT_LIMIT_S
    assert may_start(last_start) and not may_start(last_start + 1) and CHECK_BUDGET_S <= 600
