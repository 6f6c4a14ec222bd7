"""The report's "Projection" section: what `python -m bench project` wrote (projection.json)
under the report's folders: its calibration and transport profile, the projection with its
intervals, and the checks against the emulated-cluster runs and published tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.analysis.projection.files import PROJECTION_FILE
from bench.analysis.projection.from_runs import summary_line
from bench.analysis.report import plots
from bench.analysis.report.html import figure, note, section, table


def projections(paths: Sequence[Path]) -> list[dict]:
    """What `python -m bench project` wrote under `paths` (each projection.json), in path order."""
    found = sorted({p for root in map(Path, paths) for p in
                    ([Path(root) / PROJECTION_FILE] if (Path(root) / PROJECTION_FILE).is_file()
                     else Path(root).rglob(PROJECTION_FILE))})
    return [json.loads(p.read_text()) for p in found]


def calibrated(paths: Sequence[Path]) -> dict:
    """The first projection under `paths` calibrated from runs (projection.json's content; {} where none)."""
    return next((result for result in projections(paths) if "calibration" in result), {})


def projection_sections(paths: Sequence[Path]) -> list[str]:
    return [projection_section(result, f"projection-{i}" if i else "projection")
            for i, result in enumerate(projections(paths))]


def projection_section(result: dict, ident: str) -> str:
    parts = calibrated_parts(result, ident) if "calibration" in result else cluster_parts(result, ident)
    if result.get("published"):
        parts += published_parts(result["published"], ident)
    return section(ident, "Projection", *parts)


def cluster_parts(result: dict, ident: str) -> list[str]:
    """A cluster described by its devices, hosts and links (python -m bench project --device-examples-per-s)."""
    c = result["cluster"]
    used = result.get("profile") or {}
    return [
        note(f"A cluster described, not run: one device {c['device_examples_per_s']:g} examples/s at batch "
             f"{c['batch_size']}, {c['devices_per_host']} devices per host, {c['intra_host_gbit']:g} Gbit/s "
             f"inside a host, ps variables placed {c['ps_placement']}. Transport profile: "
             f"{used.get('name', '?')} ({used.get('why', '')}). " + interval_sentence(result["projection"])),
        table(pd.DataFrame(result["projection"]), [
            ("model", "model", "text"), ("workers", "devices", "int"), ("hosts", "hosts", "int"),
            ("link_gbit", "link Gbit/s", "ratio"), ("scheme", "scheme", "text"), ("transport", "transport", "text"),
            ("ps", "ps", "int"), ("throughput_examples_per_s", "examples/s", "rate"),
            ("throughput_low", "low", "rate"), ("throughput_high", "high", "rate"),
            ("scaling_efficiency", "efficiency", "pct"), ("compute_s", "compute", "ms"),
            ("exposed_communication_s", "exposed communication", "ms")], f"{ident}-cluster"),
        figure(plots.projected_throughput(pd.DataFrame(result["projection"])),
               "Projected examples/s of the described cluster per scheme and transport; the bars are each "
               f"figure's {level_of(result['projection'])} prediction interval."),
        table(constants_frame(result["constants"]), [("name", "constant", "text"), ("value", "value", "text"),
                                                     ("range", "range", "text"), ("source", "source", "text")],
              f"{ident}-constants"),
    ]


def level_of(rows: list[dict]) -> str:
    """The stated level of a projection's intervals, as a reader reads it ("90 %"); older records had none."""
    found = {r.get("level") for r in rows if r.get("level") is not None}
    return f"{100 * found.pop():g} %" if len(found) == 1 else "min-max"


def interval_sentence(rows: list[dict]) -> str:
    return (f"Each figure's interval is a {level_of(rows)} prediction interval: a new measurement of that "
            "cluster falls inside it that often, given the constants' repetitions or ranges, the device's own "
            "spread and the model's error of form as figures it did not see showed it (docs/projection.md, "
            "\"Reading an interval\").")


def constants_frame(constants: list[dict]) -> pd.DataFrame:
    """Constants of every magnitude (50 us, 64 MB, 0.94), each shown as %g."""
    frame = pd.DataFrame(constants)
    if {"low", "high"} <= set(frame.columns):  # a projection.json written before ranges had none
        frame["range"] = [f"{lo:g}-{hi:g}" if lo != hi else "exact" for lo, hi in zip(frame["low"], frame["high"],
                                                                                       strict=True)]
    frame["value"] = frame["value"].map("{:g}".format)
    return frame


def published_parts(checked: dict, ident: str) -> list[str]:
    """Published figures of a real cluster against the projection's (bench.analysis.projection.published)."""
    rows = pd.DataFrame(checked["rows"])
    s = checked["summary"]
    return [
        table(rows, [("setup", "published setup", "text"), ("model", "model", "text"), ("grade", "grade", "text"),
                     ("published_examples_per_s", "published", "rate"),
                     ("predicted_examples_per_s", "predicted", "rate"), ("predicted_low", "low", "rate"),
                     ("predicted_high", "high", "rate"), ("error", "error", "pct"),
                     ("published_step_s", "published step", "ms"), ("compute_s", "compute", "ms"),
                     ("exposed_communication_s", "predicted exposed communication", "ms")], f"{ident}-published"),
        note(f"Checked against {checked['source']} with profile {checked.get('profile', '?')}: "
             f"{s.get('inside', '?')} of {s['figures']} scored figures inside their "
             f"{level_of(checked['rows'])} intervals; points: median |error| "
             f"{100 * s['median_abs_error']:.0f}%, worst {100 * s['worst_abs_error']:.0f}%; rows graded C (setup "
             "not documented, or the figure moved between versions of its page) and the rows of an alternative "
             "reading of a setup are not counted. Nothing is fitted to these figures."),
    ]


def calibrated_parts(result: dict, ident: str) -> list[str]:
    cal = result["calibration"]
    checked = pd.DataFrame(result.get("validation") or [])
    summary = result.get("validation_summary") or {}
    used = result.get("profile") or {}
    parts = [
        table(pd.DataFrame(cal["models"]), [
            ("model", "model", "text"), ("gradient_bytes", "gradient bytes", "bytes"),
            ("batch_size", "batch/worker", "int"), ("compute_ms", "compute ms/step", "ratio"),
            ("compute_sd_ms", "sd ms", "ratio"), ("compute_from", "from", "text")], f"{ident}-calibration"),
        note(f"Transport profile: {used.get('name', '?')} ({used.get('why', '')}). Each worker a CPU on a host of "
             "its own. " + interval_sentence(result["projection"])),
        figure(plots.projected_throughput(pd.DataFrame(result["projection"])),
               "Projected throughput against workers per scheme and transport; the bars are each figure's "
               f"{level_of(result['projection'])} prediction interval."),
        table(pd.DataFrame(result["winners"]), [
            ("model", "model", "text"), ("workers", "workers", "int"), ("link_gbit", "link Gbit/s", "ratio"),
            ("fastest", "fastest", "text"), ("fastest_examples_per_s", "examples/s", "rate"),
            ("fastest_synchronous", "fastest synchronous", "text"),
            ("fastest_synchronous_examples_per_s", "examples/s", "rate")], f"{ident}-winners"),
        note("ps hosts above which a ps exchange beats the ring (BytePS, section 4): " + ", ".join(
            f"{c['workers']} workers: {c['ps_hosts_to_beat_ring']:.1f}" for c in result["crossover"])),
        table(constants_frame(result["constants"]), [("name", "constant", "text"), ("value", "value", "text"),
                                                     ("range", "range", "text"), ("source", "source", "text")],
              f"{ident}-constants"),
    ]
    if len(checked):
        parts += [table(checked, [
            ("model", "model", "text"), ("variant", "strategy", "text"), ("workers", "workers", "int"),
            ("ps", "ps", "int"), ("link_mbit", "link Mbit/s", "int"),
            ("measured_examples_per_s", "measured", "rate"), ("predicted_examples_per_s", "predicted", "rate"),
            ("predicted_low", "low", "rate"), ("predicted_high", "high", "rate"), ("error", "error", "pct"),
            *[(f"{side}_{term}_s", f"{term} ms, {side}", "ms") for term in ("compute", "communication", "waiting")
              for side in ("predicted", "measured")]], f"{ident}-validation"),
            note("Checked against emulated-cluster runs, each interval's model error from the other figures: "
                 f"{summary_line(summary)}.")]
    else:
        parts.append(note("No emulated-cluster run to check the model against (./run_bench.sh network)."))
    return parts
