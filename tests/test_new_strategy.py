"""A new strategy is one file (a variant) or two (a worker of its own): added to a copy of
the suite, with no other edit, it runs, is refused with a clear line where its own rule says
so, and the report shows it with its family (the ps variant below gets the staleness section
as an asynchronous ps run). docs/adding-a-strategy.md's template is the two-file case, and its
tables list exactly the contract's members."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from bench.run.contract import IN_PROCESS, MPI, TF_CLUSTER, InProcess, Launch, MpiRanks, Strategy, TfCluster, Worker
from strategies.registry import all_strategies, misdeclared
from tests.conftest import ROOT
from tests.processes import RUN_LIMIT_S

GUIDE = ROOT / "docs" / "adding-a-strategy.md"

NEW_STRATEGY = '''"""ps-async-2ps: ps-async with its variables always over two ps tasks."""

from bench.config import RunConfig
from bench.errors import UsageError
from strategies.ps_async import PSAsync


class PSAsync2PS(PSAsync):
    name = "ps-async-2ps"
    description = "ps-async over exactly two ps tasks"

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        super().validate(config)
        if config.ps != 2:
            raise UsageError(f"--strategy {cls.name} needs --ps 2, got {config.ps}")
'''


def suite_with(tmp_path, files: dict[str, str]):
    """A copy of the suite with `files` added; returns a function running `python -m bench` in it."""
    suite = tmp_path / "suite"
    for package in ("bench", "strategies"):
        shutil.copytree(ROOT / package, suite / package, ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in files.items():
        (suite / path).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(suite)}

    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bench", *args], cwd=suite, env=env, capture_output=True,
                              text=True, timeout=RUN_LIMIT_S)

    return bench


PS_SECTION = "## A parameter-server strategy"


def guide_files(ps_family: bool = False) -> dict[str, str]:
    """A template's files: each python block of its section of the guide, under the path named just before
    it (the first template, or the parameter-server one)."""
    first, ps = GUIDE.read_text().split(PS_SECTION, 1)
    blocks = re.findall(r"^`(strategies/[\w/]+\.py)`:\n\n```python\n(.*?)```", ps if ps_family else first,
                        re.M | re.S)
    return dict(blocks)


def documented_members(heading: str) -> dict[str, str]:
    """{member: kind} of the guide's table under `### `heading``."""
    section = GUIDE.read_text().split(f"### `{heading}`", 1)[1].split("\n### ", 1)[0]
    return {m: kind.strip("`") for m, kind in re.findall(r"^\| `(\w+)[^`]*` \| ([`\w ]+) \|", section, re.M)}


def public(names) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def test_the_guide_lists_every_member_of_the_contract():
    strategy = documented_members("Strategy")
    assert set(strategy) == public(vars(Strategy)) | public(Strategy.__annotations__)
    assert {m for m, kind in strategy.items() if kind == "required"} == {"name", "family", "worker"} | {
        m for m in Strategy.__annotations__ if not hasattr(Strategy, m)}
    launch = documented_members("Launch")
    kinds = (TfCluster, MpiRanks)
    every = public(vars(Launch)) | {"kind"}  # members every kind has (a kind may override one)
    assert launch == {m: "every kind" for m in every} | {m: kind.__name__ for kind in kinds
                                                         for m in public(vars(kind)) - every}
    assert {kind.kind for kind in (InProcess, *kinds)} == {IN_PROCESS, TF_CLUSTER, MPI}
    worker = documented_members("Worker")
    given = set(Worker.__init__.__code__.co_varnames[1:Worker.__init__.__code__.co_argcount])
    assert set(worker) == public(vars(Worker)) | public(Worker.__annotations__) | given
    assert {m for m, kind in worker.items() if kind == "required"} == set(Worker.__abstractmethods__)


def test_a_launch_member_set_on_the_strategy_itself_is_refused_and_says_where_it_belongs():
    class Stray(Strategy):
        name, family, worker, runs_as = "stray", "in-graph", "strategies.workers.single:SingleWorker", TfCluster

        @classmethod
        def worker_loss(cls, config):
            return "go-on"

    assert misdeclared(Stray) == ("worker_loss belong(s) to a launch kind, not to the strategy: set it on a "
                                  "subclass of its kind (TfCluster)")
    assert "is not a launch kind" in misdeclared(type("Named", (Strategy,), {"runs_as": "mpi"}))
    assert not [name for name, cls in all_strategies().items() if misdeclared(cls)]


def test_the_template_is_two_files_in_strategies():
    assert set(guide_files()) == {"strategies/clipped.py", "strategies/workers/clipped.py"}
    assert set(guide_files(ps_family=True)) == {"strategies/ps_async_clipped.py",
                                                "strategies/workers/ps_async_clipped.py"}


def test_the_guide_lists_every_hook_of_the_parameter_server_worker():
    from strategies.workers.ps import ParameterServerWorker

    hooks = documented_members("ParameterServerWorker")
    assert set(hooks) == public(vars(ParameterServerWorker)) - public(vars(Worker))
    assert {m for m, kind in hooks.items() if kind == "required"} == {
        n for n, v in vars(ParameterServerWorker).items() if callable(v) and _raises_not_implemented(v)}


def _raises_not_implemented(fn) -> bool:
    import inspect

    return "raise NotImplementedError" in inspect.getsource(fn)


@pytest.mark.slow
def test_the_guides_parameter_server_strategy_runs_and_reaches_the_report(tmp_path):
    bench = suite_with(tmp_path, guide_files(ps_family=True))
    results = tmp_path / "results"
    done = bench("--strategy", "ps-async-clipped", "--workers", "2", "--ps", "1", "--data", "synthetic",
                 "--steps", "20", "--warmup-steps", "2", "--eval-every", "0", "--output", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    report = bench("report", str(results), "--output", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    row = pd.read_csv(tmp_path / "report" / "summary.csv").iloc[0]
    assert (row["strategy"], row["family"], row["ps"], row["status"]) == (
        "ps-async-clipped", "parameter-server", 1, "ok")
    assert "Staleness (ps-async-clipped)" in (tmp_path / "report" / "report.html").read_text()


@pytest.mark.slow
def test_the_guides_strategy_with_its_own_worker_runs_and_reaches_the_report(tmp_path):
    bench = suite_with(tmp_path, guide_files())
    results = tmp_path / "results"
    done = bench("--strategy", "clipped", "--data", "synthetic", "--steps", "20", "--warmup-steps", "2",
                 "--eval-every", "10", "--output", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    refused = bench("--strategy", "clipped", "--workers", "2", "--output", str(results))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    report = bench("report", str(results), "--output", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    row = pd.read_csv(tmp_path / "report" / "summary.csv").iloc[0]
    assert (row["strategy"], row["family"], row["status"]) == ("clipped", "in-graph", "ok")
    assert row["throughput_examples_per_s"] > 0


@pytest.mark.slow
def test_one_added_file_runs_and_reaches_the_report(tmp_path):
    bench = suite_with(tmp_path, {"strategies/ps_async_2ps.py": NEW_STRATEGY})

    results = tmp_path / "results"
    common = ["--strategy", "ps-async-2ps", "--workers", "2", "--data", "synthetic", "--steps", "20",
              "--warmup-steps", "2", "--eval-every", "0", "--output", str(results)]
    refused = bench(*common, "--ps", "1")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "bench: error: --strategy ps-async-2ps needs --ps 2, got 1"]
    done = bench(*common, "--ps", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    report = bench("report", str(results), "--output", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    row = summary.iloc[0]
    assert (row["strategy"], row["family"], row["ps"], row["status"]) == ("ps-async-2ps", "parameter-server", 2, "ok")
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Staleness (ps-async-2ps)" in page
