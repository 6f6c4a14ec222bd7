"""The sections of report.html, in reading order."""

from __future__ import annotations

import html as html_lib

import pandas as pd

from bench.analysis.projection.levels import DEFAULT_LEVEL
from bench.analysis.report import aggregate, answer, convergence_answer, families, plots, verdict
from bench.analysis.report.html import figure, folded, note, section, table
from bench.analysis.runs.columns import RUN_COLUMNS
from bench.metrics import significant
from bench.run.process.summary import read_steps
from strategies import registry


def micro_sections(paths) -> list[str]:
    """The communication micro-benchmarks found under `paths` (micro-*/micro-summary.csv)."""
    from pathlib import Path

    from bench.analysis.runs.micro_summary import SUMMARY_FILE, best_fractions, one_tensor

    out = []
    for folder in sorted({p.parent for root in map(Path, paths) for p in Path(root).rglob(SUMMARY_FILE)}):
        sweep = one_tensor(pd.read_csv(folder / SUMMARY_FILE))
        if sweep.empty:
            continue
        best = best_fractions(sweep)
        out.append(section(f"micro-{folder.name}", f"Communication micro-benchmarks ({folder.name})",
                           figure(plots.bandwidth_vs_size(sweep),
                                  "busbw as NCCL's tests define it: allreduce algbw x 2(n-1)/n; ps round trip "
                                  "2 x algbw; copy algbw. Dashed: single-process memory copy."),
                           table(best, [("transport", "transport", "text"), ("processes", "processes", "int"),
                                        ("busbw_gb_per_s", "best busbw GB/s", "ratio"),
                                        ("fraction_of_mpi4py_best", "of mpi4py's best", "pct")],
                                 f"micro-table-{folder.name}")))
    return out


def all_sections(verdicts: verdict.Verdicts, cells: pd.DataFrame | None = None, found: pd.DataFrame | None = None
                 ) -> list[str]:
    """Every section of the report on `verdicts`' runs, the answer's first (`cells`: verdict.answer's table,
    `found`: families.both's; each computed from `verdicts` where not given)."""
    from bench.analysis.report.checkpoints import checkpoints_section
    from bench.analysis.report.network import network_section
    from bench.analysis.report.recovery import recovery_section
    from bench.analysis.report.tradeoffs import tradeoffs_section
    from bench.analysis.report.why import why_section

    runs = verdicts.runs
    emulated = runs["link_mbit"].notna() if "link_mbit" in runs else pd.Series(False, index=runs.index)
    converging = emulated & (runs["purpose"] == "convergence")
    plain = runs[~emulated]
    ok = plain[plain["ok"]]
    settings = aggregate.settings(plain)
    convergence = ok[ok["purpose"] == "convergence"]
    cells = verdict.answer(verdicts) if cells is None else cells
    on_one_machine = [
        throughput(settings),
        efficiency(settings, plain),
        convergence_section(convergence),
        time_to_accuracy(convergence),
        time_split(ok),
        step_times(plain),
        staleness(ok[ok["asynchronous"].fillna(False).astype(bool)]),
        *([stragglers(plain)] if (plain["scenario"] != "clean").any() else []),
    ] if len(plain) else []
    found = families.measured(verdicts) if found is None else found
    return [
        *([family_answer(found, verdicts.convergence)] if len(found) or len(verdicts.convergence) else []),
        *([headline(verdicts, cells)] if len(cells) else []),
        *on_one_machine,
        why_section(verdicts),
        *([network_section(runs[emulated & ~converging])] if (emulated & ~converging).any() else []),
        *([tradeoffs_section(runs[converging])] if converging.any() else []),
        *([recovery_section(runs)] if runs.get("recover", pd.Series(dtype=bool)).fillna(False).astype(bool).any()
          else []),
        *([checkpoints_section(runs)] if runs.get("checkpoints", pd.Series(dtype=float)).fillna(0).gt(0).any()
          else []),
        failures(runs[~runs["ok"]]),
        run_table(runs),  # the long tables last
        environment(runs),
    ]


def family_answer(found: pd.DataFrame, converging: pd.DataFrame) -> str:
    """Parameter servers or allreduce: the family answer measured here and projected (families.py), and on time to
    accuracy (convergence_answer.py)."""
    columns = [("model", "model", "text"), ("workers", "workers", "int"), ("link_gbit", "link Gbit/s", "ratio"),
               ("verdict", "verdict", "text"), ("ratio", "allreduce / ps", "ratio"), ("low", "low", "ratio"),
               ("high", "high", "ratio"), ("parameter_servers", "parameter servers", "text"),
               ("allreduce", "allreduce", "text")]
    here = found[found["source"] == families.MEASURED]
    there = found[found["source"] == families.PROJECTED]
    parts = []
    if len(here):
        parts += [table(here, [*columns[:2], *columns[3:], ("needs", "ratio needed", "ratio"),
                               ("in_graph", "in-graph towers", "text"),
                               ("parameter_averaging", "parameter averaging", "text"), ("rounds", "rounds", "int")],
                        "families-measured"),
                  note("Measured on these machines: each family's fastest strategy per cell, and allreduce's "
                       "examples/s over the parameter servers' (the better of each family). low and high: the ratio "
                       "over and times the ratio a verdict needs (the rerun rule of the next table); a family is "
                       "ahead only where both are on its side of 1, else tie.")]
    if len(there):
        parts += [table(there, [*columns, ("widest_term", "widens it most", "text"),
                                ("turns_on", "turns on", "text"), ("break_even", "break-even", "sci"),
                                ("ahead_below", "ahead below it", "text")], "families-projected"),
                  note("Projected by python -m bench project from these runs to a cluster of hosts like this one, "
                       "each worker a CPU device of its own: the fastest ps scheme against the fastest allreduce "
                       f"scheme by their points; low and high: the {100 * DEFAULT_LEVEL:g} % interval of their ratio "
                       "over the same joint draws of the profile's constants, so a constant both read moves both. "
                       "Where it holds 1, the constant the ratio moves with most and the value at which the two "
                       "meet (its break-even, the other constants at their values): which family is ahead below it "
                       "(docs/projection.md, \"Where the answer turns\"; the Projection section below).")]
    parts += [note(f"The same rows are {families.FAMILIES_FILE} beside this report.")] if parts else []
    return section("families", "The answer: parameter servers or allreduce?", *parts,
                   *convergence_answer.html_parts(converging))


def headline(verdicts: verdict.Verdicts, cells: pd.DataFrame) -> str:
    """The answer: every cell's fastest strategy, its lead and whether a rerun would keep it (verdict.py)."""
    runs = verdicts.runs
    links = "link" in cells
    said = [*answer.machine(runs), answer.spread_line(verdicts, cells)] if len(cells) else []
    via_host = int(runs["gpu_tensors_via_host"].fillna(False).astype(bool).sum()) \
        if "gpu_tensors_via_host" in runs else 0
    on_cpu = int(runs["cpu_on_gpu_host"].fillna(False).astype(bool).sum()) if "cpu_on_gpu_host" in runs else 0
    wide = verdict.unranked(verdicts)
    return section("headline", "Fastest strategy per model and worker count",
                   *[note(line) for line in said], table(cells, [
        ("model", "model", "text"), ("workers", "workers", "int"), *([("link", "link Mbit/s", "int")] if links else []),
        ("fastest", "fastest", "text"), ("verdict", "verdict", "text"), ("lead", "lead over runner-up", "ratio"),
        ("threshold", "lead needed to be ahead", "ratio"), ("runner_up", "runner-up", "text"),
        ("throughput_examples_per_s", "examples/s", "rate"), ("throughput_ci95_examples_per_s", "± 95% CI (windows)",
                                                                 "rate"),
        ("rounds", "rounds", "int")], "headline-table"),
        note("Synthetic data, same model, optimizer and per-worker batch for every strategy. \"ahead\": the lead "
             "exceeds the 95 % bound of what a rerun moves the ratio of two strategies' throughputs on this machine "
             "(the spread between runs of one setting, pooled over the settings that ran more than once; "
             "docs/presets.md, \"What a verdict's interval covers\"); \"tie\": it does not. The same table is "
             "answer.csv beside this report."),
        *([note(f"Not ranked, their 95 % interval beyond ±{verdict.WIDE_SHARE:.0%} of the figure: "
                f"{'; '.join(wide)}.")] if wide else []),
        *([note(f"Marked: {via_host} run(s) computed on GPUs with a Horovod built without NCCL, so their allreduce "
                "copied GPU tensors to host memory and reduced them there: no GPU user runs Horovod so, and it "
                "handicaps allreduce (./run_bench.sh setup --gpu with nvcc builds it with NCCL; docs/gpus.md). "
                "Their collective is in the run table.")] if via_host else []),
        *([note(f"Marked: {on_cpu} run(s) were given GPUs and computed on the CPU, as --on-cpu asked: their figures "
                "are the CPU's (docs/gpus.md).")] if on_cpu else []),
        *([note("On one machine every worker shares its cores, so in-graph towers win here by avoiding processes "
                "and copies; parameter servers against allreduce, here and projected to a cluster, is the first "
                "section; links between hosts are the network preset's.")] if not links else []))


def throughput(settings: pd.DataFrame) -> str:
    if settings.empty or not (settings["purpose"] == "throughput").any():
        return section("throughput", "Throughput against workers", note("No throughput runs."))
    return section("throughput", "Throughput against workers", figure(
        plots.throughput_vs_workers(settings),
        "Error bars: 95% confidence interval of the mean (over repeats, or over the run's time windows "
        f"for a single run). Dashed: n times the 1-worker {registry.baseline()} baseline (the median of its runs)."))


def efficiency(settings: pd.DataFrame, runs: pd.DataFrame) -> str:
    if settings.empty or settings["scaling_efficiency"].isna().all():
        return section("scaling", "Scaling efficiency",
                       note(f"Needs a 1-worker {registry.baseline()} run of the same model."),
                       utilization(settings, runs))
    return section("scaling", "Scaling efficiency", figure(
        plots.efficiency_vs_workers(settings),
        f"throughput / (workers x 1-worker {registry.baseline()} throughput, the median of its runs, same model and "
        "per-worker batch)"), utilization(settings, runs))


def utilization(settings: pd.DataFrame, runs: pd.DataFrame) -> str:
    """MFU against workers, or why there is none."""
    suspect = int(runs["peak_suspect"].fillna(False).astype(bool).sum()) if "peak_suspect" in runs else 0
    above = note(f"Peak suspect: {suspect} run(s) computed faster than the recorded peak allows, so the peak is "
                 "wrong for them (measured while the machine was busier, or in another precision); their MFU is not "
                 "shown. ./run_bench.sh peak on an idle machine keeps the highest rate it measures.") if suspect else ""
    if "mfu" not in settings or settings["mfu"].isna().all():
        return above + note("No model FLOP/s utilization: no peak was measured on this machine (./run_bench.sh "
                            "peak), or the runs predate it.")
    return above + figure(plots.mfu_vs_workers(settings),
                  "Model FLOP/s utilization: the model's forward and backward FLOPs per example (counted once, "
                  "as the projection counts them) times examples/s, over the peak FLOP/s of the devices the run "
                  "used (float32 matrix products of this TensorFlow on this machine, ./run_bench.sh peak, or "
                  "--peak-tflops). On one machine every worker shares the one peak.")


def run_table(runs: pd.DataFrame) -> str:
    columns = list(RUN_COLUMNS)
    if "throughput_vs_baseline" in runs:
        columns.append(("throughput_vs_baseline", "vs baseline", "ratio"))
    return section("runs", "Every run", folded(f"{len(runs)} runs: the rows of summary.csv",
                                               table(runs, columns, "runs-table")))


def convergence_section(runs: pd.DataFrame) -> str:
    if runs.empty:
        return section("convergence", "Convergence", note("No convergence runs."))
    target = runs["target_accuracy"].dropna().iloc[0] if runs["target_accuracy"].notna().any() else None
    return section("convergence", "Convergence",
                   figure(plots.loss_curves(runs), "Training loss (mean over the workers' batches of a step)."),
                   figure(plots.accuracy_vs_time(runs, target),
                          "Validation accuracy against seconds since each run's first training step; "
                          "start-up (process start, imports, setup) is left out and listed in the next table."))


def time_to_accuracy(runs: pd.DataFrame) -> str:
    return section("time-to-accuracy", "Time to target accuracy", table(runs, [
        ("run_id", "run", "text"), ("strategy", "strategy", "text"), ("workers", "workers", "int"),
        ("target_accuracy", "target", "acc"), ("time_to_target_s", "seconds", "s"),
        ("steps_to_target", "global steps", "int"), ("startup_s", "start-up s", "s"),
        ("best_accuracy", "best acc.", "acc"), ("final_accuracy", "final acc.", "acc")], "tta-table"),
        note("Seconds from the run's first training step; start-up (from the launcher's start to that step) "
             "is its own column. – : never reached."))


def step_times(runs: pd.DataFrame) -> str:
    if not (runs["ok"] & (runs["purpose"] == "throughput")).any():
        return section("step-times", "Step-time distributions", note("No throughput runs."))
    return section("step-times", "Step-time distributions", figure(
        plots.step_time_boxes(runs), "Each strategy at its largest worker count; post-warm-up steps."))


def time_split(runs: pd.DataFrame) -> str:
    """Where step time goes (bench.run.process.breakdown): per strategy and worker count, and per worker."""
    ident, title = "breakdown", "Where step time goes"
    runs = runs[runs["compute_p50_s"].notna()] if "compute_p50_s" in runs else runs.iloc[0:0]
    if runs.empty:
        return section(ident, title, note("No run recorded the split of its steps."))
    typical = runs[runs["purpose"] == "throughput"]
    typical = typical if len(typical) else runs
    multi = runs[runs["workers"] > 1]
    # the per-worker view: runs with a straggler, else each variant at its largest worker count
    chosen = multi[multi["straggler"].notna()] if multi["straggler"].notna().any() else \
        multi.sort_values("workers").groupby("variant").tail(1)
    parts = [figure(plots.breakdown_bars(typical),
                    "Median ms per step of a typical worker (each part's median, averaged over workers): "
                    "compute (forward, backward, an update applied locally), communication (gradients and "
                    "parameters moving), waiting (for other workers), other (host time outside the graph)."),
             folded(f"the split of {len(typical)} runs, in ms", table(typical, [
                 ("variant", "strategy", "text"), ("model", "model", "text"),
                             ("workers", "workers", "int"), ("compute_p50_s", "compute ms", "ms"),
                             ("communication_p50_s", "communication ms", "ms"), ("waiting_p50_s", "waiting ms", "ms"),
                             ("other_p50_s", "other ms", "ms"), ("slowest_worker", "slowest worker", "int"),
                             ("slowest_compute_ratio", "its compute / others'", "ratio"),
                             ("waiting_caused_s", "waiting it caused ms", "ms"),
                             ("throughput_without_slowest_examples_per_s", "examples/s without it", "rate")],
                   "breakdown-table"))]
    costly = slowest_sentences(runs)
    if costly:
        parts.insert(0, f'<ul class="answer">{costly}</ul>')
    if len(chosen):
        parts.append(figure(plots.per_worker_breakdown(chosen.head(6)),
                            "Each worker's median split: a straggler shows as one long compute bar, the "
                            "workers that wait for it as long waiting bars."))
    return section(ident, title, *parts)


SLOWEST_MATTERS = 0.05  # a slowest worker is named where the others' pace would have been this much faster


def slowest_sentence(row: pd.Series) -> str:
    """What a synchronous run's slowest worker cost it, in one sentence."""
    gain = row["throughput_without_slowest_examples_per_s"] / row["throughput_examples_per_s"] - 1
    return (f"{row['variant']} {row['model']} x{row['workers']}: worker {int(row['slowest_worker'])} is the slowest "
            f"(its compute {row['slowest_compute_ratio']:.2f}x the others'); the others waited "
            f"{1e3 * row['waiting_caused_s']:.3g} ms per step for it in all, and at their pace the run would have "
            f"made {significant(row['throughput_without_slowest_examples_per_s'])} examples/s "
            f"(+{100 * gain:.0f} %).")


def slowest_sentences(runs: pd.DataFrame) -> str:
    """A sentence for every synchronous run whose slowest worker cost it SLOWEST_MATTERS or more."""
    if "throughput_without_slowest_examples_per_s" not in runs:
        return ""
    known = runs[runs["throughput_without_slowest_examples_per_s"].notna() & runs["throughput_examples_per_s"].gt(0)]
    costly = known[known["throughput_without_slowest_examples_per_s"]
                   >= (1 + SLOWEST_MATTERS) * known["throughput_examples_per_s"]]
    return "".join(f"<li>{html_lib.escape(slowest_sentence(row))}</li>" for _, row in costly.iterrows())


def staleness(runs: pd.DataFrame) -> str:
    if runs.empty:
        return section("staleness", "Staleness", note("No run of an asynchronous strategy."))
    return section("staleness", f"Staleness ({', '.join(sorted(runs['strategy'].unique()))})", figure(
        plots.staleness_histogram(runs), "Updates applied by other workers while a worker computed its own."))


def failures(runs: pd.DataFrame) -> str:
    return section("failed", "Failed runs", table(runs, [
        ("run_id", "run", "text"), ("strategy", "strategy", "text"), ("model", "model", "text"),
        ("workers", "workers", "int"), ("status", "status and reason", "text")], "failed-table"))


def environment(runs: pd.DataFrame) -> str:
    cols = ["host", "cpu_model", "cpu_count", "gpus", "python", "tensorflow", "horovod", "mpi", "suite_commit"]
    present = [c for c in cols if c in runs]
    env = runs[present].drop_duplicates()
    return section("environment", "Environment", table(env, [(c, c, "text") for c in present], "env-table"),
                   note(f"{len(env)} distinct environment(s) across {len(runs)} runs: "
                        f"{html_lib.escape(', '.join(sorted(runs['host'].dropna().unique())))}"))


def stragglers(runs: pd.DataFrame) -> str:
    """Per strategy variant: throughput with a straggler as a fraction of without, time to
    accuracy with and without, and how a run with a killed worker ended."""
    rows = []
    for variant, group in runs.groupby("variant"):
        clean, slow = _pick(group, "clean", "throughput"), _pick(group, "straggler", "throughput")
        row = {"variant": variant,
               "clean": clean["throughput_examples_per_s"].mean() if clean["ok"].any() else None,
               "straggler": slow["throughput_examples_per_s"].mean() if slow["ok"].any() else None}
        row["fraction"] = row["straggler"] / row["clean"] if row["clean"] and row["straggler"] else None
        tta_clean, tta_slow = _pick(group, "clean", "convergence"), _pick(group, "straggler", "convergence")
        row["tta_clean"] = tta_clean["time_to_target_s"].mean() if len(tta_clean) else None
        row["tta_straggler"] = tta_slow["time_to_target_s"].mean() if len(tta_slow) else None
        row["kill"] = kill_outcome(group[group["scenario"] == "kill"])
        rows.append(row)
    frame = pd.DataFrame(rows)
    return section("stragglers", "Stragglers and failures", table(frame, [
        ("variant", "strategy", "text"), ("clean", "examples/s", "rate"),
        ("straggler", "with one 3x straggler", "rate"), ("fraction", "fraction kept", "pct"),
        ("tta_clean", "time to target (s)", "s"), ("tta_straggler", "… with straggler", "s"),
        ("kill", "one worker killed", "text")], "stragglers-table"),
        note("fraction kept: throughput with the straggler / without. A killed worker either leaves the run "
             "to finish with the others, or fails it; seconds from the kill to the end of the run."))


def _pick(group: pd.DataFrame, scenario: str, purpose: str) -> pd.DataFrame:
    return group[(group["scenario"] == scenario) & (group["purpose"] == purpose)]


def kill_outcome(runs: pd.DataFrame) -> str:
    if runs.empty:
        return ""
    run = runs.iloc[0]
    if run["ok"]:
        if not run["lost_workers"]:
            return "finished: the worker ended before the step it was to die at"
        return f"finished without {run['lost_workers']}"
    if "hung" in str(run["status"]):
        return "HUNG (ended by the stall detector)"
    steps = read_steps(run["path"], missing_ok=True)
    worker = int(str(run["kill_worker"]).split("@")[0]) if run["kill_worker"] else 1
    last = steps.loc[steps["worker"] == worker, "t_end_s"].max() if len(steps) else None
    if run["ended_s"] is not None and last is not None and not pd.isna(last):
        return f"failed fast: {run['ended_s'] - last:.1f} s after the kill"
    return "failed"
