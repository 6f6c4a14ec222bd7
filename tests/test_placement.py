"""Where every process of every strategy computes, decided without a GPU: the placement's functions for every
launcher (this host, the user's mpirun, srun, --hosts, the emulated hosts) on hosts of 4 GPUs, the plan
--dry-run prints, and the refusals before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.config import RunConfig
from bench.drivers.gpu_check import placement_problems
from bench.infra.emulated.network import Cluster, Host
from bench.run.contract import IN_PROCESS, MPI, default_workers
from bench.run.launch import gpu_plan
from bench.run.launch.emulated_hosts import Placement
from bench.run.launch.slurm.srun import Allocation, SlurmPlacement
from bench.run.launch.ssh_hosts import HostPlacement
from bench.run.launch.this_host import ThisHost
from bench.run.placement.gpus import (
    GIVEN,
    LOCAL_RANK_VARIABLES,
    PlacementError,
    choose,
    cluster_hosts,
    host_slots,
    local_rank_from,
    local_ranks,
    memory_policy,
    offered,
    parse_visible,
    workers_a_host_holds,
)
from bench.run.placement.plan import make_plan
from bench.run.validation import validate
from strategies import registry
from tests.conftest import ROOT

NO_TENSORFLOW = True  # conftest: nothing here imports TensorFlow
GPUS = 4
STRATEGIES = sorted(registry.all_strategies())


def config_for(name: str, workers: int | None = None, **changes) -> RunConfig:
    strategy = registry.get(name)
    base = RunConfig(strategy=name, workers=workers or default_workers(strategy), **{"gpus_per_host": GPUS, **changes})
    return strategy.with_defaults(base)


def four_gpus(host: str) -> list[str]:
    return [str(i) for i in range(GPUS)]


def assert_placed(plan, config: RunConfig) -> None:
    """Every training process on GPUs of its own (as many as its strategy gives a worker), none shared on a host;
    ps tasks and a coordinator on none."""
    strategy = registry.get(config.strategy)
    taken = set()
    for process in plan:
        if process.role == "worker":
            assert len(process.gpus) == strategy.gpus(config)["worker"], process
        else:
            assert process.gpus == [] and process.memory is None, process
        for gpu in process.gpus:
            assert (process.host, gpu) not in taken, (process, plan)
            taken.add((process.host, gpu))
        assert all(0 <= g < GPUS for g in process.gpus)
    assert len(plan) == sum(strategy.processes(config).values()) if strategy.runs_as.kind != IN_PROCESS \
        else len(plan) == 1


# ---- the decision itself


def test_a_process_takes_the_gpus_of_its_local_rank():
    slots = ["0", "1", "2", "3"]
    assert [choose(1, r, slots, False) for r in range(4)] == [["0"], ["1"], ["2"], ["3"]]
    assert [choose(2, r, slots, False) for r in range(2)] == [["0", "1"], ["2", "3"]]
    assert choose(0, 3, slots, False) == [] and choose(1, 0, [], False) == []  # a ps; a host without GPUs
    with pytest.raises(PlacementError, match="--share-gpus"):
        choose(1, 4, slots, False)
    assert choose(1, 5, slots, True) == ["1"] and choose(2, 3, slots, True) == ["2", "3"]  # shared: round again
    with pytest.raises(PlacementError, match="at most 4"):
        choose(5, 0, slots, True)


def test_the_choice_is_among_the_gpus_cuda_visible_devices_names_never_around_them():
    given = parse_visible("2,3")
    assert host_slots(None, ["0", "1", "2", "3"], given) == ["2", "3"]
    assert choose(1, 1, host_slots(None, [], given), False) == ["3"]
    # Slurm bound one GPU to this process's step: it is its own, whatever its local rank
    assert choose(1, 3, ["5"], False, bound=True) == ["5"]
    assert choose(1, 1, ["0", "1"], False, bound=True) == ["1"]  # bound to the node's GPUs: chosen among them
    assert parse_visible("") == [] and parse_visible("-1") == [] and parse_visible(None) is None
    assert parse_visible("GPU-aa,GPU-bb") == ["GPU-aa", "GPU-bb"]


def test_declared_gpus_stand_in_where_none_are_found_and_take_fewer_where_some_are():
    assert host_slots(4, [], None) == ["0", "1", "2", "3"]
    assert host_slots(2, ["0", "1", "2", "3"], None) == ["0", "1"]
    assert host_slots(None, [], None) == []
    with pytest.raises(PlacementError, match="this host has 4 GPU"):
        host_slots(8, ["0", "1", "2", "3"], None)


@pytest.mark.parametrize("variable", LOCAL_RANK_VARIABLES)
def test_each_launchers_local_rank_is_read(variable):
    assert local_rank_from({variable: "3"}) == 3
    assert local_rank_from({}) is None


def test_mpiruns_local_rank_comes_before_a_batch_steps_slurm_localid():
    assert local_rank_from({"SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "2"}) == 2


def test_a_tf_clusters_local_ranks_count_the_gpu_tasks_on_each_host():
    cluster = {"worker": ["a:1", "a:2", "b:1"], "ps": ["a:3", "b:2"]}
    ranks = local_ranks(cluster_hosts(cluster), {"worker": 1, "ps": 0})
    assert ranks == {("worker", 0): 0, ("worker", 1): 1, ("worker", 2): 0, ("ps", 0): 0, ("ps", 1): 0}
    with_ps_gpus = local_ranks(cluster_hosts(cluster), {"worker": 1, "ps": 1})
    assert with_ps_gpus[("ps", 0)] == 2 and with_ps_gpus[("ps", 1)] == 1  # after the workers of their host


def test_memory_grows_by_default_and_a_shared_gpu_gives_each_its_share():
    assert memory_policy(None, 1) == "growth"
    assert memory_policy(0.5, 1) == "fraction 0.5"
    assert memory_policy(None, 2) == "fraction 0.5" and memory_policy(0.8, 4) == "fraction 0.2"


# ---- every strategy under every launcher, on hosts of 4 GPUs


@pytest.mark.parametrize("name", STRATEGIES)
def test_on_this_host_every_process_of_every_strategy_gets_gpus_of_its_own(name):
    strategy = registry.get(name)
    low, high = strategy.worker_range
    config = config_for(name, workers=min(high or GPUS, GPUS) if strategy.runs_as.kind != IN_PROCESS or high != 1
                        else 1)
    if strategy.runs_as.kind == IN_PROCESS:
        plan = make_plan(config, strategy, {"worker": ["here"]}, four_gpus)
    else:
        plan = gpu_plan.of_kind(config, strategy, ThisHost(strategy.processes(config)))
    assert_placed(plan, config)


@pytest.mark.parametrize("name", [n for n in STRATEGIES if registry.get(n).runs_as.kind == MPI])
def test_under_the_users_mpirun_each_rank_takes_the_gpu_of_its_local_rank(name, monkeypatch):
    strategy = registry.get(name)
    config = config_for(name, workers=GPUS)
    seen = []
    for rank in range(GPUS):
        monkeypatch.setenv("OMPI_COMM_WORLD_RANK", str(rank))
        monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", str(rank))
        [entry] = gpu_plan.planned(config, strategy)
        assert (entry.index, entry.local_rank, entry.role) == (rank, rank, "worker")
        seen.append(entry.gpus)
    assert seen == [[0], [1], [2], [3]]


def allocation(nodes: int, gpus_per_node: int, cpus: int | None = None) -> Allocation:
    names = tuple(f"h{i}" for i in range(nodes))
    gpus = {n: tuple(str(k) for k in range(gpus_per_node)) for n in names} if gpus_per_node else {}
    return Allocation("7", names, {n: f"10.0.0.{i + 1}" for i, n in enumerate(names)}, nodes, gpus,
                      dict.fromkeys(names, cpus) if cpus else {})


@pytest.mark.parametrize("name", [n for n in STRATEGIES if registry.get(n).runs_as.kind != IN_PROCESS])
def test_in_a_slurm_allocation_of_two_nodes_of_4_gpus_each_node_holds_4_gpu_workers(name):
    strategy = registry.get(name)
    workers = 2 * GPUS // (strategy.gpus(config_for(name))["worker"] or 1)
    config = config_for(name, workers=workers, gpus_per_host=None)
    held = allocation(2, GPUS)
    placed = SlurmPlacement.for_processes(held, {r: n for r, n in strategy.processes(config).items() if n}, "t",
                                          None, strategy.gpus(config))
    plan = make_plan(config, strategy, placed.task_hosts(), four_gpus)
    assert_placed(plan, config)
    workers_on = {h: sorted(p.gpus for p in plan if p.role == "worker" and p.host == h) for h in ("h0", "h1")}
    assert workers_on["h0"] == workers_on["h1"] == [[0], [1], [2], [3]]
    # the job holds GPUs, so its steps ask for them: a task step for its node's (overlapping steps share GRES, and
    # the process takes those of its local rank), the ranks one each, and a ps step for none
    assert placed.gpu_flags("worker", "h0") == ["--gpus=4"]
    assert "--gpus-per-task=1" in placed.srun_ranks(["x"])
    assert placed.gpu_flags("ps", "h0") == ["--gres=none"]


def test_what_each_host_offers_and_how_many_workers_it_holds_are_decided_in_one_place(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.delenv("DISTBENCH_GIVEN_CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_STEP_GPUS", raising=False)
    job = {"h0": ["0", "1", "2", "3"], "h1": ["0", "1"]}.get
    assert offered(None, job)("h1") == ["0", "1"]  # the Slurm job's GPUs on each node
    assert offered(None, None)("anywhere") == ["2", "3"]  # this host's, taken for every host
    assert offered(1, job)("h0") == ["2"]  # --gpus-per-host takes fewer of this host's
    assert [workers_a_host_holds(g, w) for g, w in ((4, 1), (4, 2), (3, 2), (0, 1), (4, 0))] == [4, 2, 1, 1, 1]


def test_a_slurm_allocation_without_gpus_holds_a_worker_a_node_and_its_steps_ask_for_none():
    held = allocation(2, 0)
    assert held.node_capacity("h0", None, 1) == 1 and held.node_capacity("h0", 4, 1) == 4  # --gpus-per-host 4
    placed = SlurmPlacement.for_processes(held, {"worker": 2}, "t")
    assert placed.gpu_flags("worker", "h0") == [] and "--gpus-per-task" not in " ".join(placed.srun_ranks(["x"]))
    with pytest.raises(Exception, match="salloc -N 3"):
        SlurmPlacement.for_processes(held, {"worker": 3}, "t")
    with pytest.raises(Exception, match=r"salloc -N 3\)"):
        SlurmPlacement.for_processes(held, {"worker": 9}, "t", declared=4, gpus={"worker": 1})


@pytest.mark.parametrize("name", [n for n in STRATEGIES if registry.get(n).runs_as.kind != IN_PROCESS])
def test_over_hosts_reached_by_ssh_each_host_gives_its_gpus_to_its_own_workers(name):
    strategy = registry.get(name)
    config = config_for(name, workers=2 * GPUS // (strategy.gpus(config_for(name))["worker"] or 1))
    placed = HostPlacement.for_processes(("a", "b"), {r: n for r, n in strategy.processes(config).items() if n})
    plan = gpu_plan.of_kind(config, strategy, placed)
    assert_placed(plan, config)
    assert {p.host for p in plan if p.role == "worker"} == {"a", "b"}


@pytest.mark.parametrize("name", [n for n in STRATEGIES if registry.get(n).runs_as.kind != IN_PROCESS])
def test_on_the_emulated_hosts_each_process_has_a_host_and_its_gpus(name):
    strategy = registry.get(name)
    config = config_for(name, workers=2)
    processes = {r: n for r, n in strategy.processes(config).items() if n}
    hosts = tuple(Host(i, f"db-h{i}", f"10.9.0.{i + 1}") for i in range(sum(processes.values())))
    plan = gpu_plan.of_kind(config, strategy, Placement.for_processes(Cluster("db", hosts, "10.9.0.0/24", None),
                                                                      processes))
    assert_placed(plan, config)
    assert all(p.local_rank == 0 and p.gpus in ([0], []) for p in plan)  # one process a host


def test_a_task_over_ssh_chooses_among_its_hosts_gpus_not_the_launchers(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # the launcher's own (a laptop's, a login node's)
    monkeypatch.setenv("DISTBENCH_GIVEN_CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    placed = HostPlacement.for_processes(("a", "b"), {"worker": 2})
    command = " ".join(placed.command("worker", 1, ["python", "-m", "bench"], {}))
    assert "TF_CPP_MIN_LOG_LEVEL=2" in command and "CUDA" not in command
    mpirun = " ".join(placed.ranks(["python", "-m", "bench"], False, {}, Path("/tmp"))[0])
    assert "CUDA" not in mpirun


def test_a_one_process_run_over_hosts_goes_to_the_first_host():
    config = config_for("single", hosts=("a", "b"))
    [entry] = gpu_plan.planned(config, registry.get("single"))
    assert (entry.host, entry.gpus) == ("a", [0])


def test_a_worker_of_several_gpus_takes_them_as_towers_where_its_strategy_can_and_is_refused_elsewhere():
    config = config_for("ps-sync", workers=2, gpus_per_worker=2)
    plan = gpu_plan.of_kind(config, registry.get("ps-sync"), ThisHost({"ps": 1, "worker": 2}))
    assert [p.gpus for p in plan if p.role == "worker"] == [[0, 1], [2, 3]]
    assert registry.get("ps-sync").worker_batch(config) == 2 * config.batch_size
    for name in ("allreduce", "allreduce-tf", "ps-coordinator", "mirrored", "single", "local-sgd"):
        with pytest.raises(Exception, match="--gpus-per-worker 2: a .* worker drives one device"):
            validate(RunConfig(strategy=name, workers=1 if name == "single" else 2, gpus_per_worker=2,
                               model="mlp", data="synthetic"), registry.get(name), registry.all_strategies())


# ---- the plan as a user asks for it, and the refusals


def dry_run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args, "--dry-run", "--json", "--gpus-per-host", "4"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


def processes_of(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, done.stderr
    return [p for line in done.stdout.splitlines() if line.strip() for p in json.loads(line)["processes"]]


def by_role(processes: list[dict]) -> dict[str, list]:
    out: dict[str, list] = {}
    for p in sorted(processes, key=lambda p: (p["role"], p["index"])):
        out.setdefault(p["role"], []).append(p["gpus"])
    return out


@pytest.mark.parametrize("args, expected", [
    (("--strategy", "allreduce", "--workers", "4"), {"worker": [[0], [1], [2], [3]]}),
    (("--strategy", "ps-sync", "--workers", "4", "--ps", "1"), {"worker": [[0], [1], [2], [3]], "ps": [[]]}),
    (("--strategy", "mirrored", "--workers", "4"), {"worker": [[0, 1, 2, 3]]}),
    (("--strategy", "allreduce-tf", "--workers", "4"), {"worker": [[0], [1], [2], [3]]}),
    (("--strategy", "ps-coordinator", "--workers", "2"), {"worker": [[0], [1]], "coordinator": [[]], "ps": [[]]}),
])
def test_the_dry_run_plan_as_json(args, expected):
    processes = processes_of(dry_run(*args))
    assert by_role(processes) == expected
    assert all(set(p) == {"host", "role", "index", "local_rank", "gpus", "memory", "collective"} for p in processes)
    assert all(p["memory"] == ("growth" if p["gpus"] else None) for p in processes)


def test_allreduce_tf_plans_nccl_among_gpus():
    assert {p["collective"] for p in processes_of(dry_run("--strategy", "allreduce-tf", "--workers", "4"))} == \
        {"MultiWorkerMirroredStrategy, NCCL"}


def test_mirrored_offers_nccl_across_its_gpu_towers_and_refuses_it_without_gpus():
    nccl = processes_of(dry_run("--strategy", "mirrored", "--workers", "2", "--reduction", "nccl"))
    assert [p["collective"] for p in nccl] == ["NCCL all-reduce across the GPU towers (tf.distribute.NcclAllReduce)"]
    default = processes_of(dry_run("--strategy", "mirrored", "--workers", "2"))
    assert default[0]["collective"].startswith("towers' gradients reduced in this process")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", GIVEN)}
    done = subprocess.run([sys.executable, "-m", "bench", "--strategy", "mirrored", "--workers", "2", "--reduction",
                           "nccl", "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "bench: error: --reduction nccl all-reduces across GPU towers, and this host has none (nvidia-smi lists no "
        "GPU): leave it out to reduce on one device"]


def test_the_dry_run_in_words_is_a_line_a_process():
    done = subprocess.run([sys.executable, "-m", "bench", "--strategy", "ps-sync", "--workers", "2", "--dry-run",
                           "--gpus-per-host", "4"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "3 process(es), 2 GPU(s)" in lines[0] and len(lines) == 4
    assert "worker 0" in lines[1] and "GPUs 0 " in lines[1] and "ps 0" in lines[3] and "GPUs none" in lines[3]


def test_the_users_mpirun_plans_as_allreduce_with_4_workers_does():
    activate = Path(sys.executable).parent / "activate"
    if not activate.exists():
        pytest.skip("no virtual environment's activate script to source (./run_bench.sh setup makes one)")
    line = f"source {activate} && mpirun -np 4 {sys.executable} -m bench --dry-run --json --gpus-per-host 4"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PRTE_", "PMIX_"))}
    done = subprocess.run(["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    ranks = sorted(processes_of(done), key=lambda p: p["index"])
    launched = processes_of(dry_run("--strategy", "allreduce", "--workers", "4"))
    assert [(p["index"], p["local_rank"], p["gpus"]) for p in ranks] == \
        [(p["index"], p["local_rank"], p["gpus"]) for p in launched]


@pytest.mark.parametrize("args, fragment", [
    (("--strategy", "allreduce", "--workers", "8", "--gpus-per-host", "4"), "8 GPU processes on"),
    (("--strategy", "mirrored", "--workers", "9999"), "at most 64"),
    (("--strategy", "mirrored", "--workers", "8", "--gpus-per-host", "4"), "takes 8 GPUs and"),
    (("--strategy", "ps-sync", "--hosts", ","), "--hosts: give host names"),
    (("--strategy", "allreduce", "--gpus-per-worker", "2"), "drives one device"),
    (("--strategy", "single", "--gpus-per-host", "-1"), "--gpus-per-host: must be >= 0"),
    (("--strategy", "single", "--json"), "--json goes with --dry-run"),
])
def test_a_placement_the_hosts_cannot_give_is_one_line_and_exit_2(args, fragment, results):
    done = subprocess.run([sys.executable, "-m", "bench", *args, "--steps", "5", "--output", str(results)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and fragment in done.stderr
    assert not list(results.iterdir())


def test_sharing_lets_more_processes_onto_a_host_than_its_gpus_each_with_its_share():
    processes = processes_of(dry_run("--strategy", "allreduce", "--workers", "8", "--share-gpus"))
    assert [p["gpus"] for p in sorted(processes, key=lambda p: p["index"])] == [[0], [1], [2], [3]] * 2
    assert {p["memory"] for p in processes} == {"fraction 0.5"}


def test_gpu_check_on_a_host_without_gpus_says_so_in_one_line():
    done = subprocess.run([sys.executable, "-m", "bench", "gpu-check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip().count("\n") == 0 and "no GPU" in done.stdout


def test_gpu_check_finds_two_processes_on_one_gpu_and_a_process_on_other_gpus_than_planned():
    plan = [{"role": "worker", "index": i, "gpus": [g]} for i, g in enumerate((0, 1))]
    good = {"plan": plan, "devices": {"worker 0": {"host": "a", "gpus": [0]}, "worker 1": {"host": "a", "gpus": [1]}}}
    assert placement_problems(good) == []
    shared = {**good, "devices": {"worker 0": {"host": "a", "gpus": [0]}, "worker 1": {"host": "a", "gpus": [0]}}}
    assert any("both on GPU 0" in p for p in placement_problems(shared))
    assert any("planned [1]" in p for p in placement_problems(shared))
