"""How a multi-process run ends: which process is named as the cause when several die."""

import re
import sys
import time

import pytest

from bench.run.launch.hang import hang_account
from bench.run.launch.processes import start
from bench.run.launch.supervisor import supervise
from bench.run.process import harness
from tests.conftest import ROOT


def child(tmp_path, name, script):
    return start(name, ["sh", "-c", script], tmp_path / f"{name.replace(' ', '')}.log")


@pytest.mark.parametrize("scripts, cause, consequence", [
    # worker 0 notices the broken ring and exits with an error a moment before worker 1's SIGKILL
    # is seen: the kill is the cause, worker 0's exit its consequence
    (["echo 'CollectiveReduceV2 failed' >&2; sleep 0.2; exit 1", "sleep 0.5; kill -9 $$"],
     "worker 1 was killed by SIGKILL", "worker 0 exited with status 1: CollectiveReduceV2 failed"),
    # of two exits with an error status, the earlier is the cause
    (["sleep 0.6; echo late >&2; exit 1", "echo first >&2; exit 3"],
     "worker 1 exited with status 3: first", "worker 0 exited with status 1: late"),
])
def test_the_cause_is_the_death_by_signal_then_the_earliest(scripts, cause, consequence, tmp_path):
    workers = [child(tmp_path, f"worker {i}", script) for i, script in enumerate(scripts)]
    outcome = supervise(workers, [], False, lambda: 0, 60)
    assert outcome.status == f"failed: {cause}" and outcome.consequences == [consequence]


def test_a_killed_ps_is_named_while_workers_train(tmp_path):
    workers = [child(tmp_path, "worker 0", "sleep 30")]
    ps = [child(tmp_path, "ps 0", "sleep 0.2; kill -9 $$")]
    started = time.monotonic()
    outcome = supervise(workers, ps, False, lambda: 0, 60)
    assert outcome.status == "failed: ps 0 was killed by SIGKILL while workers were still training"
    # the ps dies at 0.2 s and the others are ended at once (under 1 s here); 10 s fails only a wait for a limit
    assert time.monotonic() - started < 10 and all(c.exited for c in workers + ps)


def test_the_stall_clock_starts_at_the_first_step_and_start_up_has_its_own_limit(tmp_path):
    steps = iter([0] * 6 + [1, 2])  # polled every 0.1 s: first step after ~0.6 s, then never another
    started = time.monotonic()
    outcome = supervise([child(tmp_path, "worker 0", "sleep 30")], [], False, lambda: next(steps, 2), 0.3)
    assert outcome.status == "failed: no step recorded for 0 s (hung)"
    # not at 0.3 s: the stall clock waited for the first step (~0.6 s), then 0.3 s; the upper bound is
    # loose (a loaded machine slows the 0.1 s polls), it only catches a stall clock that never ran
    assert 0.6 < time.monotonic() - started < 5
    stuck = supervise([child(tmp_path, "worker 0", "sleep 30")], [], False, lambda: 0, 0.3, startup_timeout_s=1.5)
    assert stuck.status.startswith("failed: no step recorded within 2 s of the start (hung at start-up")
    assert "--startup-timeout-s" in stuck.status  # what a user whose large graph needs longer does


def test_the_step_clock_is_monotonic_when_the_wall_clock_jumps_back(monkeypatch):
    wall = iter([1000.0, 10.0, 5.0])  # the epoch is read once; later reads would go backwards
    monkeypatch.setattr(harness.time, "time", lambda: next(wall))
    clock = harness.run_clock(run_start=999.0)
    first = clock()
    time.sleep(0.01)
    second = clock()
    assert first == pytest.approx(1.0, abs=0.05) and second > first


def test_a_dead_worker_is_restarted_while_restarts_are_left_and_a_dead_chief_never_is(tmp_path):
    from bench.run.launch.supervisor import Restarts

    started = []

    def replacement(script):
        def start_again(rank, why):
            started.append((rank, why))
            return child(tmp_path, f"worker {rank}", script)
        return start_again

    workers = [child(tmp_path, "worker 0", "sleep 1"), child(tmp_path, "worker 1", "kill -9 $$")]
    outcome = supervise(workers, [], False, lambda: 0, 60, restarts=Restarts(replacement("exit 0"), 1))
    assert outcome.status == "ok" and started == [(1, "worker 1 was killed by SIGKILL")]
    # the replacement dies too, and no restart is left: the run fails on it
    workers = [child(tmp_path, "worker 0", "sleep 30"), child(tmp_path, "worker 1", "exit 3")]
    outcome = supervise(workers, [], False, lambda: 0, 60, restarts=Restarts(replacement("sleep 0.2; exit 4"), 1))
    assert outcome.status == "failed: worker 1 exited with status 4"
    chief = [child(tmp_path, "worker 0", "kill -9 $$"), child(tmp_path, "worker 1", "sleep 30")]
    outcome = supervise(chief, [], False, lambda: 0, 60, restarts=Restarts(replacement("exit 0"), 3))
    assert outcome.status == "failed: worker 0 was killed by SIGKILL" and len(started) == 2


class DiesAtPoll:
    """A stand-in process that is running for its first `polls - 1` polls and killed from then on."""

    def __init__(self, polls: int) -> None:
        self.polls_left, self.returncode = polls, None

    def poll(self):
        self.polls_left -= 1
        if self.polls_left <= 0:
            self.returncode = -9
        return self.returncode

    def terminate(self) -> None:
        self.returncode = -15 if self.returncode is None else self.returncode

    kill = terminate

    def wait(self) -> int:
        return self.returncode


def test_a_worker_that_dies_between_two_polls_of_one_round_is_restarted(tmp_path):
    # one round of supervision polled each process for the restarts, then again for failures: a worker
    # that died in between (3rd poll) failed the run with restarts left (seen under load)
    from bench.run.launch.processes import Child
    from bench.run.launch.supervisor import Restarts

    started = []

    def start_again(rank, why):
        started.append((rank, why))
        return child(tmp_path, f"worker {rank}", "exit 0")

    dying = Child("worker 1", DiesAtPoll(3), tmp_path / "worker1.log")
    workers = [child(tmp_path, "worker 0", "sleep 1"), dying]
    outcome = supervise(workers, [], False, lambda: 0, 60, restarts=Restarts(start_again, 1))
    assert outcome.status == "ok" and started == [(1, "worker 1 was killed by SIGKILL")]


def test_worker_tasks_that_serve_a_trainer_may_be_lost_or_restarted_and_a_ps_may_not(tmp_path):
    # ps-coordinator: the coordinator trains; its worker tasks only serve the functions it schedules
    from bench.run.launch.supervisor import Restarts

    def cluster(chief_script="sleep 30"):
        # worker 1 dies at once; "after worker 1": the chief ends once the supervisor has reaped it
        # (a zombie still answers kill -0), so the loss is seen before the chief's end, on any load
        pid = tmp_path / "worker1.pid"
        pid.unlink(missing_ok=True)
        serving = [child(tmp_path, "worker 0", "sleep 30"), child(tmp_path, "worker 1", f"echo $$ > {pid}; kill -9 $$")]
        after_worker_1 = (f"until [ -s {pid} ]; do sleep 0.05; done; "
                          f"while kill -0 $(cat {pid}) 2>/dev/null; do sleep 0.05; done")
        chief = [child(tmp_path, "chief 0", after_worker_1 if chief_script == "after worker 1" else chief_script)]
        ps = [child(tmp_path, "ps 0", "sleep 30")]
        return chief, [*ps, *serving], serving

    chief, helpers, serving = cluster("after worker 1")
    outcome = supervise(chief, helpers, True, lambda: 0, 60, serving_workers=serving)
    assert outcome.status == "ok" and outcome.lost_workers == ["worker 1"]
    assert all(c.exited for c in chief + helpers)  # the servers are ended once the chief is done
    chief, helpers, serving = cluster()
    outcome = supervise(chief, helpers, False, lambda: 0, 60, serving_workers=serving)
    assert outcome.status == "failed: worker 1 was killed by SIGKILL while workers were still training"
    started = []

    def start_again(rank, why):
        started.append((rank, why))
        return child(tmp_path, f"worker {rank}", "sleep 30")

    chief, helpers, serving = cluster("after worker 1")
    outcome = supervise(chief, helpers, True, lambda: 0, 60, restarts=Restarts(start_again, 1),
                        serving_workers=serving)
    assert outcome.status == "ok" and outcome.lost_workers == [] and started == [(1, "worker 1 was killed by SIGKILL")]
    assert serving[1] in helpers and serving[1].exited  # the replacement served, and was ended with the others
    chief = [child(tmp_path, "chief 0", "sleep 30")]
    ps = [child(tmp_path, "ps 0", "sleep 0.2; kill -9 $$")]
    serving = [child(tmp_path, "worker 0", "sleep 30")]
    outcome = supervise(chief, [*ps, *serving], True, lambda: 0, 60, serving_workers=serving)
    assert outcome.status == "failed: ps 0 was killed by SIGKILL while workers were still training"


def test_a_kill_the_trainer_asked_for_is_answered_once_the_task_is_gone(tmp_path):
    # the trainer goes on, and fails of the kill, as soon as `killed` exists: the task must already
    # have been reaped then, or the supervisor may see the trainer's exit first and name it the cause
    from bench.config import RunConfig
    from bench.run.faults.kill_watch import kill_watch
    from bench.run.faults.task_kill import KillMarkers
    from bench.run.process.records import RunFolder

    folder = RunFolder(tmp_path)
    markers = KillMarkers(folder, "ps", 0)
    markers.requested.parent.mkdir()
    markers.requested.touch()
    # 200 MB written: its teardown takes long enough that a poll straight after SIGKILL still finds
    # the process running (it did, 3 of 3, before the launcher waited)
    ps = start("ps 0", [sys.executable, "-c", "b = b'x' * 200_000_000; print('up', flush=True); "
                        "import time; time.sleep(30)"], tmp_path / "ps0.log")
    deadline = time.monotonic() + 60  # writing 200 MB takes ~0.1 s; 60 s only bounds a child that never says up
    while "up" not in (tmp_path / "ps0.log").read_text():
        assert time.monotonic() < deadline and not ps.exited, (tmp_path / "ps0.log").read_text()
        time.sleep(0.05)
    watch = kill_watch(RunConfig(strategy="ps-coordinator", kill_ps="0@5"), folder, {"ps": [ps]})
    watch()
    assert markers.killed.exists() and ps.exited and ps.process.returncode == -9


def listening_child(tmp_path, name: str, phase: tuple[str, str] | None):
    """A process that answers a stack request as every `python -m bench` does, in `phase` if given."""
    role, index = name.split()
    record = (f"Phase.of_task(Path({str(tmp_path)!r}), {role!r}, {index})({phase[0]!r}, {phase[1]!r}); "
              if phase else "")
    script = ("import sys, time; from pathlib import Path; "
              f"sys.path.insert(0, {str(ROOT)!r}); "
              "from bench.run.phase import Phase, listen_for_stack_requests; listen_for_stack_requests(); "
              f"{record}print('ready', flush=True); time.sleep(30)")
    child = start(name, [sys.executable, "-c", script], tmp_path / "logs" / f"{role}{index}.log")
    deadline = time.monotonic() + 30  # a Python start-up: well under a second here
    while "ready" not in (child.log.read_text() if child.log.exists() else ""):
        assert time.monotonic() < deadline and not child.exited
        time.sleep(0.05)
    return child


def test_a_stalled_run_asks_each_live_process_for_its_stack_and_records_where_each_waited(tmp_path):
    worker = listening_child(tmp_path, "worker 0", ("stepping", "step"))
    ps = listening_child(tmp_path, "ps 0", None)
    steps = iter([0, 1])  # one step, then never another
    outcome = supervise([worker], [ps], False, lambda: next(steps, 1), 0.3,
                        on_hang=hang_account(tmp_path / "logs"))
    assert re.fullmatch(r"failed: no step recorded for 0 s \(hung\): worker 0 stepping \(step\) for \d+ s; "
                        r"ps 0 no phase recorded", outcome.status), outcome.status
    rows = {row["process"]: row for row in outcome.hang["processes"]}
    assert rows["worker 0"]["alive"] and rows["worker 0"]["stack_in"] == "logs/worker0.log"
    for child in (worker, ps):  # each wrote its stack to its log when asked, before it was ended
        assert "most recent call first" in child.log.read_text()
    assert all(c.exited for c in (worker, ps))
