"""Hosts without a scheduler (--hosts, bench.run.launch.ssh_hosts): the placement and the guard that
ends a remote task with its connection; then every TensorFlow-cluster strategy, allreduce's MPI
ranks, a one-process run and the default comparison from one command on the emulated cluster through
its ssh stand-in, a killed worker and a lost host (root only)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT
from tests.processes import (
    CLUSTER_LIMIT_S,
    RUN_LIMIT_S,
    bench,
    leftover_processes,
    run_record,
    why_no_emulated_cluster,
)

NO_TENSORFLOW = True
NAME = "dbhosts"  # not the user's default cluster name
ENDED_WITHIN_S = 30  # the bar: a killed worker or a lost host ends the run this soon (ssh keep-alive 15 s)


def test_tasks_go_workers_first_one_per_host_then_wrap_around_on_the_next_port():
    from bench.run.launch.ssh_hosts import TF_PORT, HostPlacement

    placed = HostPlacement.for_processes(("a", "b", "c"), {"ps": 1, "worker": 2})
    assert placed.tf_cluster() == {"worker": [f"a:{TF_PORT}", f"b:{TF_PORT}"], "ps": [f"c:{TF_PORT}"]}
    wrapped = HostPlacement.for_processes(("a", "b"), {"ps": 1, "worker": 2, "chief": 1})
    assert wrapped.tf_cluster() == {"worker": [f"a:{TF_PORT}", f"b:{TF_PORT}"], "chief": [f"a:{TF_PORT + 1}"],
                                    "ps": [f"b:{TF_PORT + 1}"]}


def test_a_run_with_nowhere_to_go_runs_on_this_host_in_a_scratch_folder_of_its_own(monkeypatch, tmp_path):
    from bench.config import RunConfig
    from bench.run.launch.run_hosts import RunHosts
    from bench.run.launch.this_host import ThisHost

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    hosts = RunHosts.of(RunConfig(output=str(tmp_path)), {"worker": 2, "ps": 1, "chief": 0})
    kind = hosts.kind
    assert isinstance(kind, ThisHost) and hosts.network is None and not kind.holds_stdin
    cluster = kind.tf_cluster()
    addresses = [a for tasks in cluster.values() for a in tasks]
    assert {role: len(tasks) for role, tasks in cluster.items()} == {"worker": 2, "ps": 1}
    assert len(set(addresses)) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert kind.tf_cluster() == cluster  # drawn once: every task is told the same ports
    assert kind.command("ps", 0, ["python", "-m", "bench"], {"TF_CONFIG": "{}"}) == ["python", "-m", "bench"]
    argv, added = kind.ranks(["python", "-m", "bench"], False, {}, tmp_path)
    assert Path(argv[0]).name == "mpirun" and argv[argv.index("-np") + 1] == "2" and argv[-3:] == ["python", "-m",
                                                                                              "bench"]
    assert added == {} and hosts.placement_record() == {} and kind.explain("failed: x") == "failed: x"
    with hosts.held(tmp_path, time.time()) as env:
        scratch = Path(env["TMPDIR"])
        assert scratch.is_dir()
    assert not scratch.exists()


def test_a_tasks_command_carries_its_environment_and_runs_under_the_guard(monkeypatch):
    from bench.run.launch.ssh_hosts import HostPlacement

    monkeypatch.setenv("DISTBENCH_SSH", "myssh -p 2200")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("UNRELATED", "x")
    placed = HostPlacement.for_processes(("node1", "node2"), {"worker": 2})
    argv = placed.command("worker", 1, ["python", "-m", "bench", "--config-json", '{"a": "b c"}'],
                          {"TF_CONFIG": '{"task": {"type": "worker"}}'})
    assert argv[:4] == ["myssh", "-p", "2200", "node2"]
    words = shlex.split(argv[4])
    assert words[:3] == ["cd", os.getcwd(), "&&"]
    assert 'TF_CONFIG={"task": {"type": "worker"}}' in words and "TF_CPP_MIN_LOG_LEVEL=2" in words
    assert not any(w.startswith("UNRELATED=") for w in words)
    assert words[-7:] == ["-m", "bench.run.launch.remote_task", "python", "-m", "bench", "--config-json",
                          '{"a": "b c"}']


def test_an_mpi_jobs_ranks_go_one_per_worker_host_through_mpirun_or_horovodrun_over_the_same_ssh(
        monkeypatch, tmp_path):
    from bench.run.launch.ssh_hosts import HostPlacement

    monkeypatch.setenv("DISTBENCH_SSH", "myssh -p 2200")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("UNRELATED", "x")
    placed = HostPlacement.for_processes(("node1", "node2"), {"worker": 3})
    rank = ["python", "-m", "bench", "--config-json", "{}"]
    argv, added = placed.ranks(rank, False, {"DISTBENCH_RUN_DIR": "/r"}, tmp_path)
    assert argv[-len(rank):] == rank and added == {}
    flags = argv[:-len(rank)]
    # three ranks over two hosts: node1 holds ranks 0 and 2, as the TF tasks wrap around
    assert flags[flags.index("-H") + 1] == "node1:2,node2:1" and flags[flags.index("-np") + 1] == "3"
    assert flags[flags.index("plm_rsh_agent") + 1] == "myssh -p 2200"
    exported = {flags[i + 1] for i, flag in enumerate(flags) if flag == "-x"}
    assert {"DISTBENCH_RUN_DIR", "TF_CPP_MIN_LOG_LEVEL", "DISTBENCH_SSH"} <= exported and "UNRELATED" not in exported
    # horovodrun's driver (the ranks' rendezvous) runs on the first worker host, reaching the hosts with a shim
    argv, added = placed.ranks(rank, True, {}, tmp_path)
    assert argv[:4] == ["myssh", "-p", "2200", "node1"] and added == {}
    words = shlex.split(argv[4])
    assert "--gloo" in words and words[words.index("-H") + 1] == "node1:2,node2:1" and words[-len(rank):] == rank
    path = next(w for w in words if w.startswith("PATH=")).removeprefix("PATH=")
    shim = Path(path.split(":")[0]) / "ssh"
    assert shlex.split(shim.read_text().splitlines()[1]) == ["exec", "myssh", "-p", "2200", "$@"]


def test_the_guard_ends_its_task_when_the_connection_closes():
    guard = subprocess.Popen([sys.executable, "-m", "bench.run.launch.remote_task", "sleep", "300"],
                             stdin=subprocess.PIPE, cwd=ROOT)
    try:
        deadline = time.monotonic() + 20  # the guard's start: a Python interpreter, no TensorFlow
        while not psutil.Process(guard.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        task = psutil.Process(guard.pid).children()[0]
        guard.stdin.close()  # what ssh gives the remote command when its client ends
        assert guard.wait(timeout=15) == 128 + signal.SIGTERM
        assert not task.is_running() or task.status() == psutil.STATUS_ZOMBIE
    finally:
        if guard.poll() is None:
            guard.kill()


on_hosts = pytest.mark.skipif(why_no_emulated_cluster() is not None, reason=str(why_no_emulated_cluster()))


@pytest.fixture(scope="module")
def hosts():
    """A 3-host emulated cluster and the environment that makes its ssh stand-in this run's ssh."""
    from bench.infra.emulated import network

    done = bench("cluster", "up", "--hosts", "3", "--link-mbit", "1000", "--name", NAME, timeout=CLUSTER_LIMIT_S)
    assert done.returncode == 0, done.stderr
    cluster = network.get(NAME)
    env = {"DISTBENCH_SSH": str(network.AGENT),
           "DISTBENCH_NETNS_HOSTS": " ".join(f"{h.address}={h.namespace}" for h in cluster.hosts)}
    yield cluster, env
    bench("cluster", "down", "--name", NAME, timeout=CLUSTER_LIMIT_S)


def hosts_command(cluster, results: Path, strategy: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench", "--strategy", strategy, "--hosts",
            ",".join(h.address for h in cluster.hosts), "--model", "mlp", "--data", "synthetic", "--eval-every", "0",
            "--output", str(results), *extra]


def nothing_left(cluster, results: Path) -> None:
    from bench.infra.emulated import network

    assert not leftover_processes(str(results))
    assert all(not network.processes_in(h.namespace) for h in cluster.hosts)


SAME_TF_LAUNCH = pytest.mark.extended(
    "the TensorFlow cluster's launch over --hosts, as ps-sync's and allreduce-tf's here; its exchange across hosts: "
    "test_emulated.py's every_exchange_runs_across_hosts[ps-async] and ps_coordinators_worker_exchanges...")


@pytest.mark.slow
@on_hosts
@pytest.mark.parametrize("strategy, extra", [
    ("ps-sync", ["--workers", "2", "--ps", "1"]),
    pytest.param("ps-async", ["--workers", "2", "--ps", "1"], marks=SAME_TF_LAUNCH),
    ("allreduce-tf", ["--workers", "3"]),
    pytest.param("ps-coordinator", ["--workers", "1", "--ps", "1"], marks=SAME_TF_LAUNCH),
])
def test_every_tensorflow_cluster_strategy_runs_from_one_command_one_task_per_host(hosts, tmp_path, strategy, extra):
    cluster, env = hosts
    done = subprocess.run(hosts_command(cluster, tmp_path, strategy, "--steps", "40", *extra), cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=2 * RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    record = run_record(tmp_path)
    assert record["status"] == "ok"
    placed = [a.rpartition(":")[0] for role in record["cluster"].values() for a in role]
    # one task per host, each at its host's address (which exists only inside that host's namespace)
    assert sorted(placed) == sorted(h.address for h in cluster.hosts)[:len(placed)] and len(set(placed)) == len(placed)
    assert record["placement"]["launch"] == "ssh"
    assert record["summary"].get("throughput_examples_per_s"), record["summary"]  # it once failed on ssh's placement
    nothing_left(cluster, tmp_path)


@pytest.mark.slow
@on_hosts
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_allreduces_ranks_run_from_one_command_one_per_host_through_mpirun_or_horovodrun(hosts, tmp_path,
                                                                                         controller):
    from bench.infra.emulated import network

    cluster, env = hosts
    before = network.counters(cluster)
    done = subprocess.run(hosts_command(cluster, tmp_path, "allreduce", "--workers", "3", "--steps", "40",
                                        "--hvd-controller", controller), cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=2 * RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    record = run_record(tmp_path)
    assert record["status"] == "ok" and record["placement"]["launch"] == "ssh"
    assert record["summary"].get("throughput_examples_per_s"), record["summary"]
    assert sorted(record["placement"]["hosts"].values()) == sorted(h.address for h in cluster.hosts)
    # every rank ran on its own host: each host sent its share of every step's ring through its link
    after = network.counters(cluster)
    gradient = record["model"]["gradient_bytes_per_step"]
    assert all(after[i][0] - before[i][0] > 40 * gradient / 3 for i in range(3)), (before, after)
    nothing_left(cluster, tmp_path)


def command_line(pid: int) -> list[str]:
    """A process's command line, or [] if it ended since it was listed (a guard or an ssh stand-in
    of the previous test may be on its way out)."""
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def training_processes(namespace: str) -> list[int]:
    from bench.infra.emulated import network

    return [p for p in network.processes_in(namespace)
            if "--config-json" in command_line(p) and "remote_task" not in " ".join(command_line(p))]


def training_process(namespace: str) -> int:
    return training_processes(namespace)[0]


def wait_for_steps(results: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.stat().st_size > 2000 for p in results.glob("*/steps.csv")):
            return
        time.sleep(0.2)
    raise AssertionError("the run recorded no steps")


def ended_after_killing(run: subprocess.Popen, pids: list[int]) -> float:
    """SIGKILL `pids`; the seconds until the launcher `run` ended (it may take ENDED_WITHIN_S)."""
    began = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    run.wait(timeout=ENDED_WITHIN_S)
    return time.monotonic() - began


@pytest.mark.slow
@on_hosts
@pytest.mark.parametrize("strategy, lost, why", [
    pytest.param("ps-sync", "worker", ("worker 1",), marks=pytest.mark.extended(
        "a killed TensorFlow task named: test_run_endings.py::test_the_killed_worker_is_named_as_the_cause[ps-sync]; "
        "over --hosts, ps-sync's lost host and allreduce's killed worker here")),
    ("ps-sync", "host", ("ps 0",)),
    # mpirun's rank, started over ssh by mpirun itself: mpirun names it, or rank 0 names its host as the
    # peer that disconnected when it sees the connection close first, or (1 of ~15 here) rank 2 aborts on
    # the closed socket first and mpirun names only rank 2 (bench.run.launch.rank_failures)
    ("allreduce", "worker", ("rank 1 ", f"the rank on {NAME}-h1 ", "aborted: a peer's connection closed")),
])
def test_a_killed_worker_or_a_lost_host_ends_the_run_with_its_reason_and_nothing_left(hosts, tmp_path, strategy,
                                                                                       lost, why):
    from bench.infra.emulated import network

    cluster, env = hosts
    tasks = ["--workers", "2", "--ps", "1"] if strategy == "ps-sync" else ["--workers", "3"]
    run = subprocess.Popen(hosts_command(cluster, tmp_path, strategy, *tasks, "--steps", "100000"), cwd=ROOT,
                           env={**os.environ, **env},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_steps(tmp_path)
        victim = cluster.hosts[1 if lost == "worker" else 2]  # worker 1's host, or the ps task's
        pids = [training_process(victim.namespace)] if lost == "worker" else network.processes_in(victim.namespace)
        ended_s = ended_after_killing(run, pids)
    finally:
        if run.poll() is None:
            run.kill()
    record = run_record(tmp_path)
    assert ended_s < ENDED_WITHIN_S and record["status"].startswith("failed:"), record["status"]
    assert any(name in record["status"] for name in why), record["status"]
    nothing_left(cluster, tmp_path)


@pytest.mark.slow
@on_hosts
def test_a_one_process_run_trains_on_the_first_host_and_a_lost_host_ends_it(hosts, tmp_path):
    from bench.infra.emulated import network

    cluster, env = hosts
    first = cluster.hosts[0]
    run = subprocess.Popen(hosts_command(cluster, tmp_path, "single", "--steps", "100000"), cwd=ROOT,
                           env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_steps(tmp_path)
        trainer = training_process(first.namespace)  # it trains inside the first host, nowhere else
        assert trainer and not any(training_processes(h.namespace) for h in cluster.hosts[1:])
        record = run_record(tmp_path)
        assert record["placement"] == {"launch": "ssh", "ssh": env["DISTBENCH_SSH"],
                                       "hosts": {"worker 0": first.address}}
        assert record["status"] == "running" and record["environment"]  # the host's process opened the run
        ended_s = ended_after_killing(run, network.processes_in(first.namespace))
    finally:
        if run.poll() is None:
            run.kill()
    record = run_record(tmp_path)  # recorded by the launcher: nobody was left on the host to do it
    assert ended_s < ENDED_WITHIN_S and record["status"].startswith("failed: worker 0 "), record["status"]
    assert record["summary"]["global_steps"] > 0, record["summary"]
    nothing_left(cluster, tmp_path)


@pytest.mark.slow
@on_hosts
def test_the_default_comparison_runs_every_run_on_the_hosts_baseline_included(hosts, tmp_path):
    cluster, env = hosts
    addresses = ",".join(h.address for h in cluster.hosts)
    done = subprocess.run([sys.executable, "-m", "bench", "all", "--strategies", "single,ps-sync", "--models", "mlp",
                           "--workers", "1,2", "--steps", "30", "--convergence-steps", "0", "--hosts", addresses,
                           "--ps", "1", "--output", str(tmp_path)], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=8 * RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in tmp_path.glob("compare-*/*/run.json")]
    # the baseline's 3 runs and ps-sync's at 1 and 2 workers, each ok, each placed over ssh, each summarized
    assert sorted(r["config"]["strategy"] for r in records) == ["ps-sync", "ps-sync", "single", "single", "single"]
    assert all(r["summary"].get("throughput_examples_per_s") for r in records), [r["summary"] for r in records]
    assert all(r["status"] == "ok" and r["placement"]["launch"] == "ssh" for r in records), \
        [r["status"] for r in records]
    assert (tmp_path / "report.html").exists()
    nothing_left(cluster, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("strategy, extra, tasks", [
    ("ps-sync", ["--ps", "1"], {"worker 0", "worker 1", "ps 0"}),
    ("allreduce", [], {"worker 0", "worker 1"}),  # an MPI job's ranks, through the kind's `ranks`
])
def test_the_guides_host_kind_runs_a_ps_cluster_and_an_mpi_job(tmp_path, strategy, extra, tasks):
    import re

    guide = (ROOT / "docs" / "adding-a-launcher.md").read_text()
    (tmp_path / "pinned.py").write_text(re.search(r"`bench/run/launch/pinned.py`:\n\n```python\n(.*?)```", guide,
                                                  re.S).group(1))
    # the guide's line in RunHosts.of, as a patch of it: every run of this process goes by the guide's kind
    driver = "\n".join([
        "import runpy, sys", f"sys.path.insert(0, {str(tmp_path)!r})", "from pinned import Pinned",
        "from bench.run.launch.run_hosts import RunHosts",
        "RunHosts.of = classmethod(lambda cls, config, processes, *planning: cls(Pinned(processes)))",
        "runpy.run_module('bench', run_name='__main__')"])
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-c", driver, "--strategy", strategy, "--workers", "2", *extra,
                           "--steps", "30", "--model", "mlp", "--data", "synthetic", "--eval-every", "0",
                           "--output", str(results)], cwd=ROOT, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    record = run_record(results)
    assert record["status"] == "ok" and record["placement"]["launch"] == "pinned"
    assert set(record["placement"]["cores"]) == tasks
    assert not leftover_processes(str(results))


@pytest.mark.parametrize("task, described", [
    ("kill -9 $$", "worker 1 was killed by SIGKILL on its host"),
    ("echo broken >&2; exit 3", "worker 1 exited with status 3: broken"),
])
def test_a_guarded_tasks_death_by_signal_on_its_host_is_named_as_one(tmp_path, task, described):
    # ssh passes on the guard's status: 128 + N when the task died of signal N, which the supervisor ranks
    # as a cause, as it does a local child's death by signal
    from bench.run.launch.processes import start

    child = start("worker 1", [sys.executable, "-m", "bench.run.launch.remote_task", "sh", "-c", task],
                  tmp_path / "worker1.log", hold_stdin=True)
    child.process.wait(timeout=60)  # a Python start-up, then a shell that ends at once
    assert child.describe_exit() == described
    assert (child.killed_by() is not None) == ("kill" in task)


def test_a_watched_run_records_the_machine_its_chief_trained_on_not_the_launchers(tmp_path, monkeypatch):
    # --hosts from a laptop: the launcher opened run.json with the laptop's description; the run's
    # throughput and MFU belong to the chief's host (bench.run.launch.close)
    from bench.config import RunConfig
    from bench.run.launch.close import close_watched_run
    from bench.run.process import utilization
    from bench.run.process.records import RunFolder
    from strategies import registry

    folder = RunFolder.create(str(tmp_path), "watched")
    folder.update_run(run_id=folder.run_id, run_start_epoch_s=time.time(), environment={"host": "laptop"})
    folder.write_task_report(0, {"environment": {"host": "h0", "cpu_model": "AMD EPYC"}})
    config = RunConfig(strategy="ps-sync")
    read = []  # the machine whose peak the summary's MFU divides by
    monkeypatch.setattr(utilization, "figures", lambda record, _: read.append(record["environment"]) or {})
    assert close_watched_run(folder, config, registry.get("ps-sync"), "ok", time.time()) == 0
    assert folder.read_run()["environment"] == {"host": "h0", "cpu_model": "AMD EPYC"}
    assert read == [{"host": "h0", "cpu_model": "AMD EPYC"}]
