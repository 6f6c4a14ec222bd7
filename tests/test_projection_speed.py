"""The projection's time on large clusters (pytest-benchmark, not a timed test): a described cluster of
64, 1024 and 4096 workers, every scheme at the default links, with one ps task per worker host beside
its workers (the most tasks the projection meets) and a quarter as many on hosts of their own."""

from __future__ import annotations

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
