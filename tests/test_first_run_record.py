"""The record that lets a session skip the first-run tests: keyed on exactly the inputs a cached
wheel can hide (tests/first_run.py)."""

import shutil

import pytest

from tests import first_run
from tests.conftest import ROOT


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A copy of the first-run setup's inputs, and an empty cache."""
    for name in first_run.INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(first_run.FORCE_VARIABLE, raising=False)
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


def test_another_cache_holds_no_pass(root, monkeypatch, tmp_path):
    first_run.record_passed(root, ["tests/test_first_run.py::a"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    assert first_run.passed_before(root) is None
