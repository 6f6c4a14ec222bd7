"""The report's section on recovery (--recover): what each restart cost each strategy
(bench.metrics defines downtime, steps lost and time lost)."""

from __future__ import annotations

import pandas as pd

from bench.analysis.report.html import note, section, table

COLUMNS = [
    ("variant", "strategy", "text"), ("failure", "what died", "text"), ("recovered_by", "recovered by", "text"),
    ("recoveries", "recoveries", "int"), ("recovery_downtime_s", "downtime (s)", "s"),
    ("recovery_steps_lost", "steps lost", "int"), ("recovery_time_lost_s", "time lost (s)", "s"),
    ("throughput_examples_per_s", "examples/s", "rate"), ("status", "status", "text")]


def recovery_section(runs: pd.DataFrame) -> str:
    """One row per run started with --recover, by strategy and by what was killed."""
    tried = runs[runs["recover"].fillna(False).astype(bool)].copy()
    tried["failure"] = [f"ps {str(ps).split('@')[0]}" if isinstance(ps, str) else
                        f"worker {str(w).split('@')[0]}" if isinstance(w, str) else "none"
                        for ps, w in zip(tried["kill_ps"], tried["kill_worker"], strict=True)]
    return section("recovery", "Recovery", note(
        "Runs started with --recover and one process killed halfway. A dead worker of a parameter-server "
        "strategy is restarted into the running job (where the workers only serve a coordinator, TensorFlow's "
        "coordinator takes the restarted server back and meanwhile runs its functions on the others); anything "
        "else restarts the whole job from its latest checkpoint, and a strategy that saves none is not "
        "recovered. Downtime: from the "
        "failure to the first step of what was restarted. Steps lost: global steps done again. Time lost: from "
        "the failure until the run was past the global step it had reached (a ps-async run goes on meanwhile, "
        "with one worker fewer). No downtime: the restarted process had not ended a step when the run did."),
        table(tried.sort_values(["variant", "failure"]), COLUMNS, "recovery-table"))
