"""Hosts described by their cores: a ps task's rate on a host of more (or fewer) cores than its
profile's, the profile's measurement of it (the ps task held to 1 core), the extrapolation
beyond what was measured, and `python -m bench project --host-cores N`."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest

from bench.analysis.projection import cores, intervals, profile
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.parameter_servers import ROUND_ROBIN
from bench.analysis.projection.profile import CORES_GAIN, LEAST_CORES, PROFILED_HOST_CORES
from bench.analysis.projection.schemes import PS_ASYNC, PsSetup
from bench.analysis.projection.transports import Transport
from bench.drivers.profile import fold
from bench.drivers.profile.ps_rate import CORES_ENV, HOST_FILE
from bench.errors import UsageError
from bench.run.contract import GRPC
from bench.run.models.tensors import ModelTensors, Tensor
from tests.processes import bench

PS = Transport("ps", 1.0, 1e9, True, "test", cores_measured=2.0, cores_gain=2 ** 0.5)


def test_a_ps_tasks_streams_use_as_many_cores_as_there_are_streams_up_to_the_hosts():
    assert PS.cores_share(16, None) == 1.0  # no cores given: the profile's host
    assert PS.cores_share(16, 2.0) == 1.0
    # 16 streams on 8 cores use 8, where the profile's host gave them 2: two doublings
    assert PS.cores_share(16, 8.0) == pytest.approx(2.0)
    assert PS.cores_share(4, 8.0) == pytest.approx(2 ** 0.5)  # 4 streams use 4 cores, not 8
    assert PS.cores_share(1, 8.0) == 1.0  # one stream uses one core on any host
    assert PS.cores_share(4, 0.5) == pytest.approx(0.5)  # half a core where the profile had 2
    assert PS.message_rate(1e6, 16, cores_per_host=8.0) == pytest.approx(2e9)
    # a profile that does not say its host's cores: the rate as measured
    assert dataclasses.replace(PS, cores_measured=None).cores_share(16, 8.0) == 1.0


def test_cores_outside_those_the_gain_was_measured_between_are_an_extrapolation():
    measured = dataclasses.replace(PS, least_cores_measured=1.0)
    assert measured.cores_extrapolated(8, 2.0) == 1.0
    assert measured.cores_extrapolated(8, 1.0) == 1.0  # measured at 1 core
    assert measured.cores_extrapolated(8, 8.0) == pytest.approx(4.0)
    assert measured.cores_extrapolated(8, 0.5) == pytest.approx(2.0)
    assert PS.cores_extrapolated(8, 1.0) == pytest.approx(2.0)  # not measured


def _with_host(cores: float | None, gain: dict | None = None) -> profile.Profile:
    data = json.loads((profile.SHIPPED / f"{profile.DEFAULT}.json").read_text())
    data["constants"].pop(PROFILED_HOST_CORES)
    if cores is not None:
        data["constants"][PROFILED_HOST_CORES] = {"value": cores, "low": cores, "high": cores, "unit": "cores",
                                         "measures": "x", "software": "x", "source": "test"}
    if gain is not None:
        data["constants"][CORES_GAIN] = gain
        data["constants"][LEAST_CORES] = {"value": 1.0, "low": 1.0, "high": 1.0, "unit": "cores",
                                          "measures": "x", "software": "x", "source": "test"}
    return profile.parse(data, "test")


def test_a_profile_that_says_its_hosts_cores_carries_a_gain_measured_or_the_range_it_may_take():
    assert CORES_GAIN not in _with_host(None).constants  # nothing to carry it to
    unmeasured = _with_host(2.0).constants[CORES_GAIN]
    assert (unmeasured.low, unmeasured.high) == (1.0, 2.0) and unmeasured.value == pytest.approx(2 ** 0.5)
    assert "not measured" in unmeasured.source
    documented = profile.load("tf1-2017")
    assert documented.get(PROFILED_HOST_CORES) == 16 and documented.get(CORES_GAIN) == 1.0
    assert "#6116" in documented.constants[CORES_GAIN].source
    ps = documented.transports()[GRPC]
    assert (ps.cores_measured, ps.cores_gain, ps.least_cores_measured) == (16.0, 1.0, None)


TENSORS = ModelTensors("test", tuple(Tensor(f"t{i}", 2_000_000, i / 7) for i in range(8)), 1.0)


def _interval(used: profile.Profile, cores_per_host: float | None) -> intervals.Interval:
    cluster = Cluster(16, 1, 100, 2000, 32, 1e10, cores_per_host=cores_per_host)
    return intervals.interval(PS_ASYNC, GRPC, TENSORS, cluster, PsSetup(1, False, ROUND_ROBIN), used)


def test_beyond_the_measured_cores_the_interval_takes_the_gains_whole_range_and_names_it():
    gain = {"value": 1.3, "low": 1.25, "high": 1.35, "samples": [1.28, 1.3, 1.32], "unit": "x",
            "measures": "x", "software": "x", "source": "measured: test"}
    used = _with_host(2.0, gain)
    within, beyond = _interval(used, 2.0), _interval(used, 16.0)
    # 16 streams on 16 cores: three doublings of the task's rate, less what else binds the step
    assert within.point * 1.3 < beyond.point <= within.point * 1.3 ** 3 * 1.0001
    assert beyond.high / beyond.low > within.high / within.low * 1.4
    assert beyond.spread.widest == CORES_GAIN
    # an unmeasured gain is the whole range already, whatever the cores: not renamed
    unmeasured = {p.name: p.u for p in _interval(_with_host(2.0), 16.0).parts}
    assert CORES_GAIN in unmeasured and unmeasured[CORES_GAIN] > 0


def test_decide_takes_the_profiles_cores_or_the_given_ones_and_refuses_what_it_cannot_carry_over():
    gain = {"value": 1.3, "low": 1.25, "high": 1.35, "samples": [1.28, 1.3, 1.32], "unit": "x",
            "measures": "x", "software": "x", "source": "measured: test"}
    used = _with_host(2.0, gain)
    assumed = cores.decide(None, used)
    assert (assumed.cores, assumed.given) == (2.0, False)
    # the figures of hosts of the profile's own cores are those of the rate as measured
    assert _interval(used, assumed.cores).bounds == _interval(used, None).bounds
    given = cores.decide(16.0, used)
    assert (given.cores, given.profile_cores, given.given) == (16.0, 2.0, True)
    assert _interval(used, given.cores).point > _interval(used, assumed.cores).point
    assert cores.decide(None, _with_host(None)).cores is None
    for bad, message in ((0.0, "must be > 0"), (8.0, "does not say the cores")):
        with pytest.raises(UsageError, match=message):
            cores.decide(bad, used if bad == 0.0 else _with_host(None))


def test_a_profile_records_its_ps_hosts_cores_and_the_gain_held_to_one_core(tmp_path):
    (tmp_path / HOST_FILE).write_text(json.dumps({"cores": 4.0, "cpu": "Xeon"}))
    assert fold.host(tmp_path) == {"cores": 4.0, "cpu": "Xeon"}
    gained = fold.cores_gain({fold.RATE: 3e9}, {fold.RATE: 1e9}, 4.0)
    assert gained == {CORES_GAIN: pytest.approx(3 ** 0.5), LEAST_CORES: 1.0}  # 3x over two doublings
    assert fold.cores_gain({fold.RATE: 3e9}, {fold.RATE: 1e9}, 1.0) == {}
    rounds = [{PROFILED_HOST_CORES: 4.0, **gained}, {PROFILED_HOST_CORES: 4.0, CORES_GAIN: 1.8, LEAST_CORES: 1.0},
              {PROFILED_HOST_CORES: 4.0, CORES_GAIN: 1.6, LEAST_CORES: 1.0}]
    folded = fold.fold(rounds, "test", "test", "test", 2**20)["constants"]
    assert folded[PROFILED_HOST_CORES]["value"] == 4.0
    assert folded[CORES_GAIN]["samples"] == [r[CORES_GAIN] for r in rounds]
    # a host's own facts are never carried over from the shipped profile
    assert PROFILED_HOST_CORES not in fold.fold([{"latency_s": 1e-4}], "test", "test", "test", 2**20)["constants"]


def test_a_ps_task_holds_itself_to_the_cores_it_is_given_before_tensorflow_starts(tmp_path):
    code = ("import os, sys; from bench.drivers.profile import ps_rate; "
            "c = ps_rate.cores_given(); ps_rate.hold(int(os.environ['" + CORES_ENV + "'])); "
            "print(c, len(os.sched_getaffinity(0)))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, CORES_ENV: "1"}, capture_output=True,
                          text=True, check=True)
    host, held = done.stdout.split()
    assert float(host) == min(len(os.sched_getaffinity(0)), float(host)) and int(held) == 1


def test_project_says_whose_cores_it_used_and_refuses_cores_a_profile_cannot_carry(tmp_path):
    base = ["project", "--model", "vgg16", "--device-examples-per-s", "130.9", "--batch-size", "64", "--workers", "8",
            "--link-gbit", "10", "--json"]
    assumed = json.loads(bench(*base).stdout)["cluster"]["host_cores"]
    assert assumed["cores"] == 2 and not assumed["given"] and "assumed" in assumed["said"]
    given = json.loads(bench(*base, "--host-cores", "16").stdout)
    assert given["cluster"]["host_cores"]["given"] and given["cluster"]["host_cores"]["cores"] == 16
    assert all("widest_term" in row for row in given["projection"])
    data = json.loads((profile.SHIPPED / f"{profile.DEFAULT}.json").read_text())
    data["constants"].pop(PROFILED_HOST_CORES)
    (tmp_path / "old.json").write_text(json.dumps(data))
    for flags, message in ((["--host-cores", "0"], "must be > 0"),
                           (["--host-cores", "8", "--profile", str(tmp_path / "old.json")], "does not say the cores")):
        done = bench(*base, *flags)
        assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_more_cores_never_slow_a_ps_task_and_fewer_never_speed_it():
    used = profile.load(profile.DEFAULT)
    rates = [_interval(used, cores).point for cores in (0.5, 1.0, 2.0, 4.0, 16.0)]
    assert rates == sorted(rates) and rates[0] < rates[2] < rates[-1]
    assert math.isclose(_interval(used, None).point, _interval(used, 2.0).point)


def test_the_cores_project_says_it_assumed_are_those_its_figures_use(capsys):
    """Through the command itself: what it records of the hosts' cores, and the figures it gives with them."""
    from bench.cli import main

    def projected(*flags: str) -> tuple[dict, dict[str, float]]:
        # fast devices, 16 workers on one ps task: the task's rate binds, and with it the host's cores
        assert main(["project", "--profile", "loopback-2026", "--model", "mlp", "--device-examples-per-s", "50000",
                     "--batch-size", "32", "--workers", "16", "--link-gbit", "100", "--ps", "1", "--json",
                     *flags]) == 0
        result = json.loads(capsys.readouterr().out)
        figures = {f"{r['scheme']} {r['transport']} {r['ps']}": r["throughput_examples_per_s"]
                   for r in result["projection"]}
        return result["cluster"]["host_cores"], figures

    own_cores = profile.load("loopback-2026").get(PROFILED_HOST_CORES)
    assumed, as_measured = projected()
    given, on_more = projected("--host-cores", str(4 * own_cores))
    stated, on_own = projected("--host-cores", str(own_cores))
    assert (assumed["cores"], assumed["given"]) == (own_cores, False)
    assert (given["cores"], given["given"]) == (4 * own_cores, True)
    assert on_own == as_measured  # the profile's own cores, said or assumed, are the figures as measured
    faster = [k for k in as_measured if on_more[k] > as_measured[k] * 1.0001]
    assert faster and all(" grpc " in k for k in faster)  # more cores speed the ps tasks (gRPC) only
    assert stated["cores"] == own_cores
