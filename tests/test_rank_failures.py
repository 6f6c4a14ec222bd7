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
