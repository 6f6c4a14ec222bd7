"""ps-sync with R = N: every worker takes only its own token, so no worker can hand in two
gradients for one step while another is slow to take its token (strategies/workers/ps_sync.py)."""

from __future__ import annotations

import pytest
import tensorflow as tf

from strategies.workers.ps_sync import TokensPerWorker

# A token already in its queue is taken at once: the limit only ends a test that would hang.
PRESENT_MS = 10_000
# A token that must not come: nothing is being enqueued, so any wait shows it is not there.
ABSENT_MS = 200


def take(session: tf.compat.v1.Session, queue: TokensPerWorker, wait_ms: int = PRESENT_MS) -> int:
    """A token from `queue`, waiting at most `wait_ms` for one."""
    return int(session.run(queue.dequeue(), options=tf.compat.v1.RunOptions(timeout_in_ms=wait_ms)))


def test_a_step_gives_each_worker_one_token_that_no_other_worker_can_take():
    with tf.Graph().as_default():
        first, second = (TokensPerWorker(rank, 2, tf.int64) for rank in (0, 1))  # one queue pair, seen by two ranks
        update = first.enqueue_many((tf.fill([2], tf.constant(7, tf.int64)),))
        with tf.compat.v1.Session() as session:
            session.run(update)
            assert take(session, second) == 7
            # with TensorFlow's one shared queue this would be the first worker's token
            with pytest.raises(tf.errors.DeadlineExceededError):
                take(session, second, ABSENT_MS)
            assert take(session, first) == 7


def test_tokens_are_shared_out_evenly_and_closing_closes_every_queue():
    with tf.Graph().as_default():
        first, second = (TokensPerWorker(rank, 2, tf.int64) for rank in (0, 1))
        release = second.enqueue_many(tf.constant([3, 3, 3, 3], tf.int64))
        close = first.close()
        with tf.compat.v1.Session() as session:
            session.run(release)
            assert [take(session, first), take(session, first), take(session, second), take(session, second)] == [3] * 4
            session.run(close)
            with pytest.raises(tf.errors.OutOfRangeError):  # closed and empty: a waiting worker is let go
                take(session, second)
