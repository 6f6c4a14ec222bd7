import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


LOGICAL_CPUS = 4


_split = False


def _split_cpu() -> None:
    """Multi-device tests need logical CPU devices, made before TF's runtime starts (once)."""
    global _split
    if _split:
        return
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * LOGICAL_CPUS)
    _split = True


def pytest_runtest_setup(item: pytest.Item) -> None:
    """TensorFlow is imported, and the CPU split, before the first test whose module does not declare
    `NO_TENSORFLOW = True` (the structure and docs tests read files only, and do not pay for it)."""
    if not getattr(item.module, "NO_TENSORFLOW", False):
        _split_cpu()


@pytest.fixture
def uninterrupted(background):
    """uninterrupted(strategy, extra): the folder of a 100-step reference run the test's module
    declared (tests/reference_runs.py), once it is made."""
    from tests.reference_runs import key

    return lambda strategy, extra: background.result(key(strategy, extra))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    return out


@pytest.fixture
def shared_folder() -> Path:
    """A results folder every emulated Slurm node sees (each node's /tmp is its own, as on a real cluster)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="distbench-shared-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def only_run(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


FIRST_RUN_TEST = "tests/test_first_run.py"
BACKGROUND_SETUP = pytest.StashKey()
BACKGROUND_RUNS = pytest.StashKey()
_first_run_outcomes: dict[str, str] = {}  # a first-run test's outcome, by its id
_first_run_left_out: list[str] = []  # the first-run tests deselected (-k, -m)
FIRST_RUN_PASSED_BEFORE = pytest.StashKey()


def _imagenet_run_test(item) -> bool:
    from tests.imagenet_runs import TEST

    return item.nodeid.startswith(TEST + "[")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list) -> None:
    """What runs in the background while the others run is checked last: the runs of
    tests/background.py (the ImageNet short runs after the others), then the first-run setup
    (tests/first_run.py)."""
    from tests.background import declared_jobs

    unsaid = [item.nodeid for item in items if any(not mark.args for mark in item.iter_markers("extended"))]
    if unsaid:
        raise pytest.UsageError(f"extended without the test that covers it: {', '.join(unsaid)}")
    items.sort(key=lambda item: (item.nodeid.startswith(FIRST_RUN_TEST), _imagenet_run_test(item),
                                 bool(declared_jobs(item))))


def pytest_collection_finish(session) -> None:
    from tests import first_run
    from tests.background import BackgroundRuns, declared_jobs

    if session.config.option.collectonly:
        return
    jobs = {key: job for item in session.items for key, job in declared_jobs(item).items()}
    if jobs:
        session.config.stash[BACKGROUND_RUNS] = BackgroundRuns(jobs)
    if not _first_run_tests(session) or os.environ.get(first_run.SKIP_VARIABLE) == "1":
        return
    session.config.stash[FIRST_RUN_PASSED_BEFORE] = first_run.passed_before(ROOT)
    if session.config.stash[FIRST_RUN_PASSED_BEFORE] is None:
        session.config.stash[BACKGROUND_SETUP] = first_run.start(ROOT)


def _first_run_tests(session) -> list[str]:
    return [item.nodeid for item in session.items if item.nodeid.startswith(FIRST_RUN_TEST)]


def pytest_deselected(items: list) -> None:
    _first_run_left_out.extend(item.nodeid for item in items if item.nodeid.startswith(FIRST_RUN_TEST))


def pytest_runtest_logreport(report) -> None:
    if report.nodeid.startswith(FIRST_RUN_TEST) and (report.when == "call" or report.outcome != "passed"):
        _first_run_outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session) -> None:
    from tests import first_run

    # every first-run test ran on this session's own setup, and none failed
    outcomes = _first_run_outcomes
    if session.config.stash.get(BACKGROUND_SETUP, None) is not None and not _first_run_left_out \
            and set(outcomes) == set(_first_run_tests(session)) and "passed" in outcomes.values() \
            and set(outcomes.values()) <= {"passed", "skipped"}:
        first_run.record_passed(ROOT, sorted(t for t, outcome in outcomes.items() if outcome == "passed"))
    for key in (BACKGROUND_RUNS, BACKGROUND_SETUP):
        started = session.config.stash.get(key, None)
        if started is not None:
            started.end()


@pytest.fixture
def background_setup(request):
    """The first-time setup started when the session began (tests/first_run.py)."""
    return request.config.stash.get(BACKGROUND_SETUP, None)


@pytest.fixture
def first_run_passed_before(request) -> dict | None:
    """An earlier session's record that the first-run tests passed with this session's inputs."""
    return request.config.stash.get(FIRST_RUN_PASSED_BEFORE, None)


@pytest.fixture
def background(request):
    """The runs started when the session began (tests/background.py)."""
    started = request.config.stash.get(BACKGROUND_RUNS, None)
    assert started is not None, "the session started no background runs"
    return started


def pytest_terminal_summary(terminalreporter) -> None:
    """A skip is never silent: the last lines name every skipped test and why."""
    skipped = terminalreporter.stats.get("skipped", [])
    deselected = len(terminalreporter.stats.get("deselected", []))
    if deselected:
        said = {"not slow": "slow tests not run (./run_bench.sh test runs them)",
                "not extended": "extended tests not run: each repeats what another covers (./run_bench.sh test -m "
                                "extended runs them)"}.get(terminalreporter.config.option.markexpr, "tests deselected")
        terminalreporter.write_line(f"distbench: {deselected} {said}", yellow=True, bold=True)
    if not skipped:
        terminalreporter.write_line("distbench: no test was skipped", green=True, bold=True)
        return
    terminalreporter.write_sep("!", f"distbench: {len(skipped)} tests SKIPPED", red=True, bold=True)
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        terminalreporter.write_line(f"SKIPPED {report.nodeid}: {reason.removeprefix('Skipped: ')}",
                                    red=True, bold=True)
