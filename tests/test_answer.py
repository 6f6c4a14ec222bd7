"""The comparison's answer: verdicts held to what a rerun moves a figure (bench.analysis.report.verdict),
answer.csv and the terminal's lines (bench.analysis.report.answer), the why section's sentences, the order
of a comparison's runs and its rounds, and no MFU above the peak."""

import math

import numpy as np
import pandas as pd
import pytest

from bench.analysis.report import answer, verdict, why
from bench.analysis.report.aggregate import add_scaling_efficiency
from bench.metrics import t975

NO_TENSORFLOW = True


def run(strategy: str, rate: float, workers: int = 4, model: str = "cnn", family: str = "in-graph",
        link: float = math.nan, split: tuple[float, float, float, float] = (0.02, 0.001, 0.0, 0.001),
        window: float = 0.01, baseline: bool = False) -> dict:
    """One ok clean throughput run as collect.load reads it."""
    compute, communication, waiting, other = split
    return {"ok": True, "purpose": "throughput", "scenario": "clean", "strategy": strategy, "variant": strategy,
            "family": family, "model": model, "data": "synthetic", "workers": workers, "ps": 0, "batch_size": 64,
            "options": "{}", "link_mbit": link, "host_cores": math.nan, "scaling_baseline": baseline,
            "asynchronous": False, "throughput_examples_per_s": rate, "throughput_ci95_examples_per_s": window * rate,
            "step_time_p50_s": 0.02, "compute_p50_s": compute, "communication_p50_s": communication,
            "waiting_p50_s": waiting, "other_p50_s": other, "mfu": 0.5, "host": "h", "cpu_model": "Xeon",
            "cpu_count": 2, "cpu_extensions": "avx2"}


def frame(rows: list[dict]) -> pd.DataFrame:
    return add_scaling_efficiency(pd.DataFrame(rows))


def answered(runs: pd.DataFrame) -> tuple[verdict.Verdicts, pd.DataFrame]:
    """The runs folded as a report folds them, and the cells' verdicts from that."""
    folded = verdict.Verdicts.of(runs)
    return folded, verdict.answer(folded)


def test_the_rerun_spread_is_pooled_over_every_setting_that_ran_more_than_once():
    a, b = [100.0, 104.0, 98.0], [50.0, 52.0]
    runs = frame([*(run("single", r, workers=1, baseline=True) for r in a), *(run("mirrored", r) for r in b),
                  run("multi-tower", 70.0)])
    spread = verdict.rerun_spread(runs)
    logs = [np.log(a), np.log(b)]
    squares = sum(float(((x - x.mean()) ** 2).sum()) for x in logs)
    assert (spread.dof, spread.settings) == (3, 2)
    assert spread.sd == pytest.approx(math.sqrt(squares / 3))


def cell(lead: float, spread_share: float, rounds: int = 1) -> pd.Series:
    """The answer's row of a cell whose leader is `lead` times the runner-up, every other cell giving a rerun
    spread of `spread_share`."""
    rows = [run("multi-tower", 1000.0 * lead, window=0.0), run("mirrored", 1000.0, window=0.0)] * rounds
    for model in ("mlp", "embedding"):  # settings run three times: the pooled spread
        rows += [run("single", 100.0 * f, workers=1, model=model, baseline=True)
                 for f in (1 - spread_share, 1.0, 1 + spread_share)]
    table = verdict.answer(verdict.Verdicts.of(frame(rows)))
    return table[(table["model"] == "cnn") & (table["workers"] == 4)].iloc[0]


def test_a_lead_within_what_a_rerun_moves_it_is_a_tie_and_a_clear_lead_is_ahead():
    close, clear = cell(1.08, 0.04), cell(1.25, 0.04)
    # sd 4 % on 4 degrees of freedom, one round each: exp(t975(4) * 0.04 * sqrt(2)) = 1.17
    assert close["threshold"] == pytest.approx(math.exp(t975(4) * 0.04 * math.sqrt(2)), rel=0.01)
    assert (close["verdict"], close["fastest"], close["runner_up"]) == ("tie", "multi-tower", "mirrored")
    assert clear["verdict"] == "ahead" and clear["lead"] == pytest.approx(1.25)
    # more rounds narrow it: the same lead that ties in one round is ahead in five
    assert cell(1.08, 0.04, rounds=5)["verdict"] == "ahead"


def test_without_a_rerun_the_runs_own_windows_set_the_bar():
    table = verdict.answer(verdict.Verdicts.of(frame([run("multi-tower", 1030.0, window=0.02),
                                                      run("mirrored", 1000.0, window=0.02)])))
    row = table.iloc[0]
    assert not verdict.rerun_spread(frame([run("a", 1.0)])).known()
    assert row["threshold"] == pytest.approx(math.exp(math.hypot(0.02, 0.02)))
    assert row["verdict"] == "ahead"


def test_answer_csv_has_its_header_and_a_link_column_only_where_links_vary(tmp_path):
    table = verdict.answer(verdict.Verdicts.of(frame([run("a", 2.0), run("b", 1.0)])))
    answer.write(table, tmp_path)
    assert (tmp_path / "answer.csv").read_text().splitlines()[0] == "model,workers,fastest,runner_up,lead,verdict"
    linked = verdict.answer(verdict.Verdicts.of(frame([run("a", 2.0, link=100.0), run("b", 1.0, link=100.0),
                                   run("a", 1.0, link=1000.0), run("b", 3.0, link=1000.0)])))
    answer.write(linked, tmp_path)
    rows = pd.read_csv(tmp_path / "answer.csv")
    assert list(rows.columns) == ["model", "workers", "fastest", "runner_up", "lead", "verdict", "link"]
    assert rows.set_index("link")["fastest"].to_dict() == {100.0: "a", 1000.0: "b"}
    assert (rows["lead"] >= 1).all()


FAMILIES = (("multi-tower", "in-graph", 4000.0, (0.05, 0.0, 0.0, 0.005)),
            ("allreduce", "allreduce", 2000.0, (0.05, 0.04, 0.0, 0.005)),
            ("ps-sync", "parameter-server", 1000.0, (0.05, 0.01, 0.09, 0.005)),
            ("local-sgd", "parameter-averaging", 3000.0, (0.05, 0.0, 0.0, 0.03)))


def matrix(links: tuple[float, ...] = (math.nan,),
           models: tuple[str, ...] = ("mlp", "cnn", "embedding")) -> pd.DataFrame:
    rows = []
    for model in models:
        rows += [run("single", 1000.0 * f, workers=1, model=model, baseline=True) for f in (0.97, 1.0, 1.03)]
        for link in links:
            for workers in (2, 4):
                rows += [run(name, rate * workers / 4, workers, model, family, link, split)
                         for name, family, rate, split in FAMILIES]
    return frame(rows)


def test_the_terminals_answer_fits_its_lines_of_100_columns_and_names_what_it_must():
    runs = matrix()
    lines = answer.lines(*answered(runs))
    assert len(lines) <= answer.ANSWER_LINES - 1 and all(len(line) <= answer.ANSWER_WIDTH for line in lines)
    text = "\n".join(lines)
    assert "Xeon" in text and "One machine: the ranking is this machine's, not a cluster's." in text
    cells = [line.split() for line in lines if len(line.split()) > 2 and line.split()[1].isdigit()]
    # every cell where both families ran: each family's fastest, allreduce over ps (2000 / 1000), its verdict
    assert len(cells) == 6 and cells[-1][:6] == ["mlp", "4", "multi-tower", "ps-sync", "allreduce", "local-sgd"]
    assert cells[-1][6] == "2.00x" and cells[-1][-1] == "allreduce"
    assert "Scales best" in text and "Fastest strategy per cell: answer.csv" in text
    # many cells (every link of an emulated preset): the largest worker count per model and link, and where the
    # rest are
    many = matrix(links=(100.0, 1000.0, 10000.0))
    lines = answer.lines(*answered(many))
    assert len(lines) <= answer.ANSWER_LINES - 1 and all(len(line) <= answer.ANSWER_WIDTH for line in lines)
    assert "Emulated hosts" in lines[1] and any("families.csv" in line for line in lines)
    assert [line.split()[:3] for line in lines if line.startswith("mlp")] == [["mlp", "4", "0.1"], ["mlp", "4", "1"],
                                                                               ["mlp", "4", "10"]]
    # no cell with both families: every cell's fastest strategy, as before
    towers = frame([r for r in matrix().to_dict("records") if r["family"] != "parameter-server"])
    lines = answer.lines(*answered(towers))
    cells = [line.split() for line in lines if len(line.split()) > 2 and line.split()[1].isdigit()]
    assert len(cells) == 9 and ["mlp", "4", "multi-tower"] == cells[-1][:3]
    assert "Why the slowest family loses" in "\n".join(lines) and "cnn x4, allreduce (allreduce): compute" in lines[-3]


def test_the_why_section_says_at_most_three_sentences_per_model():
    runs = matrix()
    said = why.summaries(verdict.Verdicts.of(runs))
    assert len(said) == 3
    for _, sentences, _ in said:
        assert 1 <= len(sentences) <= 3
    first = said[0][1]
    assert first[0].startswith("cnn at 4 workers: in-graph (multi-tower) is fastest")
    assert "parameter-server (ps-sync): waiting for a worker" in first[1]


def test_a_cells_strategies_run_one_after_the_other_and_every_other_round_backwards():
    from bench.drivers.presets.matrix import plan

    runs = plan(["single", "ps-sync", "allreduce"], ["mlp"], [1, 2, 4], 50, 0, 1, rounds=2)
    throughput = [(r.strategy, r.workers) for r in runs if r.purpose == "throughput"]
    first, second = throughput[: len(throughput) // 2], throughput[len(throughput) // 2:]
    at_two = [s for s, w in first if w == 2]
    assert at_two == ["ps-sync", "allreduce"]
    # a cell's runs are adjacent: its worker count does not change within it
    workers = [w for _, w in first if w > 1]
    assert workers == sorted(workers)
    assert [s for s, w in second if w == 2] == list(reversed(at_two))


def test_rounds_beyond_the_first_go_to_the_family_cell_closest_to_its_bar():
    from bench.analysis.report.families import measured
    from bench.drivers.presets.budget import MOST_ROUNDS
    from bench.drivers.presets.budgeted import closest_first

    rows = matrix(models=("mlp", "cnn")).to_dict("records")
    for row in rows:  # cnn x4: allreduce 1.05 times ps-sync, a verdict near its bar; the others twice
        if (row["model"], row["workers"], row["strategy"]) == ("cnn", 4, "allreduce"):
            row["throughput_examples_per_s"] = 1050.0
    found = measured(verdict.Verdicts.of(frame(rows)))
    order = closest_first(found)
    assert (order.iloc[0]["model"], order.iloc[0]["workers"]) == ("cnn", 4) and len(order) == len(found)
    assert closest_first(found.assign(rounds=MOST_ROUNDS)).empty  # a cell has MOST_ROUNDS at most


def test_a_run_above_its_peak_marks_the_peak_suspect_instead_of_printing_its_mfu():
    from bench.analysis.runs.collect import why_columns

    above = why_columns({"mfu": 1.006, "achieved_tflops": 0.3, "peak_tflops": 0.298})
    assert above["mfu"] is None and above["peak_suspect"] and above["achieved_tflops"] == 0.3
    below = why_columns({"mfu": 0.84})
    assert below["mfu"] == 0.84 and not below["peak_suspect"]


def test_a_peak_measured_on_a_busier_machine_does_not_replace_a_higher_one():
    from bench.infra.peak import keep_highest

    quiet = {"tflops": 0.392, "tensorflow": "2.21.0", "dtype": "float32", "date": "2026-12-05"}
    busy = {**quiet, "tflops": 0.331}
    assert keep_highest(busy, quiet) is quiet and keep_highest(quiet, busy) is quiet
    # another TensorFlow measures its own kernels: its figure replaces the old one
    assert keep_highest({**busy, "tensorflow": "2.22.0"}, quiet)["tflops"] == 0.331


def test_the_tradeoffs_answer_is_the_first_to_the_target_on_each_link(tmp_path):
    def converged(variant: str, family: str, link: float, seconds: float) -> dict:
        return {"ok": True, "purpose": "convergence", "scenario": "clean", "strategy": variant, "variant": variant,
                "family": family, "model": "mlp", "workers": 4, "link_mbit": link, "asynchronous": False,
                "net_worker_sent_per_step": 1e5, "steps_to_target": 300, "steps": 1000, "time_to_target_s": seconds,
                "best_accuracy": 0.95, "target_accuracy": 0.9, "throughput_examples_per_s": 1000.0,
                "cpu_model": "Xeon", "cpu_count": 2, "host": "h"}

    rows = [converged("allreduce", "allreduce", 100.0, s) for s in (3.6, 3.8, 4.0)]
    rows += [converged("ps-async", "parameter-server", 100.0, s) for s in (7.5, 8.0, 8.5)]
    rows += [converged("allreduce", "allreduce", 1000.0, s) for s in (2.0, 2.5, 3.0)]
    rows += [converged("ps-async", "parameter-server", 1000.0, s) for s in (2.2, 2.8, 3.2)]
    table = verdict.answer(verdict.Verdicts.of(pd.DataFrame(rows)))
    assert table.set_index("link")[["fastest", "verdict"]].to_dict("index") == {
        100.0: {"fastest": "allreduce", "verdict": "ahead"}, 1000.0: {"fastest": "allreduce", "verdict": "tie"}}
    assert table.set_index("link").loc[100.0, "lead"] == pytest.approx(8.0 / 3.8)
    lines = answer.lines(verdict.Verdicts.of(pd.DataFrame(rows)), table)
    assert "over 3 seeds" in lines[2] and len(lines) <= answer.ANSWER_LINES - 1


def test_a_budget_counts_from_when_run_bench_began_but_not_from_a_setup_that_built(monkeypatch):
    import time

    from bench.drivers.presets.budget import STARTED_AT, started_at

    monkeypatch.setenv(STARTED_AT, str(time.time() - 4.0))
    assert started_at(lambda: 100.0) == pytest.approx(96.0, abs=0.5)
    monkeypatch.setenv(STARTED_AT, str(time.time() - 90.0))  # a Horovod build came first: not the comparison's
    assert started_at(lambda: 100.0) == 100.0
    monkeypatch.delenv(STARTED_AT)
    assert started_at(lambda: 100.0) == 100.0


def test_a_gpu_allreduce_without_nccl_is_marked_as_going_through_host_memory():
    from bench.analysis.report.sections import headline
    from bench.analysis.runs.collect import device_columns

    on_gpus = {"role": "worker", "tensorflow_gpus": [{"device": "/physical_device:GPU:0"}],
               "collective": "Horovod over MPI, GPU tensors through host memory (no NCCL)"}
    host = device_columns({"worker 0": {**on_gpus, "horovod_built": {"nccl": False, "cuda": False, "mpi": True}}})
    assert host["gpu_tensors_via_host"] and host["horovod_nccl"] is False
    nccl = device_columns({"worker 0": {**on_gpus, "horovod_built": {"nccl": True, "cuda": True}}})
    assert not nccl["gpu_tensors_via_host"]
    on_cpu = device_columns({"worker 0": {"role": "worker", "tensorflow_gpus": [], "horovod_built": {"nccl": False}}})
    assert not on_cpu["gpu_tensors_via_host"] and not device_columns(None)["gpu_tensors_via_host"]
    runs = matrix(models=("mlp",)).assign(gpu_tensors_via_host=False)
    runs.loc[runs["strategy"] == "allreduce", "gpu_tensors_via_host"] = True
    page = headline(*answered(runs))
    assert "Marked: 2 run(s) computed on GPUs with a Horovod built without NCCL" in page


def test_a_run_given_gpus_that_computed_on_the_cpu_as_asked_is_marked():
    from bench.analysis.report.sections import headline
    from bench.analysis.runs.collect import device_columns

    asked = device_columns({"ps 0": {"role": "ps"}, "worker 0": {"role": "worker", "gpus": [0], "tensorflow_gpus": [],
                                                                 "computed_on": "cpu (--on-cpu)"}})
    assert asked["cpu_on_gpu_host"] and not device_columns({"worker 0": {"gpus": []}})["cpu_on_gpu_host"]
    runs = matrix(models=("mlp",)).assign(cpu_on_gpu_host=False)
    runs.loc[runs["strategy"] == "single", "cpu_on_gpu_host"] = True
    folded = verdict.Verdicts.of(runs)
    assert "Marked: 3 run(s) were given GPUs and computed on the CPU, as --on-cpu asked" in headline(
        folded, verdict.answer(folded))


def test_a_strategy_slow_on_the_table_is_told_apart_from_one_slow_everywhere():
    from bench.analysis.report import sparse

    def at(strategy: str, rate: float, model: str, how: str = "allgather") -> dict:
        touched = 900.0 if model == "embedding" else math.nan
        return {**run(strategy, rate, 2, model, "allreduce"), "rows_touched_per_step": touched,
                "sparse_exchange": how if model == "embedding" else None}

    rows = [at("allreduce", 69_400, "embedding"), at("allreduce-tf", 20_800, "embedding", "all-gather"),
            at("allreduce", 194_000, "mlp"), at("allreduce-tf", 58_700, "mlp")]
    said = sparse.sentences(frame(rows))
    assert len(said) == 1 and said[0].startswith("embedding x2: allreduce-tf 0.30x allreduce's")
    assert "on mlp 0.30x: as far behind without a table" in said[0]
    # fast on the dense model, slow only with the table: the table's path is named
    rows[3] = at("allreduce-tf", 180_000, "mlp")
    assert "further behind only with the table" in sparse.sentences(frame(rows))[0]
    rows[1] = at("allreduce-tf", 60_000, "embedding")  # within reach: nothing to say
    assert sparse.sentences(frame(rows)) == []
