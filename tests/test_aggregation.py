"""The `applied` column the harness fills for a strategy that declares gradients per step."""

import pandas as pd

from bench.config import RunConfig
from bench.run.contract import TfCluster
from bench.run.process.aggregation import mark_aggregated
from bench.run.validation import validate
from strategies import registry


def steps_file(tmp_path, rows):
    path = tmp_path / "steps.csv"
    pd.DataFrame(rows, columns=["worker", "global_step", "arrival_order", "applied"]).to_csv(path, index=False)
    return path


def test_the_first_r_gradients_to_arrive_for_a_step_are_applied(tmp_path):
    path = steps_file(tmp_path, [(0, 1, 2, None), (1, 1, 1, None), (2, 1, 3, None),  # worker 2 came last
                                 (0, 2, 5, None), (1, 2, 4, None), (2, 2, 6, None),
                                 (2, 3, 7, None)])  # a step past the run's last is never taken
    counts = mark_aggregated(path, replicas=2, last_step=2)
    applied = pd.read_csv(path).set_index(["worker", "global_step"])["applied"]
    assert applied[(2, 1)] == 0 and applied[(2, 2)] == 0 and applied[(2, 3)] == 0
    assert applied.sum() == 4
    assert counts == {"gradients": 7, "gradients_applied": 4, "gradients_dropped": 3,
                      "aggregated_per_step_min": 2, "aggregated_per_step_max": 2}


def test_without_arrival_orders_every_step_taken_is_applied(tmp_path):
    path = steps_file(tmp_path, [(0, 1, None, None), (1, 1, None, None), (0, 2, None, None)])
    assert mark_aggregated(path, replicas=2, last_step=1)["gradients_applied"] == 2


def test_only_ps_sync_declares_gradients_per_step_and_it_is_r():
    def config(name, **options):
        made = RunConfig(strategy=name, workers=3, ps=1, options=options)
        return validate(made, registry.get(name), registry.all_strategies())

    declared = {name: cls.runs_as.gradients_per_step(config(name)) for name, cls in registry.all_strategies().items()
                if issubclass(cls.runs_as, TfCluster) and (cls.worker_range[1] is None or cls.worker_range[1] >= 3)}
    assert {name for name, r in declared.items() if r} == {"ps-sync"} and declared["ps-sync"] == 3
    assert registry.get("ps-sync").runs_as.gradients_per_step(config("ps-sync", replicas_to_aggregate=2)) == 2
