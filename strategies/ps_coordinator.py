"""ps-coordinator: TensorFlow 2's parameter servers, tf.distribute.ParameterServerStrategy with a
ClusterCoordinator. The variables live on ps tasks; worker tasks are plain tf.distribute.Servers; a
coordinator (TensorFlow's "chief") schedules training functions, each of --steps-per-function steps,
onto whichever worker is free. Asynchronous, as TensorFlow documents it: every step's update is
applied on the ps tasks when it arrives."""

from __future__ import annotations

from typing import ClassVar

from bench.config import RunConfig
from bench.errors import UsageError
from bench.metrics import Gradient, ps_server_bytes, ps_worker_bytes
from bench.options import Option
from bench.run.contract import GO_ON, TfCluster
from strategies._ps import ParameterServerStrategy

# TensorFlow's advice (its parameter-server tutorial: "steps_per_execution") is several steps per
# scheduled function, so the coordinator's dispatch is paid once for all of them; the default was
# chosen by measurement (docs/running.md, "ps-coordinator"): cnn gains nothing past 8
MOST_STEPS_PER_FUNCTION = 8
# a row of steps.csv is one function: a short run keeps at least this many rows per worker (the
# default comparison's 60-step cnn run at 4 workers had 2, both in its warm-up, so no throughput)
LEAST_FUNCTIONS_PER_WORKER = 8
STEPS_PER_FUNCTION = Option("steps_per_function", int, None,
                            f"ps-coordinator: training steps in each function the coordinator schedules (default: "
                            f"{MOST_STEPS_PER_FUNCTION}, fewer where a worker would run fewer than "
                            f"{LEAST_FUNCTIONS_PER_WORKER} functions)",
                            check=lambda v: None if v >= 1 else "must be >= 1")


def steps_per_function(config: RunConfig) -> int:
    """K of a run: as asked, or the default for its steps and workers."""
    asked = config.option("steps_per_function")
    if asked is not None:
        return asked
    return max(1, min(MOST_STEPS_PER_FUNCTION, config.steps // (LEAST_FUNCTIONS_PER_WORKER * config.workers)))


class CoordinatorCluster(TfCluster):
    @classmethod
    def trainer_role(cls, config: RunConfig) -> str:
        return "chief"  # the coordinator trains; ps and worker tasks serve

    @classmethod
    def worker_loss(cls, config: RunConfig) -> str:
        # TensorFlow's own case: the coordinator runs a lost worker's functions on the others, and
        # takes the worker back when it returns (its tutorial, "Handling task failure")
        return GO_ON


class PSCoordinator(ParameterServerStrategy):
    name = "ps-coordinator"
    description = "TF2 parameter servers: ParameterServerStrategy + ClusterCoordinator, asynchronous"
    worker = "strategies.workers.ps_coordinator:PSCoordinatorWorker"
    runs_as = CoordinatorCluster
    asynchronous = True
    checkpoints = False
    v1_graph = False  # eager TensorFlow 2 on the coordinator: a Keras 3 model runs
    xla_refusal = "its workers run the functions its coordinator schedules, with the variables on the ps tasks"
    options: ClassVar[tuple[Option, ...]] = (STEPS_PER_FUNCTION,)
    traces_exchange = False
    worker_towers = False  # TensorFlow would make a worker of K GPUs K replicas of each scheduled step
    exchange_trace = ("not traced per variable: its steps run as scheduled functions on the workers, where no "
                      "session.run can ask for their statistics; the split's communication is the whole of it")

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        super().validate(config)
        if config.straggler or config.straggler_random:
            raise UsageError("--straggler acts in a worker's own step loop; ps-coordinator's workers only run the "
                             "functions its coordinator schedules")

    @classmethod
    def processes(cls, config: RunConfig) -> dict[str, int]:
        return {"ps": config.ps, "worker": config.workers, "chief": 1}

    @classmethod
    def collective(cls, config: RunConfig, role: str, on_gpus: bool) -> str:
        if role == "chief":
            return "schedules functions onto the workers over gRPC; computes nothing"
        if role == "worker":
            return f"runs the scheduled steps, its variables on {config.ps} ps task(s) over gRPC"
        return "serves its variables over gRPC"

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        return f"{cls.name} k={steps_per_function(config)}"

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        # a step's worker reads the parameters from the ps tasks and sends its gradients there, as ps-async's
        return {"worker": ps_worker_bytes(gradient, 1.0), "ps": ps_server_bytes(gradient, 1, config.ps, 1.0)}
