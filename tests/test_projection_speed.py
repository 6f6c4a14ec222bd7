"""The projection's time on large clusters (pytest-benchmark, not a timed test): a described cluster of
64, 1024 and 4096 workers, every scheme at the default links, with one ps task per worker host beside
its workers (the most tasks the projection meets) and a quarter as many on hosts of their own."""

from __future__ import annotations

import json

import pytest

from bench.analysis.projection import cli, cluster_cli

LINKS = "1,10,25,100"  # the project command's default


@pytest.mark.parametrize("workers", [64, 1024, 4096])
def test_a_large_cluster_projects_every_scheme(benchmark, workers):
    args = cli.parser().parse_args(["--model", "resnet50", "--device-examples-per-s", "200", "--batch-size", "64",
                                    "--workers", str(workers), "--link-gbit", LINKS, "--profile", "tf1-2017",
                                    "--ps", f"{workers},{workers // 4}"])
    chosen = cluster_cli.check(args)
    table = benchmark.pedantic(cluster_cli.projection, args=(args, chosen), rounds=1, iterations=1)
    ps = table[table["transport"] == "grpc"]
    assert set(ps["ps"]) == {workers, workers // 4} and set(table["link_gbit"]) == {1, 10, 25, 100}
    assert (table["throughput_low"] <= table["throughput_examples_per_s"]).all()
    assert (table["throughput_examples_per_s"] <= table["throughput_high"]).all()
    assert (table["throughput_examples_per_s"] <= workers * 200 * 1.0001).all()


@pytest.mark.parametrize("workers", [None, "4096"], ids=["default-grid", "4096"])
def test_a_projection_from_runs_answers_its_default_grid_and_4096_workers(benchmark, tmp_path, workers):
    """`project --from` a folder of the default comparison's models (their 1-worker runs), each figure and each
    family cell from 32 joint draws, the break-even of every cell that holds 1 looked for."""
    from bench.cli import main
    from tests.test_project_cli import run_folder

    for model, step_s in (("cnn", 0.012), ("mlp", 0.00025)):
        run_folder(tmp_path, f"single-{model}", "single", 1, 64 / step_s, model=model, p50=step_s, steps=True)
    argv = ["project", "--from", str(tmp_path), "--json", *(["--workers", workers] if workers else [])]
    assert benchmark.pedantic(main, args=(argv,), rounds=1, iterations=1) == 0
    result = json.loads((tmp_path / "projection.json").read_text())
    assert result["families"] and all(c["low"] <= c["ratio"] <= c["high"] for c in result["families"])
