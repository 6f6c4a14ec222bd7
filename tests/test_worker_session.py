"""A ps-family worker's session recovers behind the run's back only under --recover, and records it: TensorFlow's
MonitoredSession machinery, over a session that meets an UnavailableError (a ps restarted) once."""

import pytest
import tensorflow as tf

from strategies.workers.deadlines import WorkerSession


class OnceUnavailable(tf.compat.v1.train.SessionCreator):
    """Makes sessions whose first run, in the first session only, fails as a restarted ps makes it fail."""

    def __init__(self, graph: tf.Graph) -> None:
        self.graph, self.made = graph, 0

    def create_session(self):
        self.made += 1
        return _Session(self.graph, fails=self.made == 1)


class _Session:
    def __init__(self, graph: tf.Graph, fails: bool) -> None:
        self.graph, self.fails = graph, fails

    def run(self, fetches, **_):
        if self.fails:
            raise tf.errors.UnavailableError(None, None, "Socket closed")
        return {"caller": 7}

    def close(self) -> None:
        pass


@pytest.mark.parametrize("recover", [False, True])
def test_a_session_recovers_only_under_recover_and_each_recovery_is_recorded(recover):
    with tf.Graph().as_default() as graph:
        creator, recoveries = OnceUnavailable(graph), []
        session = WorkerSession(creator, [], recover=recover, recoveries=recoveries, stop_grace_period_secs=0)
        if not recover:
            with pytest.raises(tf.errors.UnavailableError, match="Socket closed"):
                session.run("step")
            assert creator.made == 1 and recoveries == []
            return
        assert session.run("step") == 7  # the call was made again on a new session
        assert creator.made == 2 and [r["session"] for r in recoveries] == [2]
