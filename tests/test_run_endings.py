"""How runs end when something outside them goes wrong: a killed worker, a killed launcher,
Ctrl-C, a disk that stops taking writes; and the hand-started multi-host run of docs/several-hosts.md."""

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from bench.infra.tools import free_ports
from bench.run.process.owner import OWNER_GONE
from tests.conftest import ROOT
from tests.processes import (
    ENDING_LIMIT_S,
    RUN_LIMIT_S,
    TRAINING_LIMIT_S,
    bench,
    leftover_processes,
    run_record,
    seconds_from_kill_to_end,
    task_process,
)

pytestmark = pytest.mark.slow
# Each trial is a full multi-process run (~15 s here); the cause is also checked deterministically,
# with a forced order of deaths, in test_supervisor.py. DISTBENCH_KILL_TRIALS=10 for the full sweep.
KILL_TRIALS = int(os.environ.get("DISTBENCH_KILL_TRIALS", "1"))
if KILL_TRIALS < 1:  # zero trials would turn the kill tests into nothing
    raise pytest.UsageError(f"DISTBENCH_KILL_TRIALS must be >= 1, got {KILL_TRIALS}")
FAST = ["--model", "mlp", "--data", "synthetic", "--batch-size", "32"]


def popen_bench(*args: str, **kwargs) -> subprocess.Popen:
    """`python -m bench ARGS` in a process group of its own, as a terminal starts it."""
    return subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, **kwargs)


def own_tmpdir(tmp_path) -> Path:
    """A TMPDIR for the launcher under test, empty, inside the test's folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    return temp


def complete_step_rows(run_dir) -> int:
    """Steps recorded so far, counting only complete rows (the file is still being appended to)."""
    try:
        text = (run_dir / "steps.csv").read_text()
    except OSError:
        return 0
    return max(0, text.count("\n") - 1)


def wait_for_training(results, process: subprocess.Popen, rows: int = 3, timeout: float = TRAINING_LIMIT_S):
    """The run folder once it holds `rows` complete step rows; fails if the run ended before."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read().decode()[-2000:]
        runs = [p for p in results.iterdir() if p.is_dir()]
        if runs and complete_step_rows(runs[0]) >= rows:
            return runs[0]
        time.sleep(0.1)
    raise AssertionError("training did not start")


# what else fails: allreduce-tf's worker 0, whose collective loses its peer, or nobody (under
# ps-sync worker 0 waits for the dead worker's gradient until the launcher ends it)
CONSEQUENCES = {"allreduce-tf": ("worker 0",), "ps-sync": ()}


@pytest.mark.parametrize("strategy", list(CONSEQUENCES))
def test_the_killed_worker_is_named_as_the_cause(strategy, tmp_path):
    for trial in range(KILL_TRIALS):
        out = tmp_path / f"trial{trial}"
        done = bench("--strategy", strategy, "--workers", "2", "--steps", "100", "--kill-worker", "1@3", *FAST,
                     "--output", str(out))
        assert done.returncode == 1
        record = run_record(out)
        assert record["status"] == "failed: worker 1 was killed by SIGKILL", (trial, record["status"])
        consequences = record["failure_consequences"]
        assert len(consequences) <= len(CONSEQUENCES[strategy]), consequences
        assert all(c.startswith(CONSEQUENCES[strategy]) for c in consequences), consequences
        # "within seconds": 1-3 s here; 30 s only fails a run that waited for a time limit
        assert seconds_from_kill_to_end(next(out.iterdir()), record, worker=1) < 30
        assert not leftover_processes(str(out))


# counted from the first step: start-up (~10 s here) has its own limit. A running ps-sync worker records a
# step every few ms, and its rows reach steps.csv every 0.5 s (step_log.FLUSH_S): 5 s without one is a stall
STALL_S = 5
# a call's deadline is the stall limit + LAUNCHER_FIRST_S (3 s), then the ps tasks are probed (2 s each) and
# the done tokens tried (2 s each): a hand-started task ends about 8 s after its stall limit
WITHIN_S = STALL_S + 10


def test_a_ps_that_stops_answering_ends_the_run_as_hung_with_each_process_where_it_waited(results):
    launcher = popen_bench("--strategy", "ps-sync", "--workers", "2", "--ps", "2", "--steps", "100000", *FAST,
                           "--stall-timeout-s", str(STALL_S), "--output", str(results))
    run_dir = wait_for_training(results, launcher)
    task_process(run_dir, "ps", 1).suspend()  # alive, answering nothing: every worker's step waits on it
    stopped = time.monotonic()
    assert launcher.wait(timeout=ENDING_LIMIT_S) == 1
    assert time.monotonic() - stopped < WITHIN_S  # the stall limit, the stacks (1.5 s), then the ending
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"].startswith(f"failed: no step recorded for {STALL_S} s (hung): worker 0 stepping (step)")
    rows = {row["process"]: row for row in record["hang"]["processes"]}
    assert rows["worker 0"]["alive"] and rows["worker 1"]["phase"] == "stepping"
    assert rows["ps 1"]["phase"] == "serving" and rows["ps 1"]["call"] == "done tokens: 0 of 2"
    # each live process wrote its stack into its log when asked (the stopped ps could not)
    worker_log = (run_dir / rows["worker 0"]["stack_in"]).read_text()
    assert "most recent call first" in worker_log and "run_step" in worker_log
    assert not leftover_processes(str(results))


def hand_started(results, run_name: str, *extra: str) -> tuple[list[str], list[subprocess.Popen]]:
    """ps 0, worker 1 and the chief of a ps-sync run started by hand on loopback (docs/several-hosts.md)."""
    ps, w0, w1 = (f"127.0.0.1:{p}" for p in free_ports(3))
    cluster = ["--strategy", "ps-sync", "--ps-hosts", ps, "--worker-hosts", f"{w0},{w1}", "--output", str(results),
               *extra]
    common = [*cluster, "--run-name", run_name]
    tasks = [popen_bench(*common, "--job-name", "ps", "--task-index", "0"),
             popen_bench(*common, "--job-name", "worker", "--task-index", "1"),
             popen_bench(*common, "--job-name", "worker", "--task-index", "0")]
    return cluster, tasks


def wait_for_rows(run_dir: Path, chief: subprocess.Popen, rows: int = 3) -> None:
    deadline = time.monotonic() + TRAINING_LIMIT_S
    while complete_step_rows(run_dir) < rows:
        assert chief.poll() is None and time.monotonic() < deadline, chief.stdout.read().decode()[-2000:]
        time.sleep(0.1)


def test_a_hand_started_worker_whose_ps_stops_answering_fails_naming_the_call_and_the_ps(results):
    _, (ps, worker, chief) = hand_started(results, "stuck", "--steps", "100000", *FAST,
                                          "--stall-timeout-s", str(STALL_S))
    try:
        wait_for_rows(results / "stuck", chief)
        psutil.Process(ps.pid).suspend()  # no launcher watches a run started by hand: each task bounds its own waits
        stopped = time.monotonic()
        assert chief.wait(timeout=ENDING_LIMIT_S) == 1 and worker.wait(timeout=ENDING_LIMIT_S) == 1
        assert time.monotonic() - stopped < WITHIN_S
    finally:
        ps.kill()
    said = chief.stdout.read().decode()
    record = json.loads((results / "stuck" / "run.json").read_text())
    assert record["status"] == (f"failed: RunFailed: stepping (step) waited {STALL_S + 3} s (--stall-timeout-s + 3); "
                                "no answer from ps 0"), said[-3000:]
    rows = {row["process"]: row for row in record["hang"]["processes"]}
    assert all(rows[w]["phase"] == "stepping" and rows[w]["stuck"] for w in ("worker0", "worker1"))
    assert "Traceback" in said and "run_step" in said  # its stack, in its log (here its terminal)


def test_a_ps_restarted_under_hand_started_workers_fails_their_step_instead_of_a_silent_retry(results):
    """TensorFlow's MonitoredSession would re-create the session and go on from re-initialised variables."""
    cluster, (ps, worker, chief) = hand_started(results, "restarted", "--steps", "100000", *FAST)
    again = None
    try:
        wait_for_rows(results / "restarted", chief)
        ps.kill()
        ps.wait()
        # the same ps on the same port, under another run name (the first one's folder holds its ps 0)
        again = popen_bench(*cluster, "--run-name", "restarted-ps", "--job-name", "ps", "--task-index", "0")
        assert chief.wait(timeout=ENDING_LIMIT_S) == 1 and worker.wait(timeout=ENDING_LIMIT_S) == 1
    finally:
        for task in (ps, again):
            if task is not None:
                task.kill()
    status = json.loads((results / "restarted" / "run.json").read_text())["status"]
    assert status.startswith("failed: UnavailableError"), status


@pytest.mark.parametrize("strategy", ["single", "ps-sync", "allreduce", pytest.param("allreduce-tf", marks=(
    pytest.mark.extended("a TensorFlow cluster's launcher ended by Ctrl-C: ps-sync's, the same launcher")))])
def test_ctrl_c_ends_the_run_with_130_and_records_it(strategy, results):
    workers = [] if strategy == "single" else ["--workers", "2"]
    # started with SIGINT ignored, as a script's background job is: the launcher must end on it all the same
    launcher = popen_bench("--strategy", strategy, *workers, "--steps", "100000", *FAST, "--output", str(results),
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    run_dir = wait_for_training(results, launcher)
    os.killpg(launcher.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
    sent = time.monotonic()
    assert launcher.wait(timeout=ENDING_LIMIT_S) == 130
    assert time.monotonic() - sent < 10  # "within seconds": 1-3 s here
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "interrupted (SIGINT)"
    assert not leftover_processes(str(results))


@pytest.mark.parametrize("strategy", ["single", "allreduce"])
def test_ctrl_c_pressed_again_while_the_run_ends_hurries_the_ending_and_it_is_still_recorded(strategy, results,
                                                                                           tmp_path):
    workers = [] if strategy == "single" else ["--workers", "2"]
    temp = own_tmpdir(tmp_path)  # the run's own temporary files: the ranks killed in the hurry once left AutoGraph's
    launcher = popen_bench("--strategy", strategy, *workers, "--steps", "100000", *FAST, "--output", str(results),
                           env={**os.environ, "TMPDIR": str(temp)})
    run_dir = wait_for_training(results, launcher)
    os.killpg(launcher.pid, signal.SIGINT)
    sent = time.monotonic()
    # then the launcher alone, every 50 ms until it exits: an impatient user's presses land in its
    # ending (ending its processes, closing run.json), which a second one once aborted (exit 1, a
    # traceback, run.json left "running")
    while launcher.poll() is None and time.monotonic() - sent < ENDING_LIMIT_S:
        with contextlib.suppress(ProcessLookupError):
            os.kill(launcher.pid, signal.SIGINT)
        time.sleep(0.05)
    assert launcher.wait(timeout=ENDING_LIMIT_S) == 130
    output = launcher.stdout.read().decode()
    assert "Traceback" not in output, output[-3000:]
    assert time.monotonic() - sent < 10
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted (SIGINT)"
    assert not leftover_processes(str(results))
    assert not list(temp.iterdir())  # bench.run.process.scratch


def test_a_killed_launcher_is_reported_as_gone_with_its_last_step(results, tmp_path):
    # a SIGKILLed launcher cannot remove its run's scratch folder (bench/run/process/scratch.py):
    # under the test's own TMPDIR, not the machine's /tmp
    scratch = own_tmpdir(tmp_path)
    launcher = popen_bench("--strategy", "ps-sync", "--workers", "2", "--steps", "100000", *FAST,
                           "--output", str(results), env={**os.environ, "TMPDIR": str(scratch)})
    run_dir = wait_for_training(results, launcher, rows=6)
    launcher.kill()
    launcher.wait(timeout=ENDING_LIMIT_S)
    assert not leftover_processes(str(results))
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"  # nobody closed it
    done = bench("report", str(results), "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["status"].tolist() == [OWNER_GONE]
    record = json.loads((run_dir / "run.json").read_text())
    steps = pd.read_csv(run_dir / "steps.csv")
    assert record["status"] == OWNER_GONE and record["last_step"] == steps["global_step"].max() >= 3
    assert OWNER_GONE in (tmp_path / "report.html").read_text()


def test_a_live_run_is_not_reported_as_failed(results, tmp_path):
    launcher = popen_bench("--strategy", "single", "--steps", "100000", *FAST, "--output", str(results))
    try:
        run_dir = wait_for_training(results, launcher)
        assert bench("report", str(results), "--output", str(tmp_path)).returncode == 0
        assert pd.read_csv(tmp_path / "summary.csv")["status"].tolist() == ["running"]
        assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    finally:
        os.killpg(launcher.pid, signal.SIGINT)
        launcher.wait(timeout=ENDING_LIMIT_S)


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (24_000, 24_000))  # steps.csv outgrows this mid-run
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG instead of killing us


def test_a_write_that_fails_mid_run_fails_the_run_and_keeps_what_was_written(results):
    launcher = subprocess.run([sys.executable, "-m", "bench", "--steps", "5000", *FAST, "--eval-every", "0",
                               "--output", str(results)], cwd=ROOT, capture_output=True, text=True,
                              preexec_fn=limit_file_size, timeout=RUN_LIMIT_S)
    assert launcher.returncode == 1
    record = run_record(results)
    assert record["status"] == "failed: OSError: [Errno 27] File too large"
    steps = pd.read_csv(next(p for p in results.iterdir() if p.is_dir()) / "steps.csv")
    assert len(steps) > 100 and list(steps["local_step"]) == list(range(len(steps)))


def test_the_readme_several_hosts_example_on_loopback(results, tmp_path):
    ps, w0, w1 = (f"127.0.0.1:{p}" for p in free_ports(3))
    common = ["--strategy", "ps-sync", "--ps-hosts", ps, "--worker-hosts", f"{w0},{w1}", "--run-name", "cluster1",
              "--steps", "40", "--eval-every", "20", "--output", str(results)]
    tasks = [popen_bench(*common, "--job-name", "ps", "--task-index", "0"),
             popen_bench(*common, "--job-name", "worker", "--task-index", "1")]
    chief = popen_bench(*common, "--job-name", "worker", "--task-index", "0")
    assert chief.wait(timeout=RUN_LIMIT_S) == 0, chief.stdout.read().decode()[-2000:]
    for task in tasks:
        assert task.wait(timeout=ENDING_LIMIT_S) == 0  # once the chief is done
    run_dir = results / "cluster1"
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "ok" and record["summary"]["throughput_examples_per_s"] > 0
    steps = pd.read_csv(run_dir / "steps.csv")
    assert set(steps["worker"]) == {0, 1} and steps["global_step"].max() >= 40
    assert pd.read_csv(run_dir / "evals.csv")["accuracy"].notna().all()
    done = bench("report", str(results), "--output", str(tmp_path))
    assert done.returncode == 0 and pd.read_csv(tmp_path / "summary.csv")["status"].tolist() == ["ok"]
    # the same command again would append to the first run: refused, nothing written
    again = bench(*common, "--job-name", "worker", "--task-index", "0")
    assert again.returncode == 2
    assert again.stderr.strip().endswith("already holds worker 0 of an earlier run: choose another --run-name "
                                         "(or --output)")
    assert json.loads((run_dir / "run.json").read_text()) == record
