"""The record that lets a session skip the first-run tests: keyed on exactly the inputs a cached
wheel can hide (tests/first_run.py), PyPI's resolution of a fresh setup among them."""

import shutil

import pytest

from tests import first_run
from tests.conftest import ROOT

TODAY = ("tensorflow-cpu==2.21.0", "pip==26.3")


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A copy of the first-run setup's inputs, an empty cache, and PyPI's answer (no network)."""
    for name in first_run.INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(first_run.FORCE_VARIABLE, raising=False)
    monkeypatch.setattr(first_run, "resolved_today", lambda root: TODAY)
    return tmp_path


def test_a_pass_is_found_again_with_the_same_inputs_and_forced_runs_ignore_it(root, monkeypatch):
    assert first_run.passed_before(root) is None
    first_run.record_passed(root, ["tests/test_first_run.py::a"])
    assert first_run.passed_before(root)["tests"] == ["tests/test_first_run.py::a"]
    monkeypatch.setenv(first_run.FORCE_VARIABLE, "always")
    assert first_run.passed_before(root) is None


@pytest.mark.parametrize("name", first_run.INPUTS)
def test_any_change_to_an_input_asks_for_the_first_run_again(root, name):
    first_run.record_passed(root, ["tests/test_first_run.py::a"])
    with open(root / name, "a") as f:
        f.write("\n# changed\n")
    assert first_run.passed_before(root) is None


def test_a_new_release_on_pypi_asks_for_the_first_run_again(root, monkeypatch):
    first_run.record_passed(root, ["tests/test_first_run.py::a"])
    monkeypatch.setattr(first_run, "resolved_today", lambda root: ("tensorflow-cpu==2.22.0", "pip==26.3"))
    assert first_run.passed_before(root) is None


def test_where_pypi_cannot_be_asked_nothing_is_skipped_or_recorded(root, monkeypatch):
    first_run.record_passed(root, ["tests/test_first_run.py::a"])
    monkeypatch.setattr(first_run, "resolved_today", lambda root: None)
    assert first_run.passed_before(root) is None
    first_run.record_passed(root, ["tests/test_first_run.py::b"])
    assert not list((root / "cache").rglob("None.json"))


def test_another_cache_holds_no_pass(root, monkeypatch, tmp_path):
    first_run.record_passed(root, ["tests/test_first_run.py::a"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    assert first_run.passed_before(root) is None


def test_the_resolution_asks_for_every_package_setup_installs_from_pypi():
    # every name run_bench.sh's setup hands pip (the checkout itself is ".[test,cpu]"; the GPU flavour's
    # TensorFlow is not what a new machine's default setup installs; Horovod's wheel is built here)
    named = set()
    for line in (ROOT / "run_bench.sh").read_text().splitlines():
        words = line.split("pip_quiet ", 1)[1].split() if "pip_quiet " in line and "()" not in line else []
        named |= {w for w in words if not w.startswith(("-", '"'))}
    assert named == set(first_run.FRESH_INSTALLS) - {".[test,cpu]"}, named
