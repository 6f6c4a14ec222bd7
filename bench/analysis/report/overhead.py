"""The report's "Harness overhead" section: each strategy's throughput through distbench as a
fraction of its bare loop's, from the overhead benchmark's folders (overhead-*/overhead.csv)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.analysis.report.html import note, section, table
from bench.analysis.runs.overhead_table import PAIRS_FILE, read, summarize

EXPLAINED = ("Each strategy through distbench against a minimal loop written for it in "
             "bench/drivers/overhead/bare (same model, batch, optimizer and processes, no records), the two "
             "alternated; ratio = distbench's examples/s / the bare loop's, median and range over the "
             "repeats (1.0: the harness costs nothing). Command: python -m bench overhead.")


def overhead_sections(paths: Sequence[Path]) -> list[str]:
    out = []
    for folder in sorted({p.parent for root in map(Path, paths) for p in Path(root).rglob(PAIRS_FILE)}):
        pairs = read(folder)
        if pairs.empty:
            continue
        out.append(section(f"overhead-{folder.name}", f"Harness overhead ({folder.name})", note(EXPLAINED),
                           table(summarize(pairs), [
                               ("strategy", "strategy", "text"), ("repeats", "pairs", "int"),
                               ("bare_examples_per_s", "bare loop examples/s", "rate"),
                               ("harness_examples_per_s", "distbench examples/s", "rate"),
                               ("ratio_median", "ratio (median)", "fraction"), ("ratio_min", "min", "fraction"),
                               ("ratio_max", "max", "fraction")], f"overhead-table-{folder.name}")))
    return out
