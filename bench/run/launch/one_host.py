"""A one-process strategy's run under --hosts: its process started on the first host, as a cluster's
task is (through the host kind, over ssh), so that a comparison's baseline trains on the hosts its
other runs use. This process opens the run's folder and records where the process went; the process
on the host joins the folder, trains and closes the run. What that process cannot record (its host
lost, its connection cut, a stall) this one does; ending this one ends it (the guard on its host)."""

from __future__ import annotations

import sys
import time

from bench.config import RunConfig
from bench.run.contract import Strategy
from bench.run.launch.close import close_watched_run
from bench.run.launch.hang import hang_account
from bench.run.launch.processes import start
from bench.run.launch.run_hosts import RunHosts
from bench.run.launch.supervisor import steps_written, supervise
from bench.run.process.lifecycle import exit_status, join_environment, run_label
from bench.run.process.records import RunFolder

PROCESSES = {"worker": 1}


def run_on_first_host(config: RunConfig, strategy: type[Strategy]) -> int:
    """The run's exit status, as its process on the host closed it or, if it could not, as this one did."""
    hosts = RunHosts.of(config, PROCESSES)
    folder, run_start = RunFolder.create(config.output, run_label(config)), time.time()
    folder.update_run(**hosts.placement_record())  # the process on the host adds to it (RunFolder.update_run)
    argv = hosts.kind.command("worker", 0, [sys.executable, "-m", "bench", "--config-json", config.to_json()],
                              join_environment(folder, run_start))
    with hosts.held(folder.path, run_start) as env:
        child = start("worker 0", argv, folder.path / "logs" / "worker0.log", env=env, echo=True,
                      hold_stdin=hosts.kind.holds_stdin)
        hosts.started(folder, 1)
        outcome = supervise([child], [], False, steps_written(folder), config.stall_timeout_s,
                            startup_timeout_s=config.startup_timeout_s, on_hang=hang_account(folder.path / "logs"))
    closed = folder.read_run().get("status")
    if closed not in (None, "running"):
        return exit_status(closed)
    return close_watched_run(folder, config, strategy, outcome.status, run_start, outcome, hosts)
