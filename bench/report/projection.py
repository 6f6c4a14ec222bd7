"""The report's "Projection" section: what `python -m bench project` wrote (projection.json)
under the report's folders: its calibration, the projection, and the check against the
emulated-cluster runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.report import plots
from bench.report.html import figure, note, section, table

PROJECTION_FILE = "projection.json"


def projection_sections(paths: Sequence[Path]) -> list[str]:
    found = sorted({p for root in map(Path, paths) for p in
                    ([Path(root) / PROJECTION_FILE] if (Path(root) / PROJECTION_FILE).is_file()
                     else Path(root).rglob(PROJECTION_FILE))})
    return [projection_section(json.loads(p.read_text()), f"projection-{i}" if i else "projection")
            for i, p in enumerate(found)]


def projection_section(result: dict, ident: str) -> str:
    cal = result["calibration"]
    checked = pd.DataFrame(result.get("validation") or [])
    summary = result.get("validation_summary") or {}
    latency = "; ".join(f"{k}: {v * 1e6:.1f} us per message ({cal['latency_from'][k]})"
                        for k, v in cal["latency_s"].items())
    parts = [
        table(pd.DataFrame(cal["models"]), [
            ("model", "model", "text"), ("gradient_bytes", "gradient bytes", "bytes"),
            ("batch_size", "batch/worker", "int"), ("compute_ms", "compute ms/step", "ratio"),
            ("compute_sd_ms", "sd ms", "ratio"), ("compute_from", "from", "text")], f"{ident}-calibration"),
        note(f"Latency: {latency}. Allreduce framework overhead per step: "
             f"{cal.get('ring_overhead_s', 0) * 1e3:.2f} ms. Bandwidth: the link's."),
        figure(plots.projected_throughput(pd.DataFrame(result["projection"])),
               "Projected throughput against workers; darker lines: faster links. Each worker on its own host."),
        table(pd.DataFrame(result["winners"]), [
            ("model", "model", "text"), ("workers", "workers", "int"), ("link_gbit", "link Gbit/s", "ratio"),
            ("fastest", "fastest", "text"), ("fastest_examples_per_s", "examples/s", "rate"),
            ("fastest_synchronous", "fastest synchronous", "text"),
            ("fastest_synchronous_examples_per_s", "examples/s", "rate")], f"{ident}-winners"),
        note("ps hosts above which a ps exchange beats the ring (BytePS, section 4): " + ", ".join(
            f"{c['workers']} workers: {c['ps_hosts_to_beat_ring']:.1f}" for c in result["crossover"])),
    ]
    if len(checked):
        parts += [table(checked, [
            ("model", "model", "text"), ("variant", "strategy", "text"), ("workers", "workers", "int"),
            ("ps", "ps", "int"), ("link_mbit", "link Mbit/s", "int"),
            ("measured_examples_per_s", "measured", "rate"), ("predicted_examples_per_s", "predicted", "rate"),
            ("error", "error", "pct"),
            *[(f"{side}_{term}_s", f"{term} ms, {side}", "ms") for term in ("compute", "communication", "waiting")
              for side in ("predicted", "measured")]], f"{ident}-validation"),
            note(f"Checked against {summary['settings']} emulated-cluster settings left out of the calibration: "
                 f"median |error| {100 * summary['median_abs_error']:.0f}%, worst "
                 f"{100 * summary['worst_abs_error']:.0f}%.")]
    else:
        parts.append(note("No emulated-cluster run to check the model against (./run_bench.sh network)."))
    return section(ident, "Projection", *parts)
