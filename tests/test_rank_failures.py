"""How a ranks' log names the rank whose failure ended a run (bench.run.launch.rank_failures)."""

from bench.run.launch.rank_failures import which_rank_failed

# horovodrun --gloo's lines when rank 1 was killed and rank 0, its peer gone, exited first (a run of
# tests/test_allreduce.py's killed rank recorded "rank 0 exited with status 1", 2026-11-28)
PEER_FIRST = """[0]<stderr>:tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down.
[1]<stderr>:Killed
Process 0 exit with status code 1.
Terminating remaining workers after failure of Process 0.
Process 1 exit with status code 137.
"""


def test_horovodrun_names_the_rank_a_signal_killed_not_its_peer_that_exited_before_it(tmp_path):
    log = tmp_path / "ranks.log"
    log.write_text(PEER_FIRST)
    assert which_rank_failed(log) == "rank 1 was killed by SIGKILL"
    log.write_text("Process 1 exit with status code 2.\nProcess 0 exit with status code 1.\n")
    assert which_rank_failed(log) == "rank 1 exited with status 2"  # no signal: the first seen


def test_a_rank_that_saw_its_peer_disconnect_names_the_peers_host(tmp_path):
    log = tmp_path / "ranks.log"
    log.write_text("""--------------------------------------------------------------------------
An MPI communication peer process has unexpectedly disconnected.  This
usually indicates a failure in the peer process (e.g., a crash or
otherwise exiting without calling MPI_FINALIZE first).

  Local host: host-a
  Local PID:  25136
  Peer host:  host-b
--------------------------------------------------------------------------
\x00[host-a:00000] *** An error occurred in Socket closed
prterun has exited due to process rank 0 with PID 0 on node host-a calling
"abort".
\x00""")
    assert which_rank_failed(log) == "the rank on host-b disconnected (its peer on host-a saw it go)"


def test_a_childs_last_line_is_never_a_nul_byte(tmp_path):
    from bench.run.launch.processes import last_line

    log = tmp_path / "child.log"
    log.write_text("the error\n\x00\n")
    assert last_line(log) == "the error"
