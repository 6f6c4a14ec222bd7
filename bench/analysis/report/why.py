"""The report's "why" section: per model, worker count (and link, on the emulated cluster), each
strategy's typical step split into compute, communication the compute did not hide, waiting for
other workers and the rest (bench.metrics.STEP_PARTS, as bench.run.process.breakdown medians them),
its model FLOP/s utilization, and one sentence naming the largest part. It reads the records; it
measures nothing."""

from __future__ import annotations

import html as html_lib

import pandas as pd

from bench.analysis.report import plots, sparse, verdict
from bench.analysis.report.html import figure, folded, note, section, table
from bench.metrics import STEP_PARTS, significant
from bench.run.process.breakdown import p50_column

# how a part of the step reads in a sentence
SAID = {"compute_s": "compute", "communication_s": "communication the compute did not hide",
        "waiting_s": "waiting for other workers", "other_s": "host time outside the graph"}
KEY = ["model", "workers", "link_mbit", "variant"]
TEXTS = ("exposed_tensors", "exposed_ps_task")  # bench.analysis.runs.exposure
LINKS_BUSY = ("net_worker_link_utilisation", "net_ps_link_utilisation")  # emulated runs' meters
# Where the link binds (cnn x4 at 100 Mbit/s on the emulated cluster), its busiest link was busy 0.44
# (ring) to 0.57 (ps) of the step's exposed-communication share: one direction at a time in parts of
# an exchange. Below a quarter of it the links idled through most of the exposed time: the exchange
# waited on the hosts' CPUs (cnn x4 at 10 Gbit/s on 2 cores: 0.03).
LINK_BOUND_SHARE = 0.25


def shares(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model, workers, link and strategy variant (repeats' medians averaged): each part's
    share of the typical step, the largest part, and the MFU."""
    runs = runs.assign(link_mbit=runs["link_mbit"] if "link_mbit" in runs else float("nan"))
    columns = [p50_column(p) for p in STEP_PARTS]
    busy = [c for c in LINKS_BUSY if c in runs]
    runs = runs.assign(links_busy=runs[busy].max(axis=1) if busy else float("nan"))
    means = [*columns, "links_busy", *[c for c in ("mfu", "exposed_top_share", "throughput_examples_per_s")
                                        if c in runs]]
    grouped = runs.groupby(KEY, dropna=False)[means].mean()
    total = grouped[columns].sum(axis=1)
    out = grouped.copy()
    for said in [c for c in (*TEXTS, "family") if c in runs]:
        # a repeat's tensors stand for the others (the traced steps of the first that traced)
        out[said] = runs.groupby(KEY, dropna=False)[said].first()
    for part, column in zip(STEP_PARTS, columns, strict=True):
        out[f"{part.removesuffix('_s')}_share"] = grouped[column] / total
    out["largest"] = grouped[columns].idxmax(axis=1).map(dict(zip(columns, STEP_PARTS, strict=True)))
    out["step_ms"] = 1e3 * total
    return out.reset_index()


def sentence(row: pd.Series) -> str:
    where = f"{row['model']} x{int(row['workers'])}" + (
        f" @{row['link_mbit']:g} Mbit/s" if pd.notna(row["link_mbit"]) else "")
    share = row[f"{row['largest'].removesuffix('_s')}_share"]
    text = f"{row['variant']}, {where}: {100 * share:.0f} % of its {significant(row['step_ms'])} ms step is "
    text += SAID[row["largest"]]
    if row["largest"] == "communication_s" and isinstance(row.get("exposed_tensors"), str):
        text += (f", {100 * row['exposed_top_share']:.0f} % of it on {row['exposed_tensors']}"
                 + (f" (ps {row['exposed_ps_task']})" if isinstance(row.get("exposed_ps_task"), str) else ""))
    busy = row.get("links_busy")
    if row["largest"] == "communication_s" and pd.notna(busy) and busy < LINK_BOUND_SHARE * share:
        text += (f"; its busiest link was {100 * busy:.2g} % busy: the exchange waited on the hosts' CPUs, "
                 "not the network")
    if pd.notna(row.get("mfu")):
        text += f"; MFU {100 * row['mfu']:.3g} %"
    return text + "."


# SHORT: a part as the model's sentences and the terminal's line name what a step loses to
SHORT = {"compute_s": "compute", "communication_s": "exposed communication", "waiting_s": "waiting for a worker",
         "other_s": "host time"}


def families(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model (and link), at its largest worker count: the fastest variant of each family, fastest first."""
    many = rows[rows["workers"] > 1].dropna(subset=["throughput_examples_per_s"]) \
        if "throughput_examples_per_s" in rows else rows.iloc[0:0]
    if many.empty or "family" not in many:
        return many
    top = many.groupby(["model", "link_mbit"], dropna=False)["workers"].transform("max")
    many = many[many["workers"] == top].sort_values("throughput_examples_per_s", ascending=False)
    return many.groupby(["model", "link_mbit", "family"], dropna=False, sort=False).head(1)


def share_of(row: pd.Series, part: str) -> float:
    return row[f"{part.removesuffix('_s')}_share"]


def loses_to(row: pd.Series) -> str:
    """The largest part of a row's step, with its share and the step's length."""
    part = row["largest"]
    return f"{SHORT[part]} ({100 * share_of(row, part):.0f} % of {significant(row['step_ms'])} ms)"


def who(row: pd.Series) -> str:
    return f"{row['family']} ({row['variant']})"


def model_sentences(group: pd.DataFrame) -> list[str]:
    """At most three sentences for one model (and link): the fastest family's step and what the others lose to,
    fastest first (`group`: families() rows of one model)."""
    first = group.iloc[0]
    where = f"{first['model']} at {int(first['workers'])} workers" + (
        f", {first['link_mbit']:g} Mbit/s links" if pd.notna(first["link_mbit"]) else "")
    largest = first["largest"]
    mfu = f", {100 * first['mfu']:.0f} % MFU" if pd.notna(first.get("mfu")) else ""
    out = [f"{where}: {who(first)} is fastest; {100 * share_of(first, largest):.0f} % of its "
           f"{significant(first['step_ms'])} ms step is {SAID[largest]}{mfu}."]
    others = group.iloc[1:]
    if len(others):
        out.append("The others lose to " + "; ".join(f"{who(r)}: {loses_to(r)}" for _, r in others.iterrows()) + ".")
        exposed = others[others["largest"].eq("communication_s")]
        if len(exposed) and "exposed_tensors" in exposed and isinstance(exposed.iloc[0].get("exposed_tensors"), str):
            row = exposed.iloc[0]
            first_tensor = row["exposed_tensors"].split(";")[0].strip()
            out.append(f"Of {row['variant']}'s exposed communication, {100 * row['exposed_top_share']:.0f} % is on "
                       f"its top tensors, first {first_tensor}.")
    return out


def slowest_line(group: pd.DataFrame) -> str:
    """Why the slowest family of one model (and link) loses, in one line (the terminal's answer)."""
    last = group.iloc[-1]
    where = f"{last['model']} x{int(last['workers'])}" + (
        f" @{last['link_mbit']:g} Mbit/s" if pd.notna(last["link_mbit"]) else "")
    return (f"{where}, {last['variant']} ({last['family']}): {SHORT[last['largest']]}, "
            f"{100 * share_of(last, last['largest']):.0f} % of a {significant(last['step_ms'])} ms step")


def summaries(verdicts: verdict.Verdicts) -> list[tuple[str, list[str], str]]:
    """Per model (and link, slowest first): the model, its sentences and its slowest family's line (empty without
    split records)."""
    split = clean_split(verdicts.runs)
    table = verdicts.settings
    wide = {(r["model"], r["variant"], r["workers"]) for _, r in table[table["too_wide"]].iterrows()} \
        if len(table) else set()
    split = split[[key not in wide for key in zip(split["model"], split["variant"], split["workers"])]] \
        if wide and len(split) else split
    if split.empty:
        return []
    best = families(shares(split))
    return [(model, model_sentences(group), slowest_line(group))
            for (model, _), group in best.groupby(["model", "link_mbit"], dropna=False, sort=True) if len(group)]


def clean_split(runs: pd.DataFrame) -> pd.DataFrame:
    split = runs[runs["ok"] & (runs["purpose"] == "throughput") & (runs["scenario"] == "clean")] if len(runs) else runs
    return split[split["compute_p50_s"].notna()] if "compute_p50_s" in split else split.iloc[0:0]


def why_section(verdicts: verdict.Verdicts) -> str:
    """Where each strategy's step goes and what it reaches of the peak, per model and worker count."""
    runs = verdicts.runs
    ident, title = "why", "Why it scales as it does"
    split = clean_split(runs)
    if split.empty:
        return section(ident, title, note("No throughput run recorded the split of its steps."))
    rows = shares(split)
    said = "".join(f"<li>{html_lib.escape(' '.join(sentences))}</li>" for _, sentences, _ in summaries(verdicts))
    tables = sparse.sentences(runs)
    behind = note(f"Behind its family's fastest by more than {sparse.SLOWER:g}x on a model with a table, and the "
                  "same two on the dense models: " + " ".join(tables)) if tables else ""
    # one worker alone has nothing to exchange or wait for: its row stays in the table
    lines = "".join(f"<li>{html_lib.escape(sentence(row))}</li>" for _, row in rows.iterrows() if row["workers"] > 1)
    return section(ident, title, f'<ul class="answer">{said}</ul>', behind, folded(
        f"every setting's step, {len(rows)} rows", f'<ul>{lines}</ul>' + table(rows, [
            ("model", "model", "text"), ("workers", "workers", "int"), ("link_mbit", "link Mbit/s", "int"),
            ("variant", "strategy", "text"), ("step_ms", "step ms", "ratio"),
            ("compute_share", "compute", "pct"), ("communication_share", "exposed communication", "pct"),
            ("waiting_share", "waiting", "pct"), ("other_share", "other", "pct"), ("mfu", "MFU", "pct"),
            ("exposed_tensors", "tensors the compute did not hide (traced steps)", "text")], "why-table")), figure(
        plots.breakdown_bars(split),
        "Each strategy's typical step: compute (forward, backward, an update applied locally), communication "
        "the compute did not hide, waiting for other workers, and host time outside the graph (docs/step-time.md)."))
