"""Open MPI's start-up race: told apart from other rank deaths, named as srun names it, and
relaunched once (bench.run.launch.mpi_init_race)."""

from pathlib import Path

from bench.run.launch.mpi import which_rank_failed
from bench.run.launch.mpi_init_race import died_in_mpi_init, relaunching
from bench.run.launch.supervisor import Outcome

# the ranks' log as srun ended it in the busy-machine test order (paths made neutral)
CRASH = (Path(__file__).parent / "data" / "ompi_init_segfault.log").read_text()


def test_srun_names_the_rank_a_signal_killed_not_the_one_that_exited_after_it(tmp_path):
    log = tmp_path / "ranks.log"
    log.write_text(CRASH)
    # the run said "ranks exited with status 14: srun: error: dbslurm-h1: task 1: Exited with exit code 14"
    assert which_rank_failed(log) == "rank 0 on dbslurm-h0: segmentation fault"
    assert which_rank_failed(log, since=log.stat().st_size) is None  # an earlier launch's crash
    log.write_text("srun: error: node-3: task 2: Exited with exit code 1\n")
    assert which_rank_failed(log) == "rank 2 on node-3: exited with exit code 1"


def test_a_rank_that_aborts_on_a_closed_socket_is_named_with_what_it_saw(tmp_path):
    # the tail of a ranks' log of tests/test_hosts.py: rank 1 was SIGKILLed on its host, rank 2 saw the
    # socket close and aborted first; the run said "ranks exited with status 14: [vm:1] PMIX ERROR: ..."
    log = tmp_path / "ranks.log"
    log.write_text("""[h2:00000] *** An error occurred in Socket closed
[h2:00000] *** reported by process [2456420353,2]
[h2:00000] *** on a NULL communicator
[h2:00000] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,
--------------------------------------------------------------------------
prterun has exited due to process rank 2 with PID 0 on node h2 calling
"abort". This may have caused other processes in the application to be
terminated by signals sent by prterun (as reported here).
--------------------------------------------------------------------------
[vm:1] PMIX ERROR: PMIX_ERR_NOT_FOUND in file pmix_server.c at line 1747
""")
    assert which_rank_failed(log) == "rank 2 on h2 aborted: a peer's connection closed (Socket closed)"


def test_only_a_death_inside_mpi_init_is_the_race(tmp_path):
    log = tmp_path / "ranks.log"
    log.write_text(CRASH)
    assert died_in_mpi_init(log) == ("rank 0 on dbslurm-h0: Segmentation fault inside MPI_Init "
                                     "(Open MPI's start-up race, open-mpi/ompi#12495)")
    assert died_in_mpi_init(log, since=log.stat().st_size) is None  # an earlier launch's part of the log
    after_init = "\n".join(line for line in CRASH.splitlines() if "Init" not in line and "ompi_mpi_init" not in line)
    log.write_text(after_init)
    assert "Segmentation fault" in after_init and died_in_mpi_init(log) is None
    assert died_in_mpi_init(tmp_path / "none.log") is None


class Launches:
    """Each launch appends what it is given to the log and ends as told; `steps` fakes steps.csv's size."""

    def __init__(self, log: Path, endings: list[tuple[str, str, int]]) -> None:
        self.log, self.endings, self.steps, self.recorded = log, list(endings), 0, []

    def __call__(self) -> Outcome:
        status, text, steps = self.endings.pop(0)
        with open(self.log, "a") as out:
            out.write(text)
        self.steps += steps
        return Outcome(status)

    def relaunch(self) -> Outcome:
        outcome, since = relaunching(self, self.log, lambda: self.steps, 0.0,
                                     lambda relaunched: self.recorded.append([dict(r) for r in relaunched]))
        assert since == (len(CRASH) if self.recorded else 0)  # the last launch's part of the log
        return outcome


def test_a_crash_in_mpi_init_before_any_step_is_relaunched_once_and_recorded(tmp_path):
    failed = "failed: ranks exited with status 14"
    launches = Launches(tmp_path / "ranks.log", [(failed, CRASH, 0), ("ok", "trained\n", 40)])
    assert launches.relaunch().status == "ok"
    assert [[r["why"] for r in entry] for entry in launches.recorded] == [[died_in_mpi_init(launches.log)]]

    again = Launches(tmp_path / "again.log", [(failed, CRASH, 0), (failed, CRASH, 0), ("ok", "", 40)])
    assert again.relaunch().status == failed  # the crash came back: not relaunched a second time
    assert len(again.recorded) == 1 and again.endings

    stepped = Launches(tmp_path / "stepped.log", [(failed, CRASH, 3), ("ok", "", 40)])
    assert stepped.relaunch().status == failed and not stepped.recorded  # it had trained: a real failure

    other = Launches(tmp_path / "other.log", [(failed, "srun: error: h1: task 1: Killed\n", 0), ("ok", "", 40)])
    assert other.relaunch().status == failed and not other.recorded
