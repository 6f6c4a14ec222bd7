"""summary.csv and report.html from a set of run folders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.report import aggregate, collect
from bench.report.html import note, page

RUN_COLUMNS = [
    ("run_id", "run", "text"), ("strategy", "strategy", "text"), ("model", "model", "text"),
    ("data", "data", "text"), ("workers", "workers", "int"), ("batch_size", "batch/worker", "int"),
    ("status", "status", "text"), ("throughput_examples_per_s", "examples/s", "rate"),
    ("throughput_ci95_examples_per_s", "± 95% CI", "rate"), ("scaling_efficiency", "scaling eff.", "pct"),
    ("step_time_p50_s", "p50 step ms", "ms"), ("step_time_p99_s", "p99 step ms", "ms"),
    ("final_accuracy", "final acc.", "acc"), ("bytes_sent_per_worker_per_step", "sent/worker/step", "bytes"),
]
SUMMARY_COLUMNS = [c for c, *_ in RUN_COLUMNS] + [
    "purpose", "ps", "steps", "optimizer", "lr", "options", "step_time_p90_s", "best_accuracy",
    "target_accuracy", "time_to_target_s", "steps_to_target", "gradient_bytes_per_step", "staleness_mean_steps",
    "gradients_dropped", "lost_workers", "scenario", "variant", "straggler", "kill_worker",
    "startup_s", "started_at", "host", "suite_commit", "path"]
# runs on the emulated cluster (bench.emulated) add these
NETWORK_COLUMNS = [
    "link_mbit", "net_worker_sent_per_step", "net_worker_predicted_sent_per_step", "net_worker_received_per_step",
    "net_worker_predicted_received_per_step", "net_ps_sent_per_step", "net_ps_received_per_step",
    "net_ps_predicted_received_per_step", "net_ps_link_utilisation", "net_worker_link_utilisation"]


def summary_frame(paths: Sequence[Path], baseline: Sequence[Path] | None = None) -> pd.DataFrame:
    runs = collect.load(paths)
    if runs.empty:
        return runs
    runs = aggregate.add_scaling_efficiency(runs)
    if baseline:
        runs = aggregate.add_baseline(runs, aggregate.add_scaling_efficiency(collect.load(baseline)))
    return runs


def write_report(paths: Sequence[Path], out_dir: Path, baseline: Sequence[Path] | None = None,
                 remark: str = "") -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = summary_frame(paths, baseline)
    emulated = "link_mbit" in runs and runs["link_mbit"].notna().any()
    columns = [c for c in SUMMARY_COLUMNS + (NETWORK_COLUMNS if emulated else []) if c in runs] + \
        (["throughput_vs_baseline"] if "throughput_vs_baseline" in runs else [])
    runs[columns].to_csv(out_dir / "summary.csv", index=False) if not runs.empty else \
        pd.DataFrame(columns=SUMMARY_COLUMNS).to_csv(out_dir / "summary.csv", index=False)
    html_path = out_dir / "report.html"
    html_path.write_text(render(runs, paths, remark))
    return html_path


def render(runs: pd.DataFrame, paths: Sequence[Path], remark: str) -> str:
    from bench.report import sections

    intro = note(f"{len(runs)} runs from {', '.join(map(str, paths))}. {remark}".strip())
    micro = sections.micro_sections(paths)
    if runs.empty:
        return page("distbench report", intro, [*micro] or [note("No run folders found.")])
    return page("distbench report", intro, [*sections.all_sections(runs), *micro])

