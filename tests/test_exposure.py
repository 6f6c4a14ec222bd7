"""The communication the compute did not hide, tensor by tensor (bench.metrics.exposed_by_tensor),
read from Horovod's timeline and summarized per run, on records written here."""

import json

import pandas as pd
import pytest

from bench.analysis.report.why import sentence
from bench.analysis.runs.exposure import exposure_columns
from bench.metrics import exposed_by_tensor
from bench.run.process import exposure, tracing
from strategies.workers.horovod_trace import tensor_phases, traced_steps
from tests.processes import bench, run_record
from tests.time_split import assert_time_split


def test_each_moment_after_the_compute_is_charged_to_the_tensors_in_flight_by_their_bytes():
    # compute ends at 10; a ends at 8 (hidden); b runs 9-12; c and d run 11-15 (d 3x c's bytes)
    charged = exposed_by_tensor({"a": 8.0, "b": 12.0, "c": 15.0, "d": 15.0}, 10.0,
                                {"a": 1, "b": 1, "c": 1, "d": 3}, {"a": 5.0, "b": 9.0, "c": 11.0, "d": 11.0})
    # 10-11: b alone; 11-12: b, c, d by bytes (1:1:3); 12-15: c and d (1:3)
    assert charged == pytest.approx({"a": 0.0, "b": 1.2, "c": 0.95, "d": 2.85})
    assert sum(charged.values()) == pytest.approx(15.0 - 10.0)  # the part's exposed time, all of it


def test_a_moment_with_nothing_in_flight_goes_to_the_tensor_that_ends_next():
    # a runs 10-11; nothing runs 11-13 (a queue, a wake-up); b runs 13-14
    charged = exposed_by_tensor({"a": 11.0, "b": 14.0}, 10.0, start_s={"a": 10.0, "b": 13.0})
    assert charged == pytest.approx({"a": 1.0, "b": 3.0})


def test_nothing_is_exposed_when_every_exchange_ends_before_the_compute():
    assert sum(exposed_by_tensor({"a": 1.0, "b": 2.0}, 5.0).values()) == 0


def timeline(start_us, steps):
    """A Horovod timeline as rank 0 writes it: per step, per tensor (name, ready us, done us, shape)."""
    events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": start_us}}]
    pids = {}
    for step in steps:
        for name, ready, done, shape in step:
            pid = pids.setdefault(name, len(pids) + 1)
            if pid == len(pids) and not any(e.get("pid") == pid for e in events):
                events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
            events += [{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": ready - 5, "pid": pid},
                       {"ph": "E", "ts": ready, "pid": pid},
                       {"ph": "B", "name": "ALLREDUCE", "ts": ready + 1, "pid": pid},
                       {"ph": "B", "name": "MPI_ALLREDUCE", "ts": ready + 2, "pid": pid},
                       {"ph": "E", "ts": done - 1, "pid": pid},
                       {"ph": "E", "ts": done, "pid": pid, "args": {"dtype": "float32", "shape": shape}}]
    return events


def test_horovods_timeline_gives_each_steps_tensors_from_the_last_ranks_readiness():
    start = 1_000_000_000_000_000  # epoch microseconds
    events = timeline(start, [[("w", 100, 900, "[10, 10]"), ("b", 500, 700, "[10]")],
                              [("w", 2100, 2500, "[10, 10]"), ("b", 2300, 2400, "[10]")]])
    phases = tensor_phases(events)
    assert {p["name"] for p in phases} == {"w", "b"} and len(phases) == 4
    assert phases[0]["bytes"] == 400.0
    spans = {7: ((start + 0) / 1e6, (start + 1000) / 1e6), 8: ((start + 2000) / 1e6, (start + 3000) / 1e6)}
    steps = traced_steps(phases, spans)
    assert [s["local_step"] for s in steps] == [7, 8]
    first = steps[0]["phases"][0]
    assert first["after_s"] == pytest.approx((start + 500) / 1e6) and first["collective"]  # b, the last negotiated
    tensors = {t["name"]: t for t in first["tensors"]}
    assert tensors["w"]["start_s"] == pytest.approx((start + 100) / 1e6)
    charged = exposed_by_tensor({n: t["done_s"] for n, t in tensors.items()}, first["after_s"],
                                {n: t["bytes"] for n, t in tensors.items()},
                                {n: t["start_s"] for n, t in tensors.items()})
    # 500-700 us: w (400 B) and b (40 B) in flight; 700-900 us: w alone (epoch seconds: 0.1 us apart)
    assert charged == pytest.approx({"w": 200e-6 * 400 / 440 + 200e-6, "b": 200e-6 * 40 / 440}, abs=1e-6)


def test_a_step_missing_a_tensor_is_not_traced():
    start = 1_000_000_000_000_000
    phases = tensor_phases(timeline(start, [[("w", 100, 900, "[4]"), ("b", 500, 700, "[1]")],
                                            [("w", 2100, 2500, "[4]")]]))
    spans = {1: (start / 1e6, (start + 1000) / 1e6), 2: ((start + 2000) / 1e6, (start + 3000) / 1e6)}
    assert [s["local_step"] for s in traced_steps(phases, spans)] == [1]


def ps_step(local_step, t0):
    """A ps worker's traced step: fc_b pulled first, fc_w asked for 10 ms in; fc_b's push hidden."""
    pull = tracing.phase("pull", t0, [
        {"name": "fc_w", "bytes": 4e6, "start_s": t0 + 0.010, "done_s": t0 + 0.030, "ps_task": 0},
        {"name": "fc_b", "bytes": 40, "start_s": t0, "done_s": t0 + 0.002, "ps_task": 1}])
    push = tracing.phase("push", t0 + 0.100, [
        {"name": "fc_w", "bytes": 4e6, "start_s": t0 + 0.095, "done_s": t0 + 0.120, "ps_task": 0},
        {"name": "fc_b", "bytes": 40, "start_s": t0 + 0.085, "done_s": t0 + 0.090, "ps_task": 1}])
    return {"local_step": local_step, "phases": [pull, push]}


def test_a_runs_exposure_sums_its_tensors_beside_the_split_of_the_same_steps(tmp_path):
    tracing.write(tmp_path, 0, [ps_step(7, 100.0), ps_step(8, 101.0)], "a test")
    parts = pd.DataFrame({"worker": [0, 0, 0], "local_step": [7, 8, 12], "step_s": [0.2, 0.2, 0.3],
                          "compute_s": [0.1, 0.1, 0.1], "communication_s": [0.05, 0.05, 0.9],
                          "waiting_s": [0.0, 0.0, 0.0], "other_s": [0.05, 0.05, 0.0]})
    out = exposure.summarize(tmp_path, parts, {"traces_exchange": True}, {})
    assert out["traced"] and out["traced_steps"] == {"0": [7, 8]}
    # pull: fc_b's 2 ms, then 8 ms with nothing in flight (to fc_w, next to end) and fc_w's 20; push: fc_w's 20
    assert out["exposed_communication_s"] == pytest.approx(0.050)
    assert out["split_communication_s"] == pytest.approx(0.05)  # steps 7 and 8 only
    top = out["tensors"][0]
    assert (top["name"], top["phase"], top["exposed_s"]) == ("fc_w", "pull", pytest.approx(0.028))
    assert out["exposed_by_ps_task_s"] == pytest.approx({"0": 0.048, "1": 0.002})
    columns = exposure_columns({"exposure": out})
    assert columns["exposed_tensors"].startswith("fc_w pull 3.81 MiB +28.0 ms; fc_w push 3.81 MiB +20.0 ms")
    assert columns["exposed_ps_task"] == "task 0: 96 %"


def test_a_strategy_that_traces_nothing_says_why(tmp_path):
    facts = {"traces_exchange": False, "exchange_trace": "one collective"}
    out = exposure.summarize(tmp_path, pd.DataFrame(), facts, {})
    assert out == {"traced": False, "why": "one collective"}
    assert exposure_columns({"exposure": out})["exposed_tensors"] is None


def test_the_why_sentence_names_the_tensors_when_communication_is_the_largest_part():
    row = pd.Series({"model": "cnn", "workers": 4, "link_mbit": 100.0, "variant": "ps-sync",
                     "largest": "communication_s",
                     "communication_share": 0.61, "step_ms": 900.0, "mfu": 0.01, "exposed_top_share": 0.7,
                     "exposed_tensors": "fc1_w pull 3.06 MiB +300 ms", "exposed_ps_task": "task 0: 100 %"})
    said = sentence(row)
    assert "61 % of its 900 ms step is communication the compute did not hide" in said
    assert "70 % of it on fc1_w pull 3.06 MiB +300 ms (ps task 0: 100 %)" in said


def test_the_trace_file_round_trips(tmp_path):
    tracing.write(tmp_path, 3, [ps_step(5, 1.0)], "src")
    (trace,) = tracing.read_all(tmp_path)
    assert trace["worker"] == 3 and trace["source"] == "src" and json.dumps(trace)


def test_the_why_sentence_says_when_the_links_idled_through_the_exposed_communication():
    row = pd.Series({"model": "cnn", "workers": 4, "link_mbit": 10000.0, "variant": "allreduce",
                     "largest": "communication_s", "communication_share": 0.59, "step_ms": 215.0, "links_busy": 0.019})
    assert "its busiest link was 1.9 % busy: the exchange waited on the hosts' CPUs" in sentence(row)
    bound = sentence(row.copy().replace({0.019: 0.40}))
    assert "busy" not in bound  # at 100 Mbit/s the ring's link was 40 % busy: the link bound it


@pytest.mark.slow
def test_a_ps_sync_table_split_over_two_ps_tasks_is_traced_per_piece_and_task(results):
    # sparse accumulators and a partitioned table: the pieces a default comparison does not name
    done = bench("--strategy", "ps-sync", "--workers", "2", "--ps", "2", "--ps-partition-mb", "0.1",
                 "--model", "embedding", "--data", "synthetic-ids", "--steps", "12", "--warmup-steps", "6",
                 "--output", str(results))
    assert done.returncode == 0, done.stderr[-3000:]
    folder = next(p for p in results.iterdir() if p.is_dir())
    assert_time_split(folder)
    exposure = run_record(results)["summary"]["exposure"]
    assert {t["phase"] for t in exposure["tensors"]} <= {"pull", "push"}
    assert {t["ps_task"] for t in exposure["tensors"]} == {0, 1}
