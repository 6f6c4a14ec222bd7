"""`python -m bench project` on a results folder made by hand: a baseline run with its
steps, a micro-benchmark sweep, and emulated-cluster runs it must predict, not learn from."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from bench.analysis.projection import costs, intervals, profile, schemes
from bench.analysis.projection.calibrate import concurrent_stretch
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.parameter_servers import ROUND_ROBIN
from bench.analysis.projection.schemes import RING, RING_DENSE, PsSetup
from bench.analysis.report.build import write_report
from bench.cli import main
from bench.metrics import Gradient, busbw
from bench.run.models import tensors

GRADIENT_BYTES = 4_000_000
STEP_S = 0.05


def run_folder(root: Path, name: str, strategy: str, workers: int, rate: float, link: float | None = None,
               ps: int = 0, steps: bool = False, p50: float | None = None, split: dict | None = None,
               model: str = "cnn", config: dict | None = None, facts: dict | None = None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    record = {"run_id": name, "status": "ok", "environment": {"cpu_count": 4},
              "config": {"strategy": strategy, "model": model, "data": "synthetic", "workers": workers, "ps": ps,
                         "batch_size": 64, "steps": 40, "warmup_steps": 2, "options": {}, **(config or {})},
              "model": facts or {"gradient_bytes_per_step": GRADIENT_BYTES},
              "summary": {"throughput_examples_per_s": rate, "warmup_steps": 2, "step_time_p50_s": p50}}
    if split:  # seconds per part of every worker's median step, as bench.run.process.breakdown summarizes them
        parts = {part: {"p50_s": split.get(part, 0.0), "p95_s": split.get(part, 0.0)}
                 for part in ("step", "compute", "communication", "waiting", "other")}
        record["summary"]["breakdown"] = {"per_worker": {str(w): parts for w in range(workers)}}
    if link is not None:
        record["network"] = {"link_mbit": link, "per_host": {}}
    (folder / "run.json").write_text(json.dumps(record))
    if steps:  # 40 steps alternating 0.04 / 0.06 s
        rows = [{"run_id": name, "worker": 0, "local_step": i, "global_step": i + 1, "t_start_s": i * 0.1,
                 "t_end_s": i * 0.1 + STEP_S + (0.01 if i % 2 else -0.01), "examples": 64, "loss": 1.0}
                for i in range(40)]
        pd.DataFrame(rows).to_csv(folder / "steps.csv", index=False)


def micro_sweep(root: Path, alpha: float, bandwidth: float) -> None:
    folder = root / "micro-1"
    folder.mkdir(parents=True)
    rows = [{"transport": "mpi4py", "kind": "allreduce", "processes": 2, "bytes": b,
             "median_s": 2 * alpha + b / bandwidth} for b in (65536, 4 * 2**20)]
    rows += [{"transport": "ps-1ps", "kind": "ps_roundtrip", "processes": 2, "bytes": b,
              "median_s": 2 * 2 * alpha + 2 * b / bandwidth} for b in (65536, 4 * 2**20)]
    for row in rows:
        row["busbw_gb_per_s"] = busbw(row["kind"], row["bytes"], row["median_s"], row["processes"]) / 1e9
        row["algbw_gb_per_s"] = row["bytes"] / row["median_s"] / 1e9
        row["fraction_of_mpi4py"] = None
    pd.DataFrame(rows).to_csv(folder / "micro-summary.csv", index=False)


@pytest.fixture
def results(tmp_path):
    run_folder(tmp_path, "single", "single", 1, 64 / STEP_S, steps=True)
    micro_sweep(tmp_path, alpha=20e-6, bandwidth=1e9)
    # 4 workers on 4 cores at 100 Mbit/s: ring 2(3)/4 x 4 MB at 12.5 MB/s = 0.48 s + compute
    run_folder(tmp_path, "ar-100", "allreduce", 4, 4 * 64 / 0.55, link=100)
    run_folder(tmp_path, "tf-100", "allreduce-tf", 4, 4 * 64 / 0.6, link=100)
    run_folder(tmp_path, "ps-100", "ps-sync", 4, 4 * 64 / 2.6, link=100, ps=1)
    # the same 4 workers on this machine's loopback: steps twice the 1-worker compute (cores shared)
    run_folder(tmp_path, "ar-local", "allreduce-tf", 4, 4 * 64 / 0.1, p50=2 * STEP_S)
    return tmp_path


def test_it_calibrates_from_the_one_machine_runs_and_checks_the_emulated_ones(results, capsys):
    assert main(["project", "--from", str(results), "--workers", "8,64", "--link-gbit", "10,100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = out["calibration"]["models"][0]
    assert model["compute_ms"] == pytest.approx(STEP_S * 1e3, rel=1e-6)  # the single run's measured steps
    assert out["profile"]["name"] == profile.DEFAULT and out["profile"]["why"].startswith("no --profile given")
    checked = {r["variant"]: r for r in out["validation"]}
    assert set(checked) == {"allreduce", "allreduce-tf", "ps-sync R=N"}  # checked, not learnt
    assert [r["compute_stretch_all_at_once"] for r in checked.values()] == [pytest.approx(2.0)] * 3  # the loopback's
    # a ring's workers compute at the same time; a ps's at points that need not meet (their share of the step)
    assert checked["allreduce-tf"]["compute_stretch"] == pytest.approx(2.0)
    ps = checked["ps-sync R=N"]
    assert ps["compute_stretch"] == pytest.approx(
        concurrent_stretch(2.0, 4, ps["predicted_compute_s"] / ps["predicted_step_s"]), rel=1e-3)
    assert 1.0 < ps["compute_stretch"] < 1.2
    ring = checked["allreduce-tf"]
    assert (ring["wire"], checked["allreduce"]["wire"], ps["wire"]) == ("grpc", "mpi", "grpc")
    for row in checked.values():  # every figure an interval at the stated level around the prediction
        assert row["predicted_low"] < row["predicted_examples_per_s"] < row["predicted_high"]
        assert row["level"] == 0.9 and row["model_error_low"] <= 1 <= row["model_error_high"]
        assert row["inside"] == (row["predicted_low"] <= row["measured_examples_per_s"] <= row["predicted_high"])
        assert row["error"] == pytest.approx(row["predicted_examples_per_s"] / row["measured_examples_per_s"] - 1)
    summary = out["validation_summary"]
    assert summary["settings"] == 3 and summary["inside"] == sum(r["inside"] for r in checked.values())
    assert summary["level"] == 0.9 and summary["coverage"] == pytest.approx(summary["inside"] / 3)
    assert {(r["workers"], r["link_gbit"]) for r in out["winners"]} == {(8, 10), (8, 100), (64, 10), (64, 100)}
    for row in out["projection"]:
        assert row["throughput_low"] <= row["throughput_examples_per_s"] <= row["throughput_high"]
        assert row["transport"] != "nccl"  # CPU workers
    assert {r["name"] for r in out["constants"]} >= {"latency_s", "grpc.process_bytes_per_s"}
    assert (results / "projection.json").is_file()


def test_repeated_one_worker_runs_give_the_compute_their_mean_and_an_interval_spanning_them(tmp_path, capsys):
    # the first run's steps are 0.05 s on average, the second's (the same steps, later) 0.06 s
    run_folder(tmp_path, "single-1", "single", 1, 64 / STEP_S, steps=True)
    run_folder(tmp_path, "single-2", "single", 1, 64 / 0.06, steps=True)
    steps = pd.read_csv(tmp_path / "single-2" / "steps.csv")
    steps["t_end_s"] += 0.01
    steps.to_csv(tmp_path / "single-2" / "steps.csv", index=False)
    run_folder(tmp_path, "ar-100", "allreduce", 4, 4 * 64 / 0.55, link=100)
    assert main(["project", "--from", str(tmp_path), "--workers", "8", "--link-gbit", "10", "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["calibration"]["models"][0]
    assert model["compute_ms"] == pytest.approx(55.0, rel=1e-6)
    assert model["compute_from"].startswith("2 runs: ")
    # from the lowest repetition to the highest (neither recorded an interval of its own): +-5 ms
    assert model["compute_ci95_ms"] == pytest.approx(5.0, rel=1e-6)


def exact_profile(path: Path) -> None:
    """The default profile with every range closed and no latency nor Horovod cycle: figures by hand."""
    data = json.loads((profile.SHIPPED / f"{profile.DEFAULT}.json").read_text())
    for name, constant in data["constants"].items():
        if name in ("latency_s", "latency_busy_cpu_s", "horovod.cycle_s"):
            constant["value"] = 0.0
        constant["low"] = constant["high"] = constant["value"]
        constant.pop("samples", None)
        constant.pop("rounds", None)
    data["name"] = "exact"
    path.write_text(json.dumps(data))


def test_a_profile_measured_under_from_is_the_one_used_and_the_check_is_the_clusters_code_path(results, capsys):
    exact_profile(results / profile.PROFILE_FILE)  # where ./run_bench.sh profile writes it
    assert main(["project", "--from", str(results), "--workers", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"]["name"] == "exact" and out["profile"]["why"].startswith("measured:")
    ring = next(r for r in out["validation"] if r["variant"] == "allreduce-tf")
    # no constant uncertain, one run's compute known to its 95 % interval: that is all its own terms hold
    single = next(m for m in out["calibration"]["models"])
    assert ring["u_log"] == pytest.approx(math.log1p(single["compute_ci95_ms"] / single["compute_ms"]) / 1.96,
                                          rel=0.05)
    # the same figure as a described cluster of 4 CPU hosts behind 100 Mbit/s links gives (intervals.interval)
    used = profile.load(str(results / profile.PROFILE_FILE))
    stretch, sd = ring["compute_stretch"], out["calibration"]["models"][0]["compute_sd_ms"] / 1e3
    cluster = Cluster(4, 1, 0.1, 64 / (STEP_S * stretch), 64, used.get("intra_host_bytes_per_s"), sd * stretch,
                      on_host=True)
    shaped = tensors.of("cnn").sized(Gradient(GRADIENT_BYTES))
    # allreduce-tf's one all_reduce starts once every gradient is ready (exchange_overlaps_backward)
    same = intervals.interval(RING, "grpc", shaped, cluster, PsSetup(1, False, ROUND_ROBIN), used, overlapped=False)
    assert ring["predicted_examples_per_s"] == pytest.approx(same.point)
    # by hand: the ring moves 2(n-1)/n S at the link's share of 100 Mbit/s once the slowest worker's
    # backward pass is done
    moved_s = 1.5 * GRADIENT_BYTES / (used.get("link_share") * 100e6 / 8)
    slowest_s = costs.synchronous_compute_s(4, STEP_S * stretch, sd * stretch)
    assert ring["predicted_step_s"] == pytest.approx(slowest_s + moved_s)
    assert ring["predicted_waiting_s"] == pytest.approx(slowest_s - STEP_S * stretch)
    # --profile names another
    assert main(["project", "--from", str(results), "--workers", "8", "--profile", "tf1-2017", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"]["name"] == "tf1-2017"


def test_the_compute_of_the_loopback_runs_split_stretches_the_check_and_each_term_is_compared(results, capsys):
    # a Horovod run on this machine whose step is half waiting: its compute, not its step, counts
    run_folder(results, "ar-local-split", "allreduce", 4, 4 * 64 / 0.3, p50=0.3,
               split={"step": 0.3, "compute": 3 * STEP_S, "communication": 0.1, "waiting": 0.05})
    # a ps-sync run's compute is only what of its forward pass did not overlap its parameters' arrival:
    # no measure of the cores' sharing
    run_folder(results, "ps-local", "ps-sync", 4, 4 * 64 / 0.2, p50=0.2, ps=1,
               split={"step": 0.2, "compute": 1.1 * STEP_S, "communication": 0.02, "waiting": 0.03})
    run_folder(results, "ps-100-split", "ps-sync", 4, 4 * 64 / 2.6, link=100, ps=1,
               split={"step": 2.6, "compute": 0.16, "communication": 1.3, "waiting": 1.1})
    assert main(["project", "--from", str(results), "--workers", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    checked = {r["variant"]: r for r in out["validation"] if r["measured_compute_s"] is not None}
    ps = checked["ps-sync R=N"]
    # the rings' measured compute / 1-worker compute, all computing at once: the median of the
    # Horovod run's split compute (3x) and the TF collectives' run's step (2x, no split recorded)
    assert ps["compute_stretch_all_at_once"] == pytest.approx(2.5)
    assert ps["measured_communication_s"] == pytest.approx(1.3) and ps["measured_waiting_s"] == pytest.approx(1.1)
    assert ps["predicted_compute_s"] == pytest.approx(ps["compute_stretch"] * STEP_S)
    # a ring's: its family's runs over its own wire (Horovod over MPI: the Horovod run; TF's collectives, gRPC)
    rings = {r["variant"]: r for r in out["validation"] if r["variant"].startswith("allreduce")}
    assert rings["allreduce"]["compute_stretch"] == pytest.approx(3.0)
    assert rings["allreduce-tf"]["compute_stretch"] == pytest.approx(2.0)
    assert rings["allreduce"]["measured_compute_s"] is None  # no split recorded for the emulated run


def test_an_emulated_run_is_predicted_no_faster_than_its_strategy_went_on_these_cores(results, capsys):
    # ps-sync at 4 workers over loopback made 400 examples/s (+-20): its emulated run at 10 Gbit/s,
    # whose terms alone allow more, is predicted within that; a strategy without such a run keeps its terms
    run_folder(results, "ps-local", "ps-sync", 4, 400.0, ps=1, p50=4 * 64 / 400.0)
    record = json.loads((results / "ps-local" / "run.json").read_text())
    record["summary"]["throughput_ci95_examples_per_s"] = 20.0
    (results / "ps-local" / "run.json").write_text(json.dumps(record))
    run_folder(results, "ps-10000", "ps-sync", 4, 390.0, link=10000, ps=1)
    assert main(["project", "--from", str(results), "--workers", "8", "--json"]) == 0
    rows = {(r["variant"], r["link_mbit"]): r for r in json.loads(capsys.readouterr().out)["validation"]}
    fast = rows[("ps-sync R=N", 10000.0)]
    assert fast["terms_examples_per_s"] > 420.0
    # bound there: the loopback run's rate, its 95 % interval the figure's own spread (and the model's error)
    assert fast["predicted_examples_per_s"] == pytest.approx(400.0) and fast["inside"]
    assert fast["u_log"] == pytest.approx(math.log(420.0 / 400.0) / 1.96, rel=0.1)  # over 32 draws
    assert fast["predicted_low"] <= 380.0 and fast["predicted_high"] >= 420.0
    assert fast["cpu_ceiling_from"] == "1 one-machine run(s) of ps-sync at 4 workers"
    slow = rows[("ps-sync R=N", 100.0)]  # its terms (2.6 s a step at 100 Mbit/s) are far below the ceiling
    assert slow["predicted_examples_per_s"] == pytest.approx(slow["terms_examples_per_s"])
    ring = rows[("allreduce", 100.0)]  # no one-machine Horovod run at 4 workers: its terms, under its ranks' polling
    assert ring["cpu_ceiling_from"] is None
    polling = ring["waiting_cpu_ceiling_examples_per_s"]
    assert polling < ring["terms_examples_per_s"]  # 4 ranks polling ~1 core each on this machine's cores
    assert ring["predicted_examples_per_s"] == pytest.approx(polling) and polling < ring["terms_examples_per_s"]


def test_a_ps_run_with_partitioned_variables_is_predicted_with_them_split_over_its_tasks(results, capsys):
    # cnn's fc1 kernel is 3.2 MB of its 3.4: whole, it loads one of two ps tasks; split (--ps-partition-mb 1), both
    for rate, options in ((100.0, {}), (200.0, {"ps_partition_mb": 1.0, "ps_placement": "balanced"})):
        run_folder(results, f"ps2-{rate:g}", "ps-sync", 4, rate, link=100, ps=2, config={"options": options})
    assert main(["project", "--from", str(results), "--workers", "8", "--json"]) == 0
    predicted = {r["measured_examples_per_s"]: r["predicted_examples_per_s"]
                 for r in json.loads(capsys.readouterr().out)["validation"] if r["ps"] == 2}
    assert predicted[200.0] > 1.6 * predicted[100.0]


def test_the_compute_s_own_interval_widens_every_figure(results, capsys):
    exact_profile(results / profile.PROFILE_FILE)  # no range of its own: what is left is the compute's
    record = json.loads((results / "single" / "run.json").read_text())
    record["summary"]["throughput_ci95_examples_per_s"] = 0.1 * record["summary"]["throughput_examples_per_s"]
    (results / "single" / "run.json").write_text(json.dumps(record))
    assert main(["project", "--from", str(results), "--workers", "2", "--link-gbit", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"]["models"][0]["compute_ci95_ms"] == pytest.approx(0.1 * STEP_S * 1e3)
    ring = next(r for r in out["projection"] if r["scheme"] == RING and r["transport"] == "mpi")
    # compute-bound at 100 Gbit/s: examples/s go as 1 / compute, whose one run's 95 % interval of +-10 %
    # is a standard uncertainty of ln(1.1) / 1.96 (from_runs.compute_term)
    assert ring["u_log"] == pytest.approx(math.log(1.1) / 1.96, rel=0.02)
    assert ring["throughput_high"] / ring["throughput_low"] >= math.exp(2 * 1.6448 * math.log(1.1) / 1.96) * 0.999
    assert all(r["predicted_low"] < r["predicted_high"] for r in out["validation"])


def test_an_embedding_tables_touched_rows_come_from_its_runs_and_its_size_from_their_config(tmp_path, capsys):
    # a table of 4096 x 16 floats (not the default 262144 x 32), 100 rows of 64 bytes touched per worker step
    sizes = {"embedding_rows": 4096, "embedding_width": 16}
    facts = {"gradient_bytes_per_step": 4096 * 64 + 3000, "table_bytes": 4096 * 64, "rows_touched_per_step": 100,
             "row_bytes": 64}
    run_folder(tmp_path, "single", "single", 1, 64 / STEP_S, steps=True, model="embedding", config=sizes,
               facts=facts)
    run_folder(tmp_path, "ar-100", "allreduce", 4, 1000.0, link=100, model="embedding", config=sizes, facts=facts)
    assert main(["project", "--from", str(tmp_path), "--workers", "4", "--link-gbit", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["scheme"] for r in out["projection"]} >= {RING, RING_DENSE}
    ring = {r["scheme"]: r for r in out["projection"] if r["transport"] == "mpi"}
    assert ring[RING]["throughput_examples_per_s"] > ring[RING_DENSE]["throughput_examples_per_s"]
    (checked,) = out["validation"]
    assert checked["scheme"] == RING  # the touched rows allgathered, as Horovod's allreduce of IndexedSlices
    # built at the runs' size: its table is 4096 x 16 floats as recorded, not scaled from the default's 32 MB
    assert [t.nbytes for t in tensors.of("embedding", rows=4096, width=16).tensors if t.table] == [4096 * 64]


def test_the_report_shows_the_projection_and_the_sweep(results):
    assert main(["project", "--from", str(results), "--workers", "8"]) == 0
    page = write_report([results], results / "report").read_text()
    for ident in ("projection", "projection-calibration", "projection-winners", "projection-validation",
                  "micro-micro-1"):
        assert f'id="{ident}"' in page


@pytest.mark.parametrize("argv,message", [
    (["--from", "nowhere"], "--from nowhere: no such folder"),
    (["--workers", "0"], "--workers must be >= 1"),
    (["--compute-ms", "-3"], "--compute-ms: must be > 0"),
    (["--model", "mlp"], "--model mlp: no finished run of it"),
])
def test_bad_input_is_one_line_and_exit_2(results, capsys, argv, message):
    argv = [a.replace("nowhere", str(results / "nowhere")) for a in argv]
    assert main(["project", "--from", str(results), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0].replace(str(results / "nowhere"), "nowhere")
    assert not (results / "nowhere").exists()


def test_each_exchanges_host_work_per_step_is_its_1_worker_runs_beyond_the_baselines(tmp_path, capsys):
    # the split's other: host time outside the graph; the baseline's 1 ms is inside its step, the compute
    run_folder(tmp_path, "single", "single", 1, 64 / STEP_S, steps=True,
               split={"step": STEP_S, "compute": 0.049, "other": 0.001})
    argv = ["project", "--from", str(tmp_path), "--workers", "8", "--link-gbit", "10", "--ps", "1", "--json"]
    assert main(argv) == 0
    before = pd.DataFrame(json.loads(capsys.readouterr().out)["projection"])
    run_folder(tmp_path, "ps-sync-1", "ps-sync", 1, 64 / 0.06, ps=1,
               split={"step": 0.06, "compute": 0.05, "communication": 0.006, "other": 0.004})
    assert main(argv) == 0
    after = pd.DataFrame(json.loads(capsys.readouterr().out)["projection"])
    sync = (after["scheme"] == schemes.PS_SYNC).to_numpy()
    assert after.loc[sync, "other_s"].to_numpy() == pytest.approx([0.003])
    assert (after.loc[sync, "step_s"].to_numpy() - before.loc[sync, "step_s"].to_numpy()) == pytest.approx([0.003])
    rings = (after["scheme"] == RING).to_numpy()  # no 1-worker run of a ring: no host work known
    assert (after.loc[rings, "other_s"] == 0).all()
    assert after.loc[rings, "step_s"].to_numpy() == pytest.approx(before.loc[rings, "step_s"].to_numpy())


def test_a_figure_measured_three_times_is_scored_three_times_beside_the_rigs_repeat_error(tmp_path, capsys):
    run_folder(tmp_path, "single", "single", 1, 64 / STEP_S, steps=True)
    micro_sweep(tmp_path, alpha=20e-6, bandwidth=1e9)
    for k, step_s in enumerate((0.55, 0.5, 0.6)):  # one figure, three repeats
        run_folder(tmp_path, f"ar-100-r{k}", "allreduce", 4, 4 * 64 / step_s, link=100)
    run_folder(tmp_path, "tf-100", "allreduce-tf", 4, 4 * 64 / 0.6, link=100)
    # hosts whose CPU comes in 10 ms periods: a 15 ms step spans fewer than two, and is not scored
    run_folder(tmp_path, "tf-fast", "allreduce-tf", 4, 4 * 64 / 0.015, link=1000)
    for name in ("tf-100", "tf-fast"):
        record = json.loads((tmp_path / name / "run.json").read_text())
        record["network"]["host_cpu_period_s"] = 0.01
        (tmp_path / name / "run.json").write_text(json.dumps(record))
    assert main(["project", "--from", str(tmp_path), "--workers", "8", "--link-gbit", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["run_id"]: r for r in out["validation"]}
    assert [rows[f"ar-100-r{k}"]["repeat_error"] for k in range(3)] == [
        pytest.approx((4 * 64 / 0.5 + 4 * 64 / 0.6) / 2 / (4 * 64 / 0.55) - 1),
        pytest.approx((4 * 64 / 0.55 + 4 * 64 / 0.6) / 2 / (4 * 64 / 0.5) - 1),
        pytest.approx((4 * 64 / 0.55 + 4 * 64 / 0.5) / 2 / (4 * 64 / 0.6) - 1)]
    assert len({rows[f"ar-100-r{k}"]["figure"] for k in range(3)}) == 1
    assert rows["tf-100"]["scored"] and not rows["tf-fast"]["scored"]
    summary = out["validation_summary"]
    counts = ("settings", "figures", "not_scored", "repeated_settings")
    assert [summary[k] for k in counts] == [4, 2, 1, 3]
    assert summary["rig_median_repeat_error"] == pytest.approx(
        sorted(abs(rows[f"ar-100-r{k}"]["repeat_error"]) for k in range(3))[1])
    assert "15.0 ms spans fewer than 2" in summary["not_scored_why"][0]
    assert main(["project", "--from", str(tmp_path), "--workers", "8", "--link-gbit", "10"]) == 0
    assert "the rig's own repeat error: median" in capsys.readouterr().out


def test_a_projection_recorded_before_the_repeats_still_reads_in_one_line():
    from bench.analysis.projection.from_runs import summary_line

    older = {"settings": 3, "inside": 2, "level": 0.9, "median_half_width": 0.2, "median_abs_error": 0.1,
             "worst_abs_error": 0.3}  # no figures, no repeat error: a projection.json of 2026-12-01
    assert summary_line(older).startswith("2 of 3 scored measurements inside their 90% intervals")
