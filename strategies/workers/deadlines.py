"""Deadlines on a parameter-server worker's calls into the TensorFlow cluster, and its session without
TensorFlow's silent recovery.

Every call waits at most the run's limit (--startup-timeout-s until the first step, --stall-timeout-s
after it) plus LAUNCHER_FIRST_S: a launcher watching the run sees the stall first and takes its account
(every process's stack); a task started by hand fails here instead, with a line naming the call (the
process's phase) and the ps tasks that did not answer a probe.

TensorFlow's MonitoredSession re-creates its session and re-runs the call after an UnavailableError or
AbortedError (a ps restarted, a connection reset), logging at INFO only: a re-created chief session
re-runs its init op and its queue runners close the token queue, and the run goes on from a state
nobody asked for. Here the session recovers only under --recover, and each recovery is recorded.
"""

from __future__ import annotations

import time
from typing import Any

import tensorflow as tf
from tensorflow.python.client import session as tf_session
from tensorflow.python.training import monitored_session

from bench.config import RunConfig
from bench.errors import RunFailed
from bench.run.phase import Phase

LAUNCHER_FIRST_S = 3.0  # a watched run's stall is seen by its launcher this long before a call fails on it
PROBE_S = 2.0  # a ps task that answers nothing within this is named as the one that did not answer


class Deadlines:
    """The deadline of this process's next call, and the account of a call that passed it."""

    def __init__(self, config: RunConfig, phase: Phase, probes: dict[str, Probe]) -> None:
        self.startup_s, self.stall_s = config.startup_timeout_s, config.stall_timeout_s
        self.phase, self.probes = phase, probes
        self.silent: set[str] = set()  # the ps tasks that did not answer a probe after a missed deadline
        self.stepped = False  # after the first step, the stall limit
        self.missed = False  # a call passed its deadline: what is left (the done tokens) is tried briefly

    def limit_s(self) -> float:
        if self.missed:
            return PROBE_S
        return (self.stall_s if self.stepped else self.startup_s) + LAUNCHER_FIRST_S

    def options(self, given: tf.compat.v1.RunOptions | None = None) -> tf.compat.v1.RunOptions:
        options = tf.compat.v1.RunOptions()
        if given is not None:
            options.CopyFrom(given)
        options.timeout_in_ms = int(self.limit_s() * 1000)
        return options

    def failure(self) -> RunFailed:
        waited = self.limit_s()
        self.missed = True
        self.phase.stuck()
        self.silent = {task for task, probe in self.probes.items() if not probe.answers()}
        who = f"no answer from {', '.join(sorted(self.silent))}" if self.silent else "every ps task answers a probe now"
        limit = "--stall-timeout-s" if self.stepped else "--startup-timeout-s"
        return RunFailed(f"{self.phase.where()} waited {waited:.0f} s ({limit} + {LAUNCHER_FIRST_S:.0f}); {who}")


class Probe:
    """A session of its own to one ps task, on a graph of its own holding `make()`'s op there, made while the
    run starts: after a call timed out, the session that made it did not answer a probe of the silent task
    within the probe's deadline; a session places every op of its graph (so one graph a task); and a
    session's first run, which creates it on the cluster, has no deadline (seen waiting on a stopped ps)."""

    def __init__(self, target: str, device: str, own_device: str, make) -> None:
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device(device):
            self.fetch = make()
        self.session = tf.compat.v1.Session(target, graph=self.graph, config=tf.compat.v1.ConfigProto(
            device_filters=[device, own_device]))
        # run once now, while the task answers: a session's first run creates it on the cluster, with no deadline
        self.session.run(self.fetch)

    def answers(self) -> bool:
        try:
            self.session.run(self.fetch, options=tf.compat.v1.RunOptions(timeout_in_ms=int(PROBE_S * 1000)))
        except tf.errors.OpError:
            return False
        return True


class BoundedSession(tf_session.SessionInterface):
    """`session` (a MonitoredSession or its raw session) whose every run has the deadline of `deadlines`;
    a Saver takes it as a session."""

    def __init__(self, session: Any, raw: tf.compat.v1.Session, deadlines: Deadlines) -> None:
        self.session, self.raw, self.deadlines = session, raw, deadlines

    @property
    def graph(self) -> tf.Graph:
        return self.raw.graph

    @property
    def sess_str(self) -> str:
        return self.raw.sess_str

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None) -> Any:
        try:
            return self.session.run(fetches, feed_dict=feed_dict, options=self.deadlines.options(options),
                                    run_metadata=run_metadata)
        except tf.errors.DeadlineExceededError:
            raise self.deadlines.failure() from None

    def partial_run_setup(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("partial runs are not bounded")

    def partial_run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("partial runs are not bounded")


class _Counted(tf.compat.v1.train.SessionCreator):
    """A session creator that records every session it makes after the first: a recovery."""

    def __init__(self, creator: tf.compat.v1.train.SessionCreator, recoveries: list[dict]) -> None:
        self.creator, self.recoveries, self.made = creator, recoveries, 0

    def create_session(self) -> tf.compat.v1.Session:
        if self.made:
            self.recoveries.append({"at_epoch_s": time.time(), "session": self.made + 1})
        self.made += 1
        return self.creator.create_session()


class WorkerSession(monitored_session._MonitoredSession):  # noqa: SLF001 - MonitoredSession fixes should_recover
    """A MonitoredSession that recovers only when `recover` (--recover), each recovery appended to
    `recoveries`; otherwise an UnavailableError or AbortedError fails the call that met it."""

    def __init__(self, creator: tf.compat.v1.train.SessionCreator, hooks: list, recover: bool,
                 recoveries: list[dict], stop_grace_period_secs: float) -> None:
        super().__init__(_Counted(creator, recoveries), hooks, should_recover=recover,
                         stop_grace_period_secs=stop_grace_period_secs)
