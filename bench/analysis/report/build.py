"""summary.csv and report.html from a set of run folders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.analysis.report import aggregate, answer, families, verdict
from bench.analysis.report.html import note, page
from bench.analysis.report.projection import calibrated
from bench.analysis.runs import collect
from bench.analysis.runs.columns import NETWORK_COLUMNS, SUMMARY_COLUMNS

ANSWER_TEXT = "answer.txt"  # the terminal's answer, which a preset prints at its end


def summary_frame(paths: Sequence[Path], earlier: pd.DataFrame | None = None) -> pd.DataFrame:
    """The runs under `paths` with their scaling efficiency, and their ratio to the `earlier` runs'."""
    runs = collect.load(paths)
    if runs.empty:
        return runs
    runs = aggregate.add_scaling_efficiency(runs)
    if earlier is not None:
        runs = aggregate.add_baseline(runs, earlier)
    return runs


def write_report(paths: Sequence[Path], out_dir: Path, baseline: Sequence[Path] | None = None,
                 remark: str = "", notes: Sequence[str] = ()) -> Path:
    """summary.csv, answer.csv, families.csv, the terminal's answer (with `notes`, what the preset says of its
    sizing) and report.html, into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    earlier = aggregate.add_scaling_efficiency(collect.load(baseline)) if baseline else None
    runs = summary_frame(paths, earlier)
    emulated = "link_mbit" in runs and runs["link_mbit"].notna().any()
    columns = [c for c in SUMMARY_COLUMNS + (NETWORK_COLUMNS if emulated else []) if c in runs] + \
        (["throughput_vs_baseline"] if "throughput_vs_baseline" in runs else [])
    table = runs[columns] if not runs.empty else pd.DataFrame(columns=SUMMARY_COLUMNS)
    table.to_csv(out_dir / "summary.csv", index=False)
    verdicts = verdict.answer(runs) if not runs.empty else pd.DataFrame(columns=verdict.ANSWER_COLUMNS)
    answer.write(verdicts, out_dir)
    projected = calibrated(paths)
    found = families.both(runs, projected) if not runs.empty else pd.DataFrame(columns=families.COLUMNS)
    families.write(found, out_dir)
    said = answer.lines(runs, verdicts, found, projected.get("profile") or {}, notes) \
        if len(verdicts) or len(found) else []
    (out_dir / ANSWER_TEXT).write_text("\n".join(said) + "\n" if said else "")
    html_path = out_dir / "report.html"
    html_path.write_text(render(runs, paths, remark, earlier, verdicts, found))
    return html_path


def machines(runs: pd.DataFrame) -> str:
    """The machines the runs ran on, as a time is compared: CPU model, its vector extensions, cores."""
    if runs.empty or "cpu_model" not in runs:
        return ""
    found = runs[["cpu_model", "cpu_count", *(["cpu_extensions"] if "cpu_extensions" in runs else [])]]
    said = []
    for _, row in found.dropna(subset=["cpu_model"]).drop_duplicates().iterrows():
        extensions = row.get("cpu_extensions")
        known = extensions if isinstance(extensions, str) and extensions else "extensions not recorded"
        cores = f", {row['cpu_count']:g} cores" if pd.notna(row["cpu_count"]) else ""
        said.append(f"{row['cpu_model']} ({known}){cores}")
    if not said:
        return ""
    return f"Machine: {'; '.join(said)}. "


def render(runs: pd.DataFrame, paths: Sequence[Path], remark: str, earlier: pd.DataFrame | None = None,
           verdicts: pd.DataFrame | None = None, found: pd.DataFrame | None = None) -> str:
    from bench.analysis.report import sections
    from bench.analysis.report.agreement import agreement_section

    intro = note(f"{len(runs)} runs from {', '.join(map(str, paths))}. {machines(runs)}{remark}".strip())
    from bench.analysis.report.overhead import overhead_sections
    from bench.analysis.report.projection import projection_sections

    micro = [*sections.micro_sections(paths), *projection_sections(paths), *overhead_sections(paths)]
    if runs.empty:
        return page("distbench report", intro, [*micro] or [note("No run folders found.")])
    compared = [agreement_section(runs, earlier)] if earlier is not None and not earlier.empty else []
    return page("distbench report", intro, [*compared, *sections.all_sections(runs, verdicts, found), *micro])

