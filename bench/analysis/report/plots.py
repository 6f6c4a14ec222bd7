"""Figures as inline SVG (matplotlib), so report.html needs no other file and no network."""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import hsv_to_rgb, to_hex, to_rgb  # noqa: E402

from bench.analysis.runs.micro_summary import COLLECTIVES  # noqa: E402
from bench.metrics import ALLREDUCE_OP, COPY_OP, measured_steps  # noqa: E402
from bench.run.contract import ALLREDUCE, IN_GRAPH, PARAMETER_AVERAGING, PARAMETER_SERVER  # noqa: E402
from bench.run.process.breakdown import PARTS, p50_column, per_worker_medians  # noqa: E402
from bench.run.process.summary import read_evals, read_steps  # noqa: E402
from strategies import registry  # noqa: E402

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "distbench", "figure.dpi": 96,
                     "axes.grid": True, "grid.alpha": 0.3, "font.size": 9})


# a family's hue on the colour circle (its strategies a shade each, darkest first), so that a reader tells the
# families apart at a glance: green, blue, red, purple
FAMILY_HUES = {IN_GRAPH: 0.33, PARAMETER_SERVER: 0.58, ALLREDUCE: 0.0, PARAMETER_AVERAGING: 0.78}
MARKERS = ("o", "s", "^", "D", "v", "P")  # a strategy's within its family: no two series drawn alike


def _strategy_of(name: str) -> str | None:
    """The registered strategy a series is named after (a variant starts with its strategy's name), or None."""
    known = sorted(registry.all_strategies(), key=len, reverse=True)
    return next((s for s in known if name == s or name.startswith(f"{s} ") or name.startswith(f"{s}(")), None)


def _family_members(family: str) -> list[str]:
    return sorted(n for n in registry.all_strategies() if registry.get(n).family == family)


def _color(name: str) -> str:
    """The same colour for a strategy (or a variant of it, or a micro-benchmark transport) in every plot and report:
    a strategy a shade of its family's hue; the collectives take the palette in order (its greys left out: they
    read as the axes and text)."""
    strategy = _strategy_of(name)
    family = registry.get(strategy).family if strategy else None
    if family in FAMILY_HUES:
        members = _family_members(family)
        step = members.index(strategy) / max(1, len(members) - 1)  # 0 for the first, 1 for the last
        return to_hex(hsv_to_rgb((FAMILY_HUES[family], 0.9 - 0.45 * step, 0.45 + 0.45 * step)))
    palette = [c for c in plt.rcParams["axes.prop_cycle"].by_key()["color"]
               if max(to_rgb(c)) - min(to_rgb(c)) > 0.1]
    index = COLLECTIVES.index(name) if name in COLLECTIVES else zlib.crc32(name.encode())
    return palette[index % len(palette)]


def _marker(name: str) -> str:
    """A strategy's marker: its place among its family's strategies (a variant: its strategy's)."""
    strategy = _strategy_of(name)
    if strategy is None:
        return MARKERS[0]
    return MARKERS[_family_members(registry.get(strategy).family).index(strategy) % len(MARKERS)]


def _style(name: str) -> dict[str, str]:
    return {"color": _color(name), "marker": _marker(name)}


def svg(fig: plt.Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def per_model(models: list[str], draw: Callable[[plt.Axes, str], None], height: float = 3.2) -> str:
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), height), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        draw(ax, model)
        ax.set_title(model)
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(fontsize=7, loc="best")
    return svg(fig)


def throughput_vs_workers(settings: pd.DataFrame) -> str:
    thr = settings[settings["purpose"] == "throughput"]

    def draw(ax: plt.Axes, model: str) -> None:
        rows = thr[thr["model"] == model]
        base = rows[rows["scaling_baseline"].fillna(False).astype(bool) & (rows["workers"] == 1)]
        # what scaling efficiency divides by (aggregate.baseline_throughput): its own runs' efficiency is 1 against it
        base = (base["throughput_examples_per_s"] / base["scaling_efficiency"]).dropna()
        for strategy, group in rows.groupby("strategy"):
            group = group.sort_values("workers")
            ax.errorbar(group["workers"], group["throughput_examples_per_s"],
                        yerr=group["throughput_ci95_examples_per_s"].fillna(0), capsize=3,
                        label=strategy, **_style(strategy))
        if len(base):
            ns = np.array(sorted(rows["workers"].unique()))
            ax.plot(ns, ns * base.iloc[0], "k--", linewidth=1, label=f"ideal (n x {registry.baseline()})")
        ax.set_xlabel("workers")
        ax.set_ylabel("examples/s (95% CI)")
        ax.set_xticks(sorted(rows["workers"].unique()))

    return per_model(sorted(thr["model"].unique()), draw)


def efficiency_vs_workers(settings: pd.DataFrame) -> str:
    thr = settings[(settings["purpose"] == "throughput") & settings["scaling_efficiency"].notna()]

    def draw(ax: plt.Axes, model: str) -> None:
        rows = thr[thr["model"] == model]
        for strategy, group in rows.groupby("strategy"):
            group = group.sort_values("workers")
            ax.plot(group["workers"], group["scaling_efficiency"], label=strategy, **_style(strategy))
        ax.axhline(1.0, color="k", linestyle="--", linewidth=1)
        ax.set_xlabel("workers")
        ax.set_ylabel("scaling efficiency")
        ax.set_xticks(sorted(rows["workers"].unique()) if len(rows) else [1])

    return per_model(sorted(thr["model"].unique()) or ["mlp"], draw)


def mfu_vs_workers(settings: pd.DataFrame) -> str:
    """Model FLOP/s utilization against workers, per model and strategy (throughput runs)."""
    thr = settings[(settings["purpose"] == "throughput") & settings["mfu"].notna()] if "mfu" in settings else \
        settings.iloc[0:0]

    def draw(ax: plt.Axes, model: str) -> None:
        rows = thr[thr["model"] == model]
        for strategy, group in rows.groupby("strategy"):
            group = group.sort_values("workers")
            ax.plot(group["workers"], 100 * group["mfu"], label=strategy, **_style(strategy))
        ax.set_xlabel("workers")
        ax.set_ylabel("MFU, % of peak")
        ax.set_ylim(bottom=0)
        ax.set_xticks(sorted(rows["workers"].unique()) if len(rows) else [1])

    return per_model(sorted(thr["model"].unique()) or ["mlp"], draw)


def loss_curves(runs: pd.DataFrame) -> str:
    """Training loss against global step and against wall time (mean over workers per step)."""
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(10, 3.2))
    for _, run in runs.iterrows():
        steps = read_steps(run["path"], missing_ok=True)
        if steps.empty:
            continue
        curve = steps.groupby("global_step").agg(loss=("loss", "mean"), t=("t_end_s", "max"))
        smooth = curve["loss"].rolling(10, min_periods=1).mean()
        by_step.plot(curve.index, smooth, label=run["strategy"], color=_color(run["strategy"]))
        by_time.plot(curve["t"] - (run.get("startup_s") or 0.0), smooth, label=run["strategy"],
                     color=_color(run["strategy"]))
    by_step.set_xlabel("global step")
    by_time.set_xlabel("seconds since the first training step")
    for ax in (by_step, by_time):
        ax.set_ylabel("training loss (10-step mean)")
    by_time.legend(fontsize=7)
    return svg(fig)


def accuracy_vs_time(runs: pd.DataFrame, target: float | None) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for _, run in runs.iterrows():
        evals = read_evals(run["path"], missing_ok=True)
        if evals.empty:
            continue
        ax.plot(evals["wall_s"] - (run.get("startup_s") or 0.0), evals["accuracy"], marker=".", label=run["strategy"],
                color=_color(run["strategy"]))
    if target:
        ax.axhline(target, color="k", linestyle="--", linewidth=1, label=f"target {target:g}")
    ax.set_xlabel("seconds since the first training step")
    ax.set_ylabel("validation accuracy")
    ax.legend(fontsize=7)
    return svg(fig)


def step_time_boxes(runs: pd.DataFrame) -> str:
    """Step-time distribution of each strategy at its largest worker count, per model."""
    thr = runs[(runs["purpose"] == "throughput") & runs["ok"]]

    def draw(ax: plt.Axes, model: str) -> None:
        rows = thr[thr["model"] == model]
        data, labels = [], []
        for strategy, group in rows.groupby("strategy"):
            run = group.sort_values("workers").iloc[-1]
            steps = read_steps(run["path"], missing_ok=True)
            if steps.empty:  # a run folder without its steps.csv
                continue
            steps = measured_steps(steps, int(run["warmup_steps"]))
            data.append((steps["t_end_s"] - steps["t_start_s"]).to_numpy() * 1000)
            labels.append(f"{strategy}\nx{int(run['workers'])}")
        if data:
            ax.boxplot(data, showfliers=False)
            ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
        ax.set_ylabel("step time (ms), whiskers 1.5 IQR")

    return per_model(sorted(thr["model"].unique()) or ["mlp"], draw, height=3.6)


PART_COLOURS = {"compute_s": "#4c72b0", "communication_s": "#dd8452", "waiting_s": "#c44e52", "other_s": "#bbbbbb"}


def _stacked(ax: plt.Axes, labels: list[str], seconds: pd.DataFrame) -> None:
    """Horizontal bars, one per label, stacked by the parts of bench.run.process.breakdown (ms)."""
    left = np.zeros(len(labels))
    for part in PARTS:
        values = seconds[part].to_numpy(dtype=float) * 1000
        ax.barh(range(len(labels)), values, left=left, color=PART_COLOURS[part],
                label=part.removesuffix("_s"))
        left += np.nan_to_num(values)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (median)")


def _run_label(run: pd.Series) -> str:
    label = f"{run['variant']} x{int(run['workers'])}"
    if pd.notna(run.get("link_mbit")):
        label += f" @{run['link_mbit']:g} Mbit/s"
    if run.get("scenario", "clean") != "clean":
        label += f" ({run['scenario']})"
    return label


def breakdown_bars(runs: pd.DataFrame) -> str:
    """Per model: each strategy variant and worker count, its typical worker's step split."""
    def draw(ax: plt.Axes, model: str) -> None:
        rows = runs[runs["model"] == model].sort_values(["variant", "workers", "scenario"])
        seconds = rows[[p50_column(p) for p in PARTS]].set_axis(list(PARTS), axis=1)
        _stacked(ax, [_run_label(run) for _, run in rows.iterrows()], seconds)

    models = sorted(runs["model"].unique())
    return per_model(models, draw, height=0.8 + 0.22 * runs.groupby("model").size().max())


def per_worker_breakdown(runs: pd.DataFrame) -> str:
    """One panel per run: each worker's step split, so a straggler (its compute) and the
    workers waiting for it stand out."""
    fig, axes = plt.subplots(1, len(runs), figsize=(3.6 * len(runs), 0.9 + 0.3 * runs["workers"].max()),
                             squeeze=False)
    for ax, (_, run) in zip(axes[0], runs.iterrows(), strict=True):
        medians = per_worker_medians(Path(run["path"]), int(run["warmup_steps"] or 0))
        _stacked(ax, [f"worker {w}" for w in medians.index], medians)
        title = f"{_run_label(run)}, {run['model']}"
        if run.get("straggler"):
            title += f"\nstraggler {run['straggler']}"
        ax.set_title(title, fontsize=8)
    axes[0][-1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    return svg(fig)


def staleness_histogram(runs: pd.DataFrame) -> str:
    """One panel per model; in it one line per run: the share of its steps at each staleness
    (lines, not bars, so that runs of several worker counts stay readable together)."""
    models = sorted(runs["model"].unique())
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3), squeeze=False, sharey=True)
    several = runs["strategy"].nunique() > 1
    for ax, model in zip(axes[0], models, strict=True):
        for _, run in runs[runs["model"] == model].sort_values(["strategy", "workers"]).iterrows():
            steps = read_steps(run["path"], missing_ok=True)
            if steps.empty or steps["staleness_steps"].isna().all():
                continue
            values = steps["staleness_steps"].dropna().astype(int)
            share = values.value_counts(normalize=True).sort_index()
            label = f"{run['strategy']} " if several else ""
            purpose = f", {run['purpose']}" if run.get("purpose", "throughput") != "throughput" else ""
            ax.plot(share.index, share.to_numpy(), marker="o", markersize=3,
                    label=f"{label}x{int(run['workers'])}{purpose} (mean {values.mean():.1f})")
        ax.set_title(model)
        ax.set_xlabel("staleness (updates by others)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("share of steps")
    return svg(fig)


def bandwidth_vs_size(table: pd.DataFrame) -> str:
    """Bus bandwidth against message size per transport; the memory copy drawn as the ceiling."""
    counts = sorted(table.loc[table["kind"] == ALLREDUCE_OP, "processes"].unique()) or [1]
    fig, axes = plt.subplots(1, len(counts), figsize=(5 * len(counts), 3.4), squeeze=False)
    for ax, n in zip(axes[0], counts, strict=True):
        rows = table[(table["processes"] == n) | (table["kind"] != ALLREDUCE_OP)]
        for (transport, kind), group in rows.groupby(["transport", "kind"]):
            group = group.sort_values("bytes")
            style = {"color": "k", "linestyle": "--"} if kind == COPY_OP else {"color": _color(transport)}
            ax.plot(group["bytes"], group["busbw_gb_per_s"], marker="o", label=transport, **style)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(f"allreduce at {n} processes; ps and copy as measured")
        ax.legend(fontsize=7)
    return svg(fig)


def throughput_vs_link(table: pd.DataFrame) -> str:
    def draw(ax: plt.Axes, model: str) -> None:
        for variant, group in table[table["model"] == model].groupby("variant"):
            group = group.sort_values("link_mbit")
            ax.errorbar(group["link_mbit"], group["throughput_examples_per_s"],
                        yerr=group["throughput_ci95_examples_per_s"].fillna(0), capsize=3,
                        label=variant, **_style(variant),
                        linestyle="--" if variant.endswith("2 ps") else "-")
        ax.set_xscale("log")
        ax.set_xlabel("link Mbit/s (each host, each way)")
        ax.set_ylabel("examples/s (95% CI)")

    return per_model(sorted(table["model"].unique()), draw)


def time_to_target_vs_link(table: pd.DataFrame) -> str:
    """One line per variant: mean time to target (every seed reached it) against the link cap."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for variant, group in table[table["all_reached"]].groupby("variant"):
        group = group.sort_values("link_mbit")
        mean, ci = group["time_to_target_s"], group["time_to_target_ci95"].fillna(0)
        # over 3 seeds a t interval can be wider than the mean; a time is never below 0, and the
        # axis is logarithmic, so the lower bar stops short of it
        ax.errorbar(group["link_mbit"], mean, yerr=[ci.clip(upper=0.9 * mean), ci],
                    capsize=3, label=variant, **_style(variant))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("link Mbit/s (each host, each way)")
    ax.set_ylabel("seconds to target (95% CI, log)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no variant reached the target in every run", transform=ax.transAxes, ha="center")
    return svg(fig)


def accuracy_vs_bytes(table: pd.DataFrame) -> str:
    """One point per variant and link: best accuracy against the bytes a worker sent in the run."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for variant, group in table.groupby("variant"):
        ax.errorbar(group["bytes_per_run"] / 2**20, group["best_accuracy"],
                    yerr=group["best_accuracy_ci95"].fillna(0), linestyle="none", capsize=3,
                    label=variant, **_style(variant))
    if table["target_accuracy"].notna().any():
        ax.axhline(table["target_accuracy"].iloc[0], color="k", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("MiB one worker sent over the run")
    ax.set_ylabel("best validation accuracy")
    ax.legend(fontsize=7, loc="best")
    return svg(fig)


def ps_link_utilisation(table: pd.DataFrame) -> str:
    ps = table[table["net_ps_link_utilisation"].notna()]

    def draw(ax: plt.Axes, model: str) -> None:
        for variant, group in ps[ps["model"] == model].groupby("variant"):
            group = group.sort_values("link_mbit")
            ax.plot(group["link_mbit"], 100 * group["net_ps_link_utilisation"], label=variant, **_style(variant))
        ax.set_xscale("log")
        ax.set_ylim(0, 105)
        ax.set_xlabel("link Mbit/s")
        ax.set_ylabel("ps link utilisation %")

    return per_model(sorted(ps["model"].unique()) or sorted(table["model"].unique()), draw)


def projected_throughput(table: pd.DataFrame) -> str:
    """Projected examples/s against workers: a row per model, a panel per link; colour: scheme
    (and transport, for a described cluster), dashed: a quarter as many ps tasks as workers
    (solid: one); error bars: each figure's interval, where it has one."""
    models, links = sorted(table["model"].unique()), sorted(table["link_gbit"].unique())
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    keyed = table.assign(line=table["scheme"] + (", " + table["transport"] if "transport" in table else ""),
                         rule=table["ps_rule"] if "ps_rule" in table else "")
    colours = {line: palette[i % len(palette)] for i, line in enumerate(sorted(keyed["line"].unique()))}
    fig, axes = plt.subplots(len(models), len(links), figsize=(3.2 * len(links), 2.8 * len(models)),
                             squeeze=False, sharey="row")
    for r, model in enumerate(models):
        for c, gbit in enumerate(links):
            ax = axes[r][c]
            rows = keyed[(keyed["model"] == model) & (keyed["link_gbit"] == gbit)]
            for (line, rule), group in rows.groupby(["line", "rule"]):
                group = group.sort_values("workers")
                mid = group["throughput_examples_per_s"]
                style = {"marker": ".", "color": colours[line], "linestyle": "--" if rule == "n/4" else "-",
                         "label": f"{line}{f', {rule} ps' if rule else ''}"}
                if "throughput_low" in group:
                    ax.errorbar(group["workers"], mid, yerr=[mid - group["throughput_low"],
                                                             group["throughput_high"] - mid], capsize=2, **style)
                else:
                    ax.plot(group["workers"], mid, **style)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{model}, {gbit:g} Gbit/s", fontsize=9)
            ax.set_xlabel("workers")
            if c == 0:
                ax.set_ylabel("projected examples/s")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(5, len(labels)), fontsize=7,
               bbox_to_anchor=(0.5, 1.02 + 0.03 / len(models)))
    if "level" in table and table["level"].notna().any():
        fig.text(0.99, 0.005, f"bars: {100 * table['level'].dropna().iloc[0]:g} % prediction intervals",
                 ha="right", va="bottom", fontsize=7)
    return svg(fig)
