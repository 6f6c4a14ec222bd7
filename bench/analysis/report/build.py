"""summary.csv and report.html from a set of run folders."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.analysis.report import aggregate, answer, convergence_answer, families, verdict
from bench.analysis.report.html import note, page, section
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
                 remark: str = "", notes: Sequence[str] = (), appendix: tuple[str, Sequence[str]] = ("", ())) -> Path:
    """summary.csv, answer.csv, families.csv, convergence.csv, the terminal's answer (with `notes`, what the preset
    says of its sizing) and report.html, into `out_dir`: `remark` on top, then the answer; `appendix` (how the
    preset sized its runs, and the runs it left out) at the end."""
    out_dir.mkdir(parents=True, exist_ok=True)
    earlier = aggregate.add_scaling_efficiency(collect.load(baseline)) if baseline else None
    runs = summary_frame(paths, earlier)
    emulated = "link_mbit" in runs and runs["link_mbit"].notna().any()
    columns = [c for c in SUMMARY_COLUMNS + (NETWORK_COLUMNS if emulated else []) if c in runs] + \
        (["throughput_vs_baseline"] if "throughput_vs_baseline" in runs else [])
    table = runs[columns] if not runs.empty else pd.DataFrame(columns=SUMMARY_COLUMNS)
    table.to_csv(out_dir / "summary.csv", index=False)
    verdicts = verdict.Verdicts.of(runs)  # once per report: every section reads it
    cells = verdict.answer(verdicts) if not runs.empty else pd.DataFrame(columns=verdict.ANSWER_COLUMNS)
    answer.write(cells, out_dir)
    projected = calibrated(paths)
    found = families.both(verdicts, projected) if not runs.empty else pd.DataFrame(columns=families.COLUMNS)
    families.write(found, out_dir)
    convergence_answer.write(verdicts.convergence, out_dir)
    said = answer.lines(verdicts, cells, found, projected.get("profile") or {}, notes) \
        if len(cells) or len(found) else []
    (out_dir / ANSWER_TEXT).write_text("\n".join(said) + "\n" if said else "")
    html_path = out_dir / "report.html"
    html_path.write_text(render(verdicts, paths, remark, earlier, cells, found, appendix))
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


def left_out_section(appendix: tuple[str, Sequence[str]]) -> list[str]:
    """The preset's sizing and the runs it left out, at the report's end (none where it said neither)."""
    sizing, lines = appendix
    if not sizing and not lines:
        return []
    listed = f"<ul>{''.join(f'<li>{html.escape(line)}</li>' for line in lines)}</ul>" if lines else ""
    return [section("left-out", "How the runs were sized, and what was left out", note(sizing) if sizing else "",
                    listed)]


def render(verdicts: verdict.Verdicts, paths: Sequence[Path], remark: str, earlier: pd.DataFrame | None = None,
           cells: pd.DataFrame | None = None, found: pd.DataFrame | None = None,
           appendix: tuple[str, Sequence[str]] = ("", ())) -> str:
    from bench.analysis.report import sections
    from bench.analysis.report.agreement import agreement_section

    runs = verdicts.runs
    intro = note(f"{len(runs)} runs from {', '.join(map(str, paths))}. {machines(runs)}{remark}".strip())
    from bench.analysis.report.overhead import overhead_sections
    from bench.analysis.report.projection import projection_sections

    micro = [*sections.micro_sections(paths), *projection_sections(paths), *overhead_sections(paths)]
    end = left_out_section(appendix)
    if runs.empty:
        return page("distbench report", intro, [*micro, *end] or [note("No run folders found.")])
    compared = [agreement_section(verdicts, verdict.Verdicts.of(earlier))] \
        if earlier is not None and not earlier.empty else []
    parts = sections.all_sections(verdicts, cells, found)
    return page("distbench report", intro, [*parts[:1], *compared, *parts[1:], *micro, *end])

