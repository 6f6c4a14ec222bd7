"""The emulated cluster's parts that need no root: subnet choice, placement, the ssh
stand-in, bytes per step from counters, and the report's Network section."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from bench.config import RunConfig
from bench.errors import UsageError
from bench.infra.emulated import network
from bench.infra.emulated.claim import claim, lock_path, release
from bench.infra.emulated.network import AGENT, Cluster, Host
from bench.metrics import Gradient
from bench.run.launch.emulated_hosts import Placement, mpirun_host_args
from bench.run.launch.link_meter import NETWORK_FILE, bytes_per_step
from bench.run.validation import validate
from strategies import registry
from tests.processes import bench


def a_cluster(hosts: int = 6, link: float | None = 100.0) -> Cluster:
    return Cluster("t", tuple(Host(k, f"t-h{k}", f"10.213.0.{k + 1}") for k in range(hosts)), "10.213.0.0/24", link)


def test_the_subnet_overlaps_nothing_the_machine_has():
    first = ipaddress.ip_network(network.CANDIDATE_NETS[0])
    second = ipaddress.ip_network(network.CANDIDATE_NETS[1])
    assert network.choose_subnet([ipaddress.ip_network("192.0.2.0/24")]) == first
    assert network.choose_subnet([ipaddress.ip_network("10.213.0.0/16")]) not in (first, second)
    assert network.choose_subnet([ipaddress.ip_network("10.213.0.5/32")]) == second


def test_the_token_bucket_holds_1_ms_of_traffic_and_one_packet_as_the_link_takes_it():
    slow, fast = network.tbf_args(100), network.tbf_args(10000)
    # 100 Mbit/s: packets of 1 ms (12,500 bytes), the bucket one of them and a frame
    assert network.gso_bytes(100) == 12500
    assert slow[:3] == ["tbf", "rate", "100mbit"] and int(slow[4]) == 12500 + network.MTU_BYTES
    # 10 Gbit/s: the kernel's largest packets, the bucket 1 ms of traffic
    assert network.gso_bytes(10000) == network.GSO_MAX_BYTES and int(fast[4]) == 1_250_000
    assert network.gso_bytes(1) == network.MTU_BYTES


def test_workers_take_the_first_hosts_and_ps_tasks_the_next():
    placement = Placement.for_processes(a_cluster(), {"ps": 2, "worker": 3})
    assert placement.tf_cluster() == {"worker": ["10.213.0.1:2222", "10.213.0.2:2222", "10.213.0.3:2222"],
                                      "ps": ["10.213.0.4:2222", "10.213.0.5:2222"]}
    assert placement.labels() == {0: "worker 0", 1: "worker 1", 2: "worker 2", 3: "ps 0", 4: "ps 1"}
    args = mpirun_host_args(Placement.for_processes(a_cluster(), {"worker": 2}))
    assert args[:2] == ["-H", "10.213.0.1:1,10.213.0.2:1"] and str(AGENT) in args
    assert args[args.index("btl_tcp_if_include") + 1] == "10.213.0.0/24"


@pytest.mark.parametrize("argv", [
    ["10.213.0.2", "echo hi; echo there"],  # mpirun's agent call
    ["-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no", "10.213.0.2",
     "-o", "ConnectTimeout=10", "echo hi; echo there"],  # horovodrun's ssh call
])
def test_the_ssh_stand_in_enters_the_namespace_of_the_address(tmp_path, argv):
    fake_ip = tmp_path / "ip"
    fake_ip.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake_ip.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}",
           "DISTBENCH_NETNS_HOSTS": "10.213.0.1=t-h0 10.213.0.2=t-h1"}
    done = subprocess.run([str(AGENT), *argv], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    args = done.stdout.splitlines()
    assert args[:5] == ["netns", "exec", "t-h1", "unshare", "--uts"] and args[-1] == "echo hi; echo there"
    unknown = subprocess.run([str(AGENT), "10.9.9.9", "true"], capture_output=True, text=True, env=env)
    assert unknown.returncode == 255 and "not a host" in unknown.stderr


def test_each_strategy_declares_its_formula_per_role():
    def traffic(strategy: str, **options) -> dict:
        declared = registry.get(strategy)
        config = validate(RunConfig(strategy=strategy, workers=4 if strategy != "single" else 1, ps=2,
                                    data="synthetic", options=options), declared, registry.all_strategies())
        return declared.traffic(config, Gradient(dense_bytes=1000))

    assert traffic("ps-sync") == traffic("ps-async") == {"worker": (1000, 1000), "ps": (500, 500)}
    assert traffic("allreduce") == traffic("allreduce-tf") == {"worker": (1500, 1500)}
    assert traffic("allreduce", compression="fp16") == {"worker": (750, 750)}
    # top-k: 1% of the entries, each a float32 value and an int32 index, allgathered from 3 others
    assert traffic("allreduce", compression="topk:0.01") == {"worker": (60, 60)}
    assert traffic("ps-sync", compression="topk:0.01") == {"worker": (20, 1000), "ps": (500, 10)}
    assert traffic("ps-async", compression="fp16") == {"worker": (500, 1000), "ps": (500, 250)}
    # parameter averaging every 4 steps: a quarter of the ring allreduce's bytes (weights = gradient)
    assert traffic("local-sgd", sync_period=4) == {"worker": (375, 375)}
    assert traffic("single") == traffic("multi-tower") == {}


def write_run(folder: Path, steps: list[tuple], counters: list[tuple]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    header = "run_id,worker,local_step,global_step,t_start_s,t_end_s,examples,loss\n"
    (folder / "steps.csv").write_text(header + "".join(
        f"r,{w},{ls},{gs},{t0},{t1},8,1.0\n" for w, ls, gs, t0, t1 in steps))
    (folder / NETWORK_FILE).write_text("t_s,host,sent_bytes,received_bytes\n" + "".join(
        f"{t},{h},{s},{r}\n" for t, h, s, r in counters))


def test_bytes_per_step_interpolate_the_counters_over_the_measured_steps(tmp_path):
    # two synchronous workers, one step per second from t=0 (local steps count from 0); warm-up = 2
    # steps; each worker sends 1000 B/s and receives 500 B/s; the ps receives both workers' 1000 B/s
    steps = [(w, k - 1, k, k - 1, k) for k in range(1, 11) for w in (0, 1)]
    counters = [(t / 2, h, int(rate_s * t / 2), int(rate_r * t / 2)) for t in range(0, 23)
                for h, rate_s, rate_r in ((0, 1000, 500), (1, 1000, 500), (2, 1000, 2000))]
    write_run(tmp_path, steps, counters)
    out = bytes_per_step(tmp_path, {0: "worker 0", 1: "worker 1", 2: "ps 0"}, warmup_steps=2, link_mbit=0.008,
                         predicted={"worker": (1000, 500), "ps": (1000, 1000)})
    worker = out["worker 0"]
    assert worker["steps"] == 8 and worker["sent_per_step"] == pytest.approx(1000)
    assert worker["received_per_step"] == pytest.approx(500)
    assert worker["link_utilisation"] == pytest.approx(1000 * 8 / 8000)
    ps = out["ps 0"]
    # ps: per global step, against 2 worker steps per global step
    assert ps["received_per_step"] == pytest.approx(2000) and ps["predicted_received_per_step"] == 2000


def fake_run(root: Path, name: str, strategy: str, ps: int, link: float, rate: float, ps_use: float | None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    per_host = {"worker 0": {"role": "worker 0", "sent_per_step": 1.1e6, "received_per_step": 1.0e6,
                             "predicted_sent_per_step": 1.0e6, "predicted_received_per_step": 1.0e6,
                             "link_utilisation": 0.5}}
    if ps_use is not None:
        per_host["ps 0"] = {"role": "ps 0", "sent_per_step": 4e6, "received_per_step": 4e6,
                            "predicted_sent_per_step": 4e6, "predicted_received_per_step": 4e6,
                            "link_utilisation": ps_use}
    (folder / "run.json").write_text(json.dumps({
        "run_id": name, "status": "ok",
        "config": {"strategy": strategy, "model": "cnn", "data": "synthetic", "workers": 4, "ps": ps,
                   "batch_size": 64, "steps": 100, "options": {}},
        "summary": {"throughput_examples_per_s": rate, "throughput_ci95_examples_per_s": rate / 10},
        "network": {"link_mbit": link, "per_host": per_host}}))


def test_the_report_compares_ps_with_allreduce_per_link(tmp_path):
    from bench.analysis.report.build import write_report

    for link, ps_rate, ar_rate in ((100, 120, 480), (10000, 2000, 1500)):
        fake_run(tmp_path, f"ps-{link}", "ps-sync", 1, link, ps_rate, 0.9)
        fake_run(tmp_path, f"ar-{link}", "allreduce-tf", 0, link, ar_rate, None)
    html = write_report([tmp_path], tmp_path / "out").read_text()
    assert 'id="network"' in html and 'id="throughput"' not in html  # no one-machine plots of these runs
    verdict = html[html.index('id="network-verdict-table"'):]
    verdict = verdict[:verdict.index("</table>")]
    assert 'data-col="ps_over_allreduce" data-value="0.25"' in verdict
    assert 'data-col="ps_over_allreduce" data-value="1.3333333333333333"' in verdict
    assert 'data-col="best_ps" data-value="ps-sync R=N 1 ps"' in verdict
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert sorted(summary["link_mbit"]) == [100, 100, 10000, 10000]
    assert set(summary["net_ps_link_utilisation"].dropna()) == {0.9}


def test_the_network_headline_says_where_parameter_servers_win():
    import pandas as pd

    from bench.analysis.report.network import headline, verdicts

    def setting(model, link, variant, family, rate, ci):
        return {"model": model, "link_mbit": link, "variant": variant, "family": family,
                "throughput_examples_per_s": rate, "throughput_ci95_examples_per_s": ci}

    table_ = pd.DataFrame([
        setting("cnn", 100.0, "ps-sync R=N 2 ps", "parameter-server", 216, 20),
        setting("cnn", 100.0, "allreduce (gloo)", "allreduce", 392, 33),
        setting("embedding", 100.0, "ps-async 1 ps", "parameter-server", 10255, 1769),
        setting("embedding", 100.0, "allreduce (gloo)", "allreduce", 9704, 1066),
        setting("embedding", 100.0, "allreduce (dense)", "allreduce", 34, 3),
        setting("embedding", 1000.0, "ps-async 1 ps", "parameter-server", 16583, 500),
        setting("embedding", 1000.0, "allreduce (gloo)", "allreduce", 13887, 500)])
    verdict = verdicts(table_)
    assert list(verdict["tie"]) == [False, True, False]
    assert headline(verdict) == (
        "cnn: 100 Mbit/s allreduce (ps / allreduce 0.55: ps-sync R=N 2 ps vs allreduce (gloo)). "
        "embedding: 100 Mbit/s tie (ps / allreduce 1.06: ps-async 1 ps vs allreduce (gloo)); "
        "1000 Mbit/s parameter servers (ps / allreduce 1.19: ps-async 1 ps vs allreduce (gloo)).")


def test_a_cluster_held_by_one_preset_is_refused_to_another_and_to_cluster_down():
    name = f"claimtest{os.getpid()}"
    held = claim(name)
    try:
        with pytest.raises(UsageError, match=f"in use by another preset \\(pid {os.getpid()}\\)"):
            claim(name)
        done = bench("cluster", "down", "--name", name)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "in use" in done.stderr, done.stderr
    finally:
        release(held)
    release(claim(name))  # free again once released
    lock_path(name).unlink()  # a name of this test's own: leave no file behind


def test_the_network_preset_on_budgeted_hosts_runs_each_model_on_one_host_before_among_and_after(
        monkeypatch, tmp_path):
    from contextlib import contextmanager

    from bench.drivers.presets import network as preset

    made, caps, started = [], [], []

    @contextmanager
    def held(name, hosts, link_mbit, budget_cores=None):
        made.append((name, hosts, link_mbit, budget_cores))
        yield type("Held", (), {"cap": lambda self, link: caps.append(link)})()

    def run_all(name, runs, output, timeout_s, before, command, refused):
        for i, (_, argv) in enumerate(runs):
            before(i)
            started.append([*command, *argv])
        return 0

    monkeypatch.setattr(preset, "cluster_with_slurm", held)
    monkeypatch.setattr(preset, "nodes_not_seeing", lambda *a: [])
    monkeypatch.setattr(preset, "run_all", run_all)
    monkeypatch.setattr(preset.cpu_budget, "check", lambda hosts, cores: None)
    assert preset.main(["--workers", "2", "--models", "cnn,embedding", "--links", "100,1000", "--variants",
                        "allreduce-gloo", "--host-cores", "0.5", "--output", str(tmp_path)]) == 0
    assert made == [(preset.CLUSTER, 4, 100.0, 0.5)]
    # each model's 1-worker run, whole on one host (a job step: srun -N 1) on no link, three times:
    # before the link runs, among them and after them; the link runs are Slurm jobs of every host
    assert [argv[0] for argv in started] == ["srun"] * 2 + ["salloc"] * 2 + ["srun"] * 2 + ["salloc"] * 2 \
        + ["srun"] * 2
    alone = [argv for argv in started if argv[0] == "srun"]
    assert all(argv[:5] == ["srun", "--quiet", "-N", "1", "-n"] and "--emulated-cluster" not in argv
               and argv[argv.index("--strategy") + 1] == "single" for argv in alone)
    assert [argv[argv.index("--model") + 1] for argv in alone] == ["cnn", "embedding"] * 3
    assert len({argv[argv.index("--run-name") + 1] for argv in alone}) == 6
    assert caps == [100.0, 100.0, 1000.0, 1000.0]
    started.clear()
    assert preset.main(["--workers", "2", "--models", "cnn", "--links", "100", "--variants", "allreduce-gloo",
                        "--host-cores", "0.5", "--one-host-repeats", "1", "--output", str(tmp_path)]) == 0
    assert [argv[0] for argv in started] == ["srun", "salloc"]


def test_repeats_are_spread_over_the_runs_and_none_is_lost_when_there_are_more_repeats_than_runs():
    from bench.drivers.presets.network import interleaved

    assert interleaved(["a", "b", "c", "d"], [["r1"], ["r2"], ["r3"]]) == [
        (True, "r1"), (False, "a"), (False, "b"), (True, "r2"), (False, "c"), (False, "d"), (True, "r3")]
    assert interleaved(["a"], [["r1", "s1"], ["r2", "s2"], ["r3", "s3"]]) == [
        (True, "r1"), (True, "s1"), (True, "r2"), (True, "s2"), (False, "a"), (True, "r3"), (True, "s3")]
    assert interleaved(["a", "b"], [["r1"]]) == [(True, "r1"), (False, "a"), (False, "b")]


def test_a_budget_the_preset_s_hosts_cannot_all_have_is_refused_in_one_line(capsys):
    from bench.drivers.presets import network as preset

    assert preset.main(["--workers", "2", "--host-cores", "1000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--host-cores" in err, err


def test_repeated_link_runs_come_in_rounds_each_named_for_its_round():
    from bench.drivers.presets.network import in_rounds

    runs = [(100.0, "a", ["--run-name", "n-a", "--x"]), (1000.0, "b", ["--run-name", "n-b"])]
    assert in_rounds(runs, 1) == runs
    rounds = in_rounds(runs, 2)
    assert [(link, label) for link, label, _ in rounds] == [
        (100.0, "a (1 of 2)"), (1000.0, "b (1 of 2)"), (100.0, "a (2 of 2)"), (1000.0, "b (2 of 2)")]
    assert rounds[2][2] == ["--run-name", "n-a-r2", "--x"]


def test_hosts_may_each_have_a_budget_of_their_own_within_the_machines_cores(monkeypatch):
    from bench.infra.emulated import cpu_budget, network
    from bench.infra.emulated.cli import parser as cluster_parser

    monkeypatch.setattr(cpu_budget, "machine_cores", lambda: 2)
    assert cpu_budget.each(3, 0.5) == [0.5, 0.5, 0.5] and cpu_budget.each(3, (0.9, 0.1, 1)) == [0.9, 0.1, 1.0]
    for cores, message in (((0.9, 0.5, 1), "0.9 + 0.5 + 1 cores is more than this machine's 2"),
                           ((0.5, 0.5), "one per host (3), got 2"), ((0.05, 0.5, 0.5), "must be at least 0.1")):
        with pytest.raises(UsageError, match=re.escape(message)):
            cpu_budget.check(3, cores)
    args = cluster_parser().parse_args(["up", "--hosts", "3", "--link-mbit", "1000", "--host-cores", "0.9,0.1,1"])
    assert args.host_cores == (0.9, 0.1, 1.0)
    one = cluster_parser().parse_args(["up", "--hosts", "3", "--link-mbit", "1", "--host-cores", "0.5"])
    assert one.host_cores == 0.5
    hosts = tuple(network.Host(k, f"t-h{k}", f"10.0.0.{k + 1}") for k in range(3))
    bare = network.Cluster("t", hosts, "10.0.0.0/24", 1000.0)
    alike, differ = network.with_budgets(bare, [0.5] * 3), network.with_budgets(bare, [0.9, 0.1, 1.0])
    assert (alike.budget_cores, alike.budgets_differ) == (0.5, False)
    assert (differ.budget_cores, differ.cores_by_host, differ.budgets_differ) == (None, (0.9, 0.1, 1.0), True)
    assert network.with_budgets(bare, [None] * 3).budget_cores is None
