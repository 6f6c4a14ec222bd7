import json

import pandas as pd

from bench.cli import main
from bench.run.process.records import EVAL_COLUMNS, STEP_COLUMNS
from tests.conftest import only_run
from tests.time_split import assert_time_split


def test_single_learns_digits_and_writes_complete_records(results):
    assert main(["--strategy", "single", "--model", "mlp", "--data", "digits", "--steps", "300",
                 "--eval-every", "100", "--output", str(results)]) == 0
    run = only_run(results)
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "ok"
    assert {"host", "cpu_count", "tensorflow", "python", "suite_commit"} <= set(record["environment"])
    steps = pd.read_csv(run / "steps.csv")
    evals = pd.read_csv(run / "evals.csv")
    assert tuple(steps.columns) == STEP_COLUMNS and tuple(evals.columns) == EVAL_COLUMNS
    assert len(steps) == 300 and steps["global_step"].tolist() == list(range(1, 301))
    assert (steps["t_end_s"] >= steps["t_start_s"]).all()
    assert evals["global_step"].tolist() == [100, 200, 300]
    assert evals["accuracy"].max() >= 0.90
    summary = record["summary"]
    assert summary["throughput_examples_per_s"] > 0 and summary["measured_steps"] == 290
    assert summary["step_time_p50_s"] <= summary["step_time_p99_s"]
    assert summary["time_to_target_s"] is not None
    assert record["model"]["num_params"] == 79510
    assert_time_split(run, exchanges=False)


def test_a_failing_run_is_recorded_as_failed(results, monkeypatch):
    from strategies.workers.single import SingleWorker

    def explode(self, stamped=False):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(SingleWorker, "step", explode)
    assert main(["--steps", "5", "--warmup-steps", "0", "--output", str(results)]) == 1
    record = json.loads((only_run(results) / "run.json").read_text())
    assert record["status"] == "failed: RuntimeError: injected failure"
