"""run.json's schema: a new record declares its version, purpose and scenario, every field it
holds is declared, and records of each older shape are upgraded in one place."""

from __future__ import annotations

import json

from bench.analysis.runs.collect import run_row
from bench.analysis.runs.upgrade import upgrade
from bench.run.process.schema import RUN_FIELDS, SCHEMA_VERSION

CONFIG = {"strategy": "ps-sync", "model": "mlp", "data": "digits", "workers": 2, "ps": 1, "batch_size": 32,
          "steps": 40, "eval_every": 50}


def test_a_new_run_records_its_version_purpose_and_scenario_and_only_declared_fields(results):
    from bench.cli import run_from_args
    from bench.run.launch.launcher import run_one

    code = run_one(*run_from_args(["--model", "mlp", "--data", "digits", "--steps", "12", "--eval-every", "0",
                                  "--output", str(results)]))
    assert code == 0
    [folder] = [p for p in results.iterdir() if p.is_dir()]
    record = json.loads((folder / "run.json").read_text())
    assert record["schema_version"] == SCHEMA_VERSION
    assert (record["purpose"], record["scenario"]) == ("throughput", "clean")
    assert not set(record) - set(RUN_FIELDS), set(record) - set(RUN_FIELDS)
    assert upgrade(record) is record


def test_a_version_1_preset_record_gets_its_purpose_from_the_run_name_and_its_strategy_facts():
    old = {"run_id": "x", "status": "ok", "config": {**CONFIG, "run_name": "throughput-ps-sync-mlp-w2"},
           "strategy": "ps-sync", "startup_s": 4.5, "summary": {"throughput_examples_per_s": 10.0},
           "strategy_info": {"bytes_sent_per_worker_per_step": 1234}}
    new = upgrade(old)
    assert new["schema_version"] == SCHEMA_VERSION and "schema_version" not in old  # the file is not rewritten
    assert new["purpose"] == "throughput"  # evaluated every 50 steps, but the preset said throughput
    assert new["scenario"] == "clean"
    assert new["strategy"]["name"] == "ps-sync" and new["strategy"]["family"] == "parameter-server"
    assert new["summary"]["startup_s"] == 4.5
    assert new["exchange"] == {"worker_sent_per_step": 1234}


def test_a_version_1_hand_run_with_a_fault_gets_purpose_from_its_evaluation_and_scenario_from_its_flags():
    old = {"run_id": "y", "status": "ok", "config": {**CONFIG, "kill_worker": "1@30", "recover": True},
           "strategy": {"name": "ps-sync", "family": "parameter-server", "variant": "ps-sync"},
           "summary": {"startup_s": 2.0}, "exchange": {"worker_sent_per_step": 99}}
    new = upgrade(old)
    assert (new["purpose"], new["scenario"]) == ("convergence", "recover")
    assert new["strategy"]["variant"] == "ps-sync" and new["exchange"] == {"worker_sent_per_step": 99}
    assert new["summary"]["startup_s"] == 2.0


def test_a_version_2_record_keeps_what_its_strategy_declared_and_gains_what_it_declares_since():
    old = {"schema_version": 2, "run_id": "z", "status": "ok", "purpose": "throughput", "scenario": "clean",
           "config": {**CONFIG, "strategy": "allreduce", "options": {"hvd_controller": "gloo"}},
           "strategy": {"name": "allreduce", "family": "allreduce", "variant": "as it was recorded"}}
    new = upgrade(old)
    assert new["strategy"]["variant"] == "as it was recorded"  # what was recorded stays
    assert new["strategy"]["wire"] == "gloo"
    assert "wire" not in old["strategy"]


def test_strategies_declare_the_wire_they_exchange_over():
    from bench.config import RunConfig
    from strategies import registry

    def facts(name: str, **options) -> dict:
        config = registry.with_defaults(RunConfig(strategy=name, workers=2, ps=1, options=options))
        return registry.get(name).facts(config)

    assert (facts("allreduce")["wire"], facts("allreduce", hvd_controller="gloo")["wire"]) == ("mpi", "gloo")
    assert {facts(n)["wire"] for n in ("allreduce-tf", "ps-sync", "ps-async")} == {"grpc"}
    assert facts("single")["wire"] is None and facts("multi-tower")["wire"] is None


def test_strategies_declare_whether_their_exchange_may_start_during_the_backward_pass():
    from bench.config import RunConfig
    from strategies import registry

    def overlaps(name: str) -> bool:
        config = registry.with_defaults(RunConfig(strategy=name, workers=2, ps=1))
        return registry.get(name).facts(config)["exchange_overlaps_backward"]

    # Horovod allreduces each gradient once it is ready; Keras's optimizer under MultiWorkerMirroredStrategy
    # reduces them all in one call once the tape has every one
    assert overlaps("allreduce") and not overlaps("allreduce-tf")
    # a record of version 3 gains the fact from its registered strategy
    old = {"schema_version": 3, "run_id": "v3", "status": "ok", "purpose": "throughput", "scenario": "clean",
           "config": {**CONFIG, "strategy": "allreduce-tf", "ps": 0},
           "strategy": {"name": "allreduce-tf", "family": "allreduce", "variant": "allreduce-tf", "wire": "grpc"}}
    assert upgrade(old)["strategy"]["exchange_overlaps_backward"] is False


def test_the_report_reads_an_old_record_through_upgrade(tmp_path):
    folder = tmp_path / "old-run"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({
        "run_id": "old-run", "status": "ok",
        "config": {**CONFIG, "strategy": "allreduce", "data": "synthetic", "straggler": "1:3"},
        "strategy": "allreduce", "startup_s": 3.0, "summary": {},
        "strategy_info": {"bytes_sent_per_rank_per_step": 77}}))
    row = run_row(folder)
    assert (row["purpose"], row["scenario"], row["family"]) == ("throughput", "straggler", "allreduce")
    assert row["startup_s"] == 3.0 and row["bytes_sent_per_worker_per_step"] == 77


def test_the_report_reads_a_record_that_is_still_being_opened(tmp_path):
    folder = tmp_path / "opening"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({
        "schema_version": SCHEMA_VERSION, "run_id": "opening", "status": "running", "purpose": "throughput",
        "scenario": "clean", "config": CONFIG, "strategy": {"name": "ps-sync", "family": "parameter-server"}}))
    row = run_row(folder)
    assert row["bytes_sent_per_worker_per_step"] is None and not row["ok"]
