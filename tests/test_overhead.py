"""The harness-overhead benchmark: its bookkeeping (fast) and one real pair end to end (slow).
No test asserts a speed: the ratios are the benchmark's output, not a pass condition."""

import pandas as pd
import pytest

from bench.analysis.runs.overhead_table import ratio, summarize, text
from bench.drivers.overhead.pairs import PAIRS, by_strategy
from strategies import registry
from tests.processes import PRESET_LIMIT_S, bench


def test_every_pair_is_a_strategy_with_a_bare_loop_and_the_same_job():
    import importlib

    for pair in PAIRS:
        assert pair.strategy in registry.all_strategies()
        importlib.import_module(f"bench.drivers.overhead.bare.{pair.bare}")
        harness = pair.harness_argv("out")
        bare = pair.bare_argv("out")
        # both sides train the same model, batch, steps and optimizer
        for flag, value in (("--model", pair.model), ("--batch-size", str(pair.batch_size)),
                            ("--steps", str(pair.steps)), ("--optimizer", pair.optimizer), ("--lr", str(pair.lr))):
            assert harness[harness.index(flag) + 1] == value == bare[bare.index(flag) + 1]
    assert [p.strategy for p in by_strategy(["ps-sync", "single"])] == ["ps-sync", "single"]


def test_unknown_strategy_is_refused_with_one_line():
    done = bench("overhead", "--strategies", "single,nonesuch")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "nonesuch" in done.stderr


def test_summary_is_the_median_and_range_of_each_strategys_ratios():
    pairs = pd.DataFrame({"strategy": ["b", "a", "b", "b"], "repeat": [0, 0, 1, 2], "first": ["bare"] * 4,
                          "bare_examples_per_s": [100.0, 50.0, 100.0, 100.0],
                          "harness_examples_per_s": [90.0, 50.0, 99.0, 95.0]})
    pairs["ratio"] = [ratio(h, b) for h, b in zip(pairs["harness_examples_per_s"], pairs["bare_examples_per_s"])]
    table = summarize(pairs)
    assert table["strategy"].tolist() == ["b", "a"]  # the order they were measured in
    b = table.iloc[0]
    assert (b["repeats"], b["ratio_median"], b["ratio_min"], b["ratio_max"]) == (3, 0.95, 0.9, 0.99)
    assert "0.950" in text(table)


@pytest.mark.slow
def test_one_pair_end_to_end_and_in_the_report(tmp_path):
    done = bench("overhead", "--strategies", "single", "--repeats", "2", "--scale", "0.1", "--output", str(tmp_path),
                 timeout=PRESET_LIMIT_S)  # two pairs of short runs
    assert done.returncode == 0, done.stderr[-3000:]
    folder = next(tmp_path.glob("overhead-*"))
    pairs = pd.read_csv(folder / "overhead.csv")
    assert len(pairs) == 2 and pairs["first"].tolist() == ["bare", "distbench"]
    assert (pairs["bare_examples_per_s"] > 0).all() and (pairs["harness_examples_per_s"] > 0).all()
    assert "single" in done.stdout and "ratio" in done.stdout
    report = bench("report", str(tmp_path), "--output", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Harness overhead" in html and "overhead-table-" in html
