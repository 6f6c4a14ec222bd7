"""The check of ps tasks under concurrency (`python -m bench profile --ps-layout W:P`): what the
parameter-server model predicts tasks serve on hosts as placed, from a profile made elsewhere, and
the measurement it is checked against. Across emulated hosts: docs/projection-checks.md."""

from __future__ import annotations

import json
import math
import os

import pytest

from bench.analysis.projection import profile, ps_round
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.parameter_servers import Layout
from bench.drivers.profile.layout_check import RESULT_FILE
from tests.processes import bench

MIB = 2**20


def a_profile(rate: float = 100e6, curve: tuple[tuple[float, float], ...] = ((1, 100e6), (2, 150e6), (4, 180e6))):
    """The shipped loopback profile with its gRPC task's rate and curve as given (as a 2-host profile
    measures them: every worker on one host, the task on the other), no cost per message."""
    data = json.loads(profile.SHIPPED.joinpath(f"{profile.DEFAULT}.json").read_text())
    grpc = data["constants"]["grpc.process_bytes_per_s"]
    grpc.update(value=curve[-1][1], low=curve[-1][1], high=curve[-1][1], by_workers=[list(p) for p in curve])
    grpc.pop("samples", None)
    data["constants"]["grpc.message_s"].update(value=0.0, low=0.0, high=0.0)
    data["constants"]["grpc.message_s"].pop("samples", None)
    return profile.parse(data, "test")


def test_at_the_profiles_own_placement_the_model_gives_back_the_curve_it_was_measured_as():
    measured = a_profile()
    for workers, rate in ((1, 100e6), (2, 150e6), (4, 180e6)):
        found = ps_round.served(measured, (0,) * workers, (1,), link_gbit=100.0, nbytes=4 * MIB // workers)
        assert found["bytes_per_s"] == pytest.approx(rate, rel=0.01)
        assert found["low"] <= found["bytes_per_s"] <= found["high"]


def test_two_tasks_each_serving_every_worker_serve_twice_what_one_does_while_neither_link_binds():
    measured = a_profile()
    one = ps_round.served(measured, (0, 1, 2, 0), (1,), link_gbit=100.0, nbytes=MIB)
    two = ps_round.served(measured, (0, 1, 2, 0), (1, 2), link_gbit=100.0, nbytes=MIB)
    assert one["bytes_per_s"] == pytest.approx(180e6, rel=0.01)
    assert two["bytes_per_s"] == pytest.approx(2 * 180e6, rel=0.01)


def test_on_a_slow_link_a_task_beside_a_worker_serves_that_workers_bytes_off_the_link():
    measured = a_profile()
    link_gbit = 0.4  # 50 MB/s each way: below the task's own rate with 2 workers (150 MB/s)
    apart = ps_round.served(measured, (0, 1), (2,), link_gbit, MIB)
    beside = ps_round.served(measured, (0, 1), (1,), link_gbit, MIB)
    assert apart["bytes_per_s"] < 2 * 50e6 * 1.01  # both workers' bytes cross the task's link, both ways at once
    # one worker's bytes stay on its host: the task's own rate with 2 workers binds, not the link
    assert beside["bytes_per_s"] == pytest.approx(150e6, rel=0.03)
    assert beside["bytes_per_s"] > 1.4 * apart["bytes_per_s"]


def test_a_layout_placed_host_by_host_counts_each_hosts_workers_and_tasks():
    cluster = Cluster(4, 2, 1.0, 1e12, 1, float("inf"))
    placed = Layout(cluster, 2, True, False, on=((0, 1, 2, 0), (1, 2)))
    assert placed.hosts == 3 and placed.pushers == 4
    assert [placed.pushers_on(h) for h in range(3)] == [2, 1, 1]
    assert [placed.host_of(k) for k in range(2)] == [1, 2]
    assert [placed.remote_pushers(k) for k in range(2)] == [3, 3]
    aggregated = Layout(cluster, 2, True, True, on=((0, 1, 2, 0), (1, 2)))
    assert aggregated.pushers == 3


@pytest.mark.parametrize("argv, message", [
    (["--ps-layout", "0:1", "--against", "loopback-2026", "--link-gbit", "1"], "--ps-layout 0:1: give WORKERS:PS"),
    (["--ps-layout", "2:1"], "--ps-layout needs --against PROFILE"),
    (["--ps-layout", "2:1", "--against", "no-such", "--link-gbit", "1"], "--profile no-such: no such file"),
    (["--ps-layout", "2:1", "--against", "loopback-2026", "--link-gbit", "1", "--level", "1.5"],
     "--level: a probability from 0.5"),
])
def test_a_layout_check_without_what_predicts_it_is_refused_in_one_line(argv, message):
    done = bench("profile", *argv)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_layout_check_over_loopback_measures_every_repetition_and_says_whether_each_is_inside(tmp_path):
    done = bench("profile", "--ps-layout", "2:2", "--against", "loopback-2026", "--link-gbit", "10",
                 "--repeats", "3", "--rounds", "3", "--bytes", str(2 * MIB), "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(next(tmp_path.glob(f"profile-*/{RESULT_FILE}")).read_text())
    assert result["layout"] == {"workers": 2, "ps": 2, "worker_nodes": ["localhost"] * 2, "ps_nodes": ["localhost"] * 2}
    assert len(result["measured_bytes_per_s"]) == 3 and all(m > 0 for m in result["measured_bytes_per_s"])
    predicted = result["predicted"]
    assert predicted["low"] <= predicted["bytes_per_s"] <= predicted["high"] and predicted["level"] == 0.9
    assert result["inside"] == [predicted["low"] <= m <= predicted["high"] for m in result["measured_bytes_per_s"]]
    assert "inside" in done.stdout
    # the hosts' cores as the ps task found them, read into the prediction (this machine's, here)
    assert result["host_cores"] == min(len(os.sched_getaffinity(0)), result["host_cores"]) > 0


def test_a_check_on_hosts_of_fewer_cores_than_the_profiles_is_predicted_on_those_cores():
    measured = a_profile()  # its host: 2 cores; its task served at most 4 workers at once
    two = ps_round.served(measured, (0, 1), (2,), link_gbit=100.0, nbytes=MIB)
    assert ps_round.served(measured, (0, 1), (2,), link_gbit=100.0, nbytes=MIB, cores_per_host=2.0) == two
    half = ps_round.served(measured, (0, 1), (2,), link_gbit=100.0, nbytes=MIB, cores_per_host=1.0)
    # 2 streams on 1 core where the profile's used 2: one doubling fewer, at the unmeasured gain's point
    assert half["bytes_per_s"] == pytest.approx(two["bytes_per_s"] / 2 ** 0.5, rel=0.02)


def test_asynchronous_updates_are_capped_by_the_busiest_host_link_both_ways_at_once():
    from bench.analysis.projection import parameter_servers
    from bench.analysis.projection.transports import Transport

    no_process_limit = Transport("grpc", 1.0, None, True, "test")
    b = 1e6  # one pusher's bytes each way per update, half to each task
    tensors = ps_round.round_tensors(int(b), 2)
    cluster = Cluster(4, 2, 8.0, 1e12, 1, float("inf"))  # 1e9 B/s each way
    # both tasks on host 1 beside its 2 workers: host 0's 2 workers push b each to it, and read b each back,
    # over one link: a round of the 4 updates takes 2b / 1e9 s each way, whatever the tasks' own links
    both = Layout(cluster, 2, True, False, on=((0, 0, 1, 1), (1, 1)))
    rate, _ = parameter_servers.asynchronous_rate(tensors, both, "round-robin", no_process_limit)
    assert rate == pytest.approx(4 / (2 * b / 1e9), rel=0.01)
    # one task on each host: each link carries its 2 workers' halves to the other host's task (b) and its
    # own task's halves to the other host's 2 workers (b) each way, 2b in all: the same cap, where a bound
    # per task (its remote pushers' halves alone, b) would give twice the rate
    spread = Layout(cluster, 2, True, False, on=((0, 0, 1, 1), (0, 1)))
    rate, _ = parameter_servers.asynchronous_rate(tensors, spread, "round-robin", no_process_limit)
    assert rate == pytest.approx(4 / (2 * b / 1e9), rel=0.01)


def test_a_checks_model_error_comes_from_the_earlier_checks_predicted_again_and_never_its_own(tmp_path):
    from bench.drivers.profile.layout_check import earlier_checks, predicted

    shipped = str(profile.SHIPPED / f"{profile.DEFAULT}.json")
    checks = {"a": (shipped, [1.0e8, 1.2e8, 1.1e8]), "b": (shipped, [3.0e8]), "gone": ("/no/such.json", [1e8])}
    for name, (source, measured) in checks.items():
        (tmp_path / f"profile-{name}").mkdir()
        result = {"layout": {"workers": 2, "ps": 1, "worker_nodes": ["h0", "h1"], "ps_nodes": ["h2"]},
                  "link_gbit": 1.0, "bytes_per_worker": MIB, "predicted": {"from": source, "bytes_per_s": 1.0},
                  "measured_bytes_per_s": measured}
        (tmp_path / f"profile-{name}" / RESULT_FILE).write_text(json.dumps(result))
    found, files = earlier_checks(tmp_path, 0.9)
    assert [f.split("/")[-2] for f in files] == ["profile-a", "profile-b"]  # one whose profile is gone: left out
    again = predicted(json.loads((tmp_path / "profile-a" / RESULT_FILE).read_text()), 0.9)
    assert found[0] == (1.1e8, again["bytes_per_s"], again["u_log"])  # the median, against the model as it is now
    model = ps_round.checked_error(found)
    residuals = [math.log(m / p) for m, p, _ in found]
    assert model.u == pytest.approx(math.sqrt(max(0.0, sum(r * r for r in residuals) / 2
                                                  - sum(u * u for _, _, u in found) / 2)))
    with_error = ps_round.served(profile.load(shipped), (0, 1), (2,), 1.0, MIB, model=model)
    assert with_error["high"] / with_error["bytes_per_s"] > again["high"] / again["bytes_per_s"]
