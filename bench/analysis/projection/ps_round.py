"""What ps tasks serve while every worker pushes its bytes into them and pulls them back at once,
with the tasks on hosts as given: the parameter-server model's own prediction (no training, no
compute) of the figure `./run_bench.sh profile --ps-layout` measures, at a stated level. The
check of a ps task under concurrency: a profile made on 2 hosts predicts what tasks serve on more.
"""

from __future__ import annotations

import math

from bench.analysis.projection import levels
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.intervals import interval
from bench.analysis.projection.parameter_servers import ROUND_ROBIN
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.schemes import PS_ASYNC, PsSetup
from bench.run.contract import GRPC
from bench.run.models.tensors import ModelTensors, Tensor

NO_COMPUTE_EXAMPLES_PER_S = 1e12  # a worker's step is its exchange alone: compute of a picosecond


def round_tensors(nbytes: int, tasks: int) -> ModelTensors:
    """A worker's `nbytes` split evenly over `tasks` ps tasks, one variable each (round-robin puts
    variable k on task k), as bench.drivers.micro.ps_graph.push_pull makes them."""
    share = nbytes // tasks
    return ModelTensors("ps round", tuple(Tensor(f"part{k}", share, 1.0) for k in range(tasks)), 0.0)


def served(profile: Profile, worker_hosts: tuple[int, ...], task_hosts: tuple[int, ...], link_gbit: float,
           nbytes: int, level: float = levels.DEFAULT_LEVEL, model: levels.Term | None = None,
           cores_per_host: float | None = None) -> dict[str, float]:
    """Bytes/s the tasks serve in all, pushed and pulled (point, low, high at `level`), while worker i on
    host `worker_hosts[i]` pushes `nbytes` split over the tasks, task k on host `task_hosts[k]`, and
    pulls it back, every worker at once. `model`: the model's error of form, where known (checked_error).
    `cores_per_host`: each host's cores (None: those of the host the profile was measured on)."""
    workers, tasks = len(worker_hosts), len(task_hosts)
    # on_host: a worker's process keeps its host's CPU busy (moving bytes, where a training worker computes);
    # its devices per host (1) are moot: the hosts are PsSetup.on's
    cluster = Cluster(workers, 1, link_gbit, NO_COMPUTE_EXAMPLES_PER_S, batch_size=1,
                      intra_host_bytes_per_s=float("inf"), on_host=True, cores_per_host=cores_per_host)
    ps = PsSetup(tasks, True, ROUND_ROBIN, on=(worker_hosts, task_hosts))
    found = interval(PS_ASYNC, GRPC, round_tensors(nbytes, tasks), cluster, ps, profile,
                     intra_host_from_profile=False, level=level)
    if model is not None:
        found = found.with_model(model)
    moved = 2 * (nbytes // tasks) * tasks  # bytes a worker's step moves: its push and its pull
    u, dof = found.u, levels.INFINITE
    return {"bytes_per_s": found.point * moved, "low": found.low * moved, "high": found.high * moved,
            "level": level, "u_log": u, "u_dof": dof, "step_s": found.step_s,
            "model_error_u_log": model.u if model else 0.0, "model_error_dof": model.dof if model else levels.INFINITE}


def checked_error(others: list[tuple[float, float, float]]) -> levels.Term:
    """The model's error of form from other checks it did not see, each (measured, predicted point, the u
    its other terms gave it): what their log residuals hold beyond those terms (levels.model_error)."""
    return levels.model_error([math.log(m / p) for m, p, _ in others], [u for _, _, u in others])
