"""The report's "Network" section: runs on the emulated cluster, across link caps."""

from __future__ import annotations

import pandas as pd

from bench.analysis.report import aggregate, plots
from bench.analysis.report.aggregate import overlaps_best
from bench.analysis.report.html import figure, note, section, table
from bench.analysis.runs.collect import GROUP_KEY
from bench.run.contract import ALLREDUCE, PARAMETER_SERVER


def network_variant(row: pd.Series) -> str:
    """The declared variant, with its ps task count where it has ps tasks (1 and 2 ps are two lines)."""
    variant = str(row["variant"] if pd.notna(row.get("variant")) else row["strategy"])
    return f"{variant} {int(row['ps'])} ps" if row.get("ps") else variant


def settings(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, link, variant): throughput folded over repeats, traffic means."""
    ok = runs[runs["ok"]]
    if ok.empty:
        return ok
    folded = aggregate.settings(ok)
    traffic = [c for c in ok if c.startswith("net_")]
    means = ok.groupby(GROUP_KEY, dropna=False)[traffic].mean().reset_index()
    folded = folded.merge(means, on=GROUP_KEY, how="left")
    folded["variant"] = folded.apply(network_variant, axis=1)
    return folded


def verdicts(table_: pd.DataFrame) -> pd.DataFrame:
    """Per model and link: the best ps variant against the best allreduce variant."""
    rows = []
    for (model, link), group in table_.groupby(["model", "link_mbit"]):
        ps = group[group["family"] == PARAMETER_SERVER]
        ar = group[group["family"] == ALLREDUCE]
        if ps.empty or ar.empty:
            continue
        best_ps = ps.loc[ps["throughput_examples_per_s"].idxmax()]
        best_ar = ar.loc[ar["throughput_examples_per_s"].idxmax()]
        faster, slower = (best_ps, best_ar) if best_ps["throughput_examples_per_s"] >= \
            best_ar["throughput_examples_per_s"] else (best_ar, best_ps)
        rows.append({"model": model, "link_mbit": link, "best_ps": best_ps["variant"],
                     "ps_examples_per_s": best_ps["throughput_examples_per_s"],
                     "ps_ci95": best_ps.get("throughput_ci95_examples_per_s"), "best_allreduce": best_ar["variant"],
                     "allreduce_examples_per_s": best_ar["throughput_examples_per_s"],
                     "allreduce_ci95": best_ar.get("throughput_ci95_examples_per_s"),
                     "ps_over_allreduce": best_ps["throughput_examples_per_s"] / best_ar["throughput_examples_per_s"],
                     # the report's rule: a winner only when its 95% interval clears the other's
                     "tie": bool(overlaps_best(faster, slower))})
    return pd.DataFrame(rows)


def headline(verdict: pd.DataFrame) -> str:
    """Per model and link: which family's best variant wins and by how much, or a tie when their
    95% intervals overlap (the report's rule for a fastest strategy)."""
    lines = []
    for model, group in verdict.groupby("model"):
        parts = []
        for r in group.sort_values("link_mbit").itertuples():
            ratio = f"ps / allreduce {r.ps_over_allreduce:.2f}: {r.best_ps} vs {r.best_allreduce}"
            winner = "tie" if r.tie else ("parameter servers" if r.ps_over_allreduce > 1 else "allreduce")
            parts.append(f"{r.link_mbit:g} Mbit/s {winner} ({ratio})")
        lines.append(f"{model}: {'; '.join(parts)}.")
    return " ".join(lines)


def network_section(runs: pd.DataFrame) -> str:
    table_ = settings(runs)
    if table_.empty:
        return section("network", "Network", note("No emulated-cluster run finished."))
    for role in ("worker", "ps"):
        table_[f"{role}_sent_vs_formula"] = (table_[f"net_{role}_sent_per_step"]
                                             / table_[f"net_{role}_predicted_sent_per_step"])
    table_ = table_.sort_values(["model", "link_mbit", "variant"])
    verdict = verdicts(table_)
    workers = ", ".join(str(int(w)) for w in sorted(table_["workers"].unique()))
    return section(
        "network", "Network",
        note(f"Each worker and each ps on its own emulated host (a network namespace), every host's link capped "
             f"each way with tc tbf; {workers} workers. Bytes are read from the hosts' interface counters over "
             f"the measured (post-warm-up) steps, TCP/IP headers and control traffic included."),
        *([note(headline(verdict))] if not verdict.empty else []),
        figure(plots.throughput_vs_link(table_),
               "Throughput against each host's link bandwidth (log scale); error bars: 95% CI."),
        table(verdict, [
            ("model", "model", "text"), ("link_mbit", "link Mbit/s", "int"), ("best_ps", "best ps", "text"),
            ("ps_examples_per_s", "examples/s", "rate"), ("ps_ci95", "± 95% CI", "rate"),
            ("best_allreduce", "best allreduce", "text"), ("allreduce_examples_per_s", "examples/s", "rate"),
            ("allreduce_ci95", "± 95% CI", "rate"), ("ps_over_allreduce", "ps / allreduce", "ratio")],
              "network-verdict-table"),
        figure(plots.ps_link_utilisation(table_),
               "The busiest ps host's link: bytes in its busier direction per second / the cap."),
        table(table_, [
            ("model", "model", "text"), ("link_mbit", "link Mbit/s", "int"), ("variant", "strategy", "text"),
            ("throughput_examples_per_s", "examples/s", "rate"), ("throughput_ci95_examples_per_s", "± 95% CI", "rate"),
            ("net_worker_sent_per_step", "worker sent/step", "bytes"),
            ("net_worker_predicted_sent_per_step", "formula", "bytes"),
            ("worker_sent_vs_formula", "measured / formula", "ratio"),
            ("net_worker_received_per_step", "worker received/step", "bytes"),
            ("net_ps_received_per_step", "ps received/step", "bytes"),
            ("net_ps_predicted_received_per_step", "formula", "bytes"),
            ("net_ps_link_utilisation", "ps link use", "pct"),
            ("net_worker_link_utilisation", "worker link use", "pct")], "network-table"),
        note("Formulas (bench/metrics.py). D = dense gradient bytes, T = embedding table bytes, u = distinct "
             "table rows a worker's batch touches (measured on its batches), r = bytes of a row, i = 4: a ps worker "
             "sends D + u(r + 2i) and receives D + ur per step, and a ps task takes its share of every worker's; "
             "ring allreduce sends and receives 2(n-1)/n x (D + T) per rank (T only when the table goes dense); "
             "the allgather of the touched rows (n-1) x u(r + i) more. Image models have T = 0."))
