"""`python -m bench project` on a results folder made by hand: a baseline run with its
steps, a micro-benchmark sweep, and emulated-cluster runs it must predict, not learn from."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench.analysis.projection.calibrate import concurrent_stretch
from bench.analysis.report.build import write_report
from bench.cli import main
from bench.metrics import busbw

GRADIENT_BYTES = 4_000_000
STEP_S = 0.05


def run_folder(root: Path, name: str, strategy: str, workers: int, rate: float, link: float | None = None,
               ps: int = 0, steps: bool = False, p50: float | None = None, split: dict | None = None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    record = {"run_id": name, "status": "ok", "environment": {"cpu_count": 4},
              "config": {"strategy": strategy, "model": "cnn", "data": "synthetic", "workers": workers, "ps": ps,
                         "batch_size": 64, "steps": 40, "warmup_steps": 2, "options": {}},
              "model": {"gradient_bytes_per_step": GRADIENT_BYTES},
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
    assert out["calibration"]["latency_s"]["ring"] == pytest.approx(20e-6, rel=1e-3)
    checked = {r["variant"]: r for r in out["validation"]}
    assert set(checked) == {"allreduce", "allreduce-tf", "ps-sync R=N"}  # checked, not learnt
    assert [r["compute_stretch_all_at_once"] for r in checked.values()] == [pytest.approx(2.0)] * 3  # the loopback's
    # a ring's workers compute at the same time; a ps's at points that need not meet (their share of the step)
    assert checked["allreduce-tf"]["compute_stretch"] == pytest.approx(2.0)
    ps = checked["ps-sync R=N"]
    assert ps["compute_stretch"] == pytest.approx(
        concurrent_stretch(2.0, 4, ps["predicted_compute_s"] / ps["predicted_step_s"]), rel=1e-3)
    assert 1.0 < ps["compute_stretch"] < 1.2
    # the slowest of 4 + the ring at 100 Mbit/s (latency 6 x 20 us), over each ring's own wire
    ring = checked["allreduce-tf"]
    assert ring["predicted_communication_s"] == pytest.approx(6 * 20e-6 + 1.5 * GRADIENT_BYTES / 12.5e6, rel=1e-6)
    assert (ring["wire"], checked["allreduce"]["wire"], ps["wire"]) == ("grpc", "mpi", "grpc")
    assert ring["predicted_examples_per_s"] == pytest.approx(4 * 64 / ring["predicted_step_s"])
    assert ring["error"] == pytest.approx(ring["predicted_examples_per_s"] / ring["measured_examples_per_s"] - 1)
    assert out["validation_summary"]["settings"] == 3
    assert {(r["workers"], r["link_gbit"]) for r in out["winners"]} == {(8, 10), (8, 100), (64, 10), (64, 100)}
    assert (results / "projection.json").is_file()


def test_the_compute_of_the_loopback_runs_split_stretches_the_check_and_each_term_is_compared(results, capsys):
    # a ps-sync run on this machine whose step is half waiting: its compute, not its step, is the stretch
    run_folder(results, "ps-local", "ps-sync", 4, 4 * 64 / 0.2, p50=0.2, ps=1,
               split={"step": 0.2, "compute": 3 * STEP_S, "communication": 0.02, "waiting": 0.03})
    run_folder(results, "ps-100-split", "ps-sync", 4, 4 * 64 / 2.6, link=100, ps=1,
               split={"step": 2.6, "compute": 0.16, "communication": 1.3, "waiting": 1.1})
    assert main(["project", "--from", str(results), "--workers", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    checked = {r["variant"]: r for r in out["validation"] if r["measured_compute_s"] is not None}
    ps = checked["ps-sync R=N"]
    # the same family's measured compute / 1-worker compute, all computing at once
    assert ps["compute_stretch_all_at_once"] == pytest.approx(3.0)
    assert ps["measured_communication_s"] == pytest.approx(1.3) and ps["measured_waiting_s"] == pytest.approx(1.1)
    assert ps["predicted_compute_s"] == pytest.approx(ps["compute_stretch"] * STEP_S)
    ring = next(r for r in out["validation"] if r["variant"] == "allreduce")
    assert ring["compute_stretch"] == pytest.approx(2.0) and ring["measured_compute_s"] is None  # no split recorded


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
