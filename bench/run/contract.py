"""The strategy contract, in two parts.

`Strategy` says what a strategy is: its name, how its processes are launched, its
options, the worker counts it runs with, whether a run survives a lost worker. It
never imports TensorFlow, so launchers, the CLI and the report can ask it questions
in a process that only starts others.

`Worker` is how it trains, inside one worker process: it gets the config, its
context, the data; it owns placement, gradient exchange and the optimizer step. It
never opens result files, never prints and never parses flags. A `Strategy` names
its `Worker` by import path, loaded only where training happens.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench.config import RunConfig
from bench.metrics import Gradient
from bench.options import Option
from bench.run.data import Dataset, Split
from bench.run.phase import Phase

IN_PROCESS = "in-process"  # one process runs the whole job
TF_CLUSTER = "tf-cluster"  # ps and worker processes of a tf.distribute.Server cluster
MPI = "mpi"  # one process per rank under mpirun / horovodrun
MPI_CONTROLLER, GLOO_CONTROLLER = "mpi", "gloo"  # how the ranks of an MPI launch meet

# the wire a strategy's exchange crosses between hosts (bench.analysis.projection.transports models each);
# Horovod's are its controllers' (MPI_CONTROLLER, GLOO_CONTROLLER)
GRPC, NCCL = "grpc", "nccl"

# families: how replicas are kept in step
IN_GRAPH = "in-graph"  # one process, one graph, replicas on its devices
PARAMETER_SERVER = "parameter-server"  # variables on ps tasks, workers push gradients and pull parameters
ALLREDUCE = "allreduce"  # every worker holds all weights; gradients averaged by a collective
PARAMETER_AVERAGING = "parameter-averaging"  # workers train alone; their weights are averaged every H steps
# families whose workers hold every weight, so the split's compute (bench.metrics.split_steps) is a step's
# whole forward and backward pass; a ps worker's forward pass reads its parameters as its ops need them, and
# what of it overlaps their arrival counts as communication (docs/step-time.md): only the exposed part
WHOLE_COMPUTE = frozenset({IN_GRAPH, ALLREDUCE, PARAMETER_AVERAGING})

# whether a strategy's convergence run is in the default comparison's answer (Strategy.in_convergence_answer)
ALWAYS = "always"
FAMILY_FASTEST = "family-fastest"  # where it is its family's fastest on the first model's family cell

# what a lost non-chief worker means to a run (TfCluster.worker_loss)
RESTART_JOB = "restart-job"  # the run fails; --recover starts the whole job again from its latest checkpoint
REJOIN = "rejoin"  # the run fails; --recover starts the worker again and it rejoins the running job
GO_ON = "go-on"  # the others finish the run; --recover starts the worker again and it rejoins


@dataclass(frozen=True)
class WorkerContext:
    """Who this process is within the run."""

    rank: int = 0
    num_workers: int = 1
    is_chief: bool = True
    run_start: float = 0.0  # epoch seconds every process measures from
    cluster: dict[str, list[str]] | None = None  # {"ps": [...], "worker": [...]} for TF clusters
    run_dir: str | None = None  # the run folder, for files a strategy writes of its own (a timeline)
    phase: Phase = field(default_factory=lambda: Phase(None))  # where this process is, for a hang's account
    supervised: bool = True  # False: a task started by hand, which ends itself past its limit


@dataclass(frozen=True)
class SparseExchange:
    """How a strategy moves an embedding table's gradient."""

    how: str  # in words, for run.json and the report
    table_dense: bool = False  # the whole table goes (dense) rather than its touched rows


@dataclass(frozen=True)
class StepTimes:
    """Where one step's time went on this worker, measured by timestamps inside its graph
    (bench.run.process.breakdown has the definitions)."""

    compute_s: float  # forward and backward of its batch, and an update applied here
    exchange_s: float  # gradients and parameters moving, and waiting for other workers
    waiting_s: float | None  # the waiting in exchange_s; None: a collective's wait for the last
    # worker, told afterwards from every worker's `ready_at`
    ready_at: float | None = None  # epoch seconds when this worker's gradients were ready


@dataclass(frozen=True)
class RanOn:
    """Where a step ran when not in the process that records it (ps-coordinator: a function the
    coordinator scheduled on a worker task): that worker, its count of steps there, and when the
    step began and ended (epoch seconds; began: its previous step's end there, its first: when it
    was scheduled)."""

    worker: int
    local_step: int
    began: float
    ended: float
    steps: int = 1  # the worker's steps this row stands for (ps-coordinator: a function's)


@dataclass(frozen=True)
class StepResult:
    """What one call of Worker.step did on this worker. The harness reads `loss` (with float())
    and `times` (calling it, if it is a function) only when it writes the row, a fraction of a
    second later: a step need not wait for its values to reach the host."""

    loss: Any  # a float, or a scalar tensor or array float() accepts
    examples: int
    global_step: int  # the run's step count after this step (all workers together)
    staleness: int | None = None  # steps the parameters (or the gradient) were behind, where it applies
    applied: bool | None = None  # False: the gradient arrived stale and was dropped (ps-sync backup workers)
    arrival: int | None = None  # order in which this step's gradient reached the parameter servers
    times: StepTimes | Callable[[], StepTimes] | None = None  # where the step's time went
    extra: dict[str, Any] = field(default_factory=dict)
    ran_on: RanOn | None = None  # a step run elsewhere: its worker, local step and span replace this process's


class Launch:
    """How a strategy's processes start, with the members that only its launcher reads. A
    strategy declares its kind as `Strategy.runs_as` and sets a member by subclassing the kind:
    what it may set follows from how it runs (an in-process strategy has no environment to set)."""

    kind: ClassVar[str]

    @classmethod
    def steps_elsewhere(cls, config: RunConfig) -> bool:
        """Whether the workers' steps run in tasks that only serve, scheduled there by a trainer that
        records them (StepResult.ran_on): a worker's injected death is then the launcher's to do."""
        return False


class InProcess(Launch):
    """One process runs the whole job: the CLI's own (under Slurm, one job step)."""

    kind = IN_PROCESS


class TfCluster(Launch):
    """ps and worker processes of a tf.distribute.Server cluster, each its own process,
    started and watched by the TF-cluster launcher (bench/run/launch/cluster.py)."""

    kind = TF_CLUSTER

    @classmethod
    def worker_loss(cls, config: RunConfig) -> str:
        """What a lost non-chief worker does to the run: RESTART_JOB, REJOIN or GO_ON."""
        return RESTART_JOB

    @classmethod
    def trainer_role(cls, config: RunConfig) -> str:
        """The role whose tasks train (each runs the harness, and the launcher watches them as the run's
        workers); the tasks of every other role serve until the run ends."""
        return "worker"

    @classmethod
    def steps_elsewhere(cls, config: RunConfig) -> bool:
        return cls.trainer_role(config) != "worker"

    @classmethod
    def gradients_per_step(cls, config: RunConfig) -> int | None:
        """A synchronous step that averages the first R gradients computed for it: R (the launcher
        marks which gradients each step applied, bench.run.process.aggregation); None: every gradient a
        worker computes is applied, as its StepResult says."""
        return None


class MpiRanks(Launch):
    """One process per rank under mpirun, horovodrun or srun (bench/run/launch/mpi.py)."""

    kind = MPI

    @classmethod
    def environment(cls, config: RunConfig, run_dir: str | None) -> dict[str, str]:
        """Environment variables every rank starts with (and a rank of the user's own mpirun sets
        for itself)."""
        return {}

    @classmethod
    def rank_controller(cls, config: RunConfig) -> str:
        """How the ranks meet, "mpi" (mpirun, srun --mpi=pmix) or "gloo" (Horovod's rendezvous
        server: horovodrun --gloo, or srun steps under Slurm)."""
        return MPI_CONTROLLER


class Strategy:
    """What a strategy is. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    family: ClassVar[str]  # IN_GRAPH, PARAMETER_SERVER, ALLREDUCE, PARAMETER_AVERAGING
    worker: ClassVar[str]  # "module:Class" of its Worker
    runs_as: ClassVar[type[Launch]] = InProcess  # how its processes start, with what only that launcher reads
    options: ClassVar[tuple[Option, ...]] = ()
    worker_range: ClassVar[tuple[int, int | None]] = (1, None)  # worker counts it runs with (None: no limit)
    asynchronous: ClassVar[bool] = False  # workers update without waiting for each other (staleness recorded)
    # a gradient's exchange may start while the backward pass still runs (Horovod: each gradient's allreduce
    # once it is ready); False: once every gradient is (a tf.distribute optimizer reduces them all in one call)
    exchange_overlaps_backward: ClassVar[bool] = True
    checkpoints: ClassVar[bool] = False  # its Worker implements save_checkpoint (--checkpoint-every-*)
    v1_graph: ClassVar[bool] = False  # its Worker builds a TensorFlow 1 graph (tf.compat.v1): no Keras 3 model there
    # whether --xla compiles its forward and backward pass (its worker computes them with
    # strategies.workers.gradient_step.gradients), and why not where it does not
    xla: ClassVar[bool] = False
    xla_refusal: ClassVar[str] = "its worker computes its gradients outside the step XLA compiles"
    baseline: ClassVar[bool] = False  # its 1-worker throughput is what scaling efficiency divides by (one strategy)
    # what traces its exchange per tensor on the steps bench.run.process.tracing names (its Worker's
    # trace_exchange writes them), or why nothing does: run.json's exposure says it
    exchange_trace: ClassVar[str] = "nothing: it exchanges no gradient between processes"
    traces_exchange: ClassVar[bool] = False
    # a worker process drives --gpus-per-worker K devices as towers, summing their gradients before its exchange
    # (tf_cnn_benchmarks' worker of several GPUs); False: one device per worker process (K > 1 refused)
    worker_towers: ClassVar[bool] = False
    # its convergence run in the default comparison's time-to-accuracy answer: "" (not), ALWAYS, or
    # FAMILY_FASTEST (one of a family's, the fastest measured); the card's strategies and averaging's best
    in_convergence_answer: ClassVar[str] = ""

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        """Raise bench.errors.UsageError for a config this strategy cannot run."""

    @classmethod
    def processes(cls, config: RunConfig) -> dict[str, int]:
        """Processes per role that the launcher starts for a local TF_CLUSTER or MPI run."""
        return {"worker": config.workers}

    @classmethod
    def variant(cls, config: RunConfig) -> str:
        """The strategy with what distinguishes its flavours, as the report labels its runs."""
        return cls.name

    @classmethod
    def gpus(cls, config: RunConfig) -> dict[str, int]:
        """GPUs each process of a role sees (bench.run.placement decides which); a role not named sees none."""
        return {"worker": config.gpus_per_worker, "ps": config.gpus_per_ps}

    @classmethod
    def collective(cls, config: RunConfig, role: str, on_gpus: bool) -> str:
        """What a process of `role` exchanges through, in words (the plan, and each task's devices in run.json);
        `on_gpus`: the process computes on GPUs."""
        return "none: one process, one device"

    @classmethod
    def nccl_on_gpus(cls, config: RunConfig) -> bool:
        """Whether its processes all-reduce through NCCL where they compute on GPUs (NCCL refuses two ranks of one
        communicator on one GPU: such a run cannot --share-gpus)."""
        return False

    @classmethod
    def wire(cls, config: RunConfig) -> str | None:
        """The transport its exchange crosses between hosts (GRPC, NCCL, or Horovod's controller);
        None: it exchanges nothing over a network."""
        return None

    @classmethod
    def traffic(cls, config: RunConfig, gradient: Gradient) -> dict[str, tuple[float, float]]:
        """{role: (bytes sent, bytes received)} per task per worker step, by the exchange's
        formula (bench.metrics); empty for a strategy that moves nothing over a network."""
        return {}

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        """How it moves an embedding table's gradient (run.json and the report say it)."""
        return SparseExchange("in one process")

    @classmethod
    def with_defaults(cls, config: RunConfig) -> RunConfig:
        """The config with its options complete: each one not given takes its default."""
        return config.replace(options={opt.name: config.options.get(opt.name, opt.default) for opt in cls.options})

    @classmethod
    def facts(cls, config: RunConfig) -> dict[str, Any]:
        """run.json's "strategy": what the report, presets and launchers read instead of its name."""
        sparse = cls.sparse_exchange(config)
        return {"name": cls.name, "family": cls.family, "variant": cls.variant(config), "launch": cls.runs_as.kind,
                "baseline": cls.baseline, "asynchronous": cls.asynchronous,
                "exchange_overlaps_backward": cls.exchange_overlaps_backward, "checkpoints": cls.checkpoints,
                "parameter_servers": cls.processes(config).get("ps", 0), "sparse_exchange": sparse.how,
                "table_dense": sparse.table_dense, "wire": cls.wire(config),
                "traces_exchange": cls.traces_exchange, "exchange_trace": cls.exchange_trace,
                "worker_towers": cls.worker_towers, "gpus_per_process": cls.gpus(config)}

    @classmethod
    def worker_batch(cls, config: RunConfig) -> int:
        """Examples one worker process feeds per step (all its towers together)."""
        return config.batch_size * (config.gpus_per_worker if cls.worker_towers else 1)


# the strategies a run's starter knows (strategies.registry.all_strategies()), by name: handed down, never looked up
Known = Mapping[str, type["Strategy"]]


def options_of(known: Known) -> list[Option]:
    """Every known strategy's options, each name once (strategies may share an Option)."""
    seen: dict[str, Option] = {}
    for cls in known.values():
        for opt in cls.options:
            seen.setdefault(opt.name, opt)
    return list(seen.values())


def options_elsewhere(strategy: type[Strategy], known: Known) -> list[Option]:
    """Options that other known strategies declare and `strategy` does not take."""
    mine = {opt.name for opt in strategy.options}
    return [opt for opt in options_of(known) if opt.name not in mine]


def strategies_taking(option: Option, known: Known) -> list[str]:
    return sorted(n for n, cls in known.items() if any(o.name == option.name for o in cls.options))


def worker_class(strategy: type[Strategy]) -> type[Worker]:
    """A strategy's Worker class (imports TensorFlow)."""
    module, _, name = strategy.worker.partition(":")
    return getattr(importlib.import_module(module), name)


def default_workers(strategy: type[Strategy]) -> int:
    """Workers when --workers is not given: 2 where the strategy runs with 2 (a distributed
    strategy shown distributed), else the fewest it runs with."""
    low, high = strategy.worker_range
    return 2 if high is None or high >= 2 else low


def local_steps_at(strategy: type[Strategy], config: RunConfig, global_step: int) -> int:
    """Steps each worker has taken when the run is at `global_step`: one global step per worker
    step for a synchronous strategy, one per step of any worker for an asynchronous one."""
    return global_step // config.workers if strategy.asynchronous else global_step


class Worker(ABC):
    """How a strategy trains, in one worker process. `model` is set by `setup`."""

    model: Any

    def __init__(self, config: RunConfig, context: WorkerContext, strategy: type[Strategy]) -> None:
        self.config = config
        self.context = context
        self.strategy = strategy  # the run's Strategy, resolved once where the process started

    @classmethod
    def configure_runtime(cls, config: RunConfig) -> dict[str, Any]:
        """Process-wide TensorFlow settings (logical devices, GPU memory) made before
        TensorFlow starts its runtime; returns what was done, for run.json."""
        return {}

    @classmethod
    def serve(cls, role: str, index: int, config: RunConfig, cluster: dict[str, list[str]],
              phase: Phase | None = None, supervised: bool = True) -> None:
        """Run a task of another role than worker (a ps) until the run is over; `phase` records where it is;
        not `supervised`: started by hand, no launcher ends it."""
        raise NotImplementedError(f"{config.strategy} has no {role} tasks")

    @abstractmethod
    def setup(self, data: Dataset) -> None:
        """Build the model, optimizer and input pipeline; initialise or receive weights."""

    def ready(self) -> None:
        """Block until every worker can start training (start-up ends here)."""

    @abstractmethod
    def step(self, stamped: bool = False) -> StepResult:
        """Run one training step on this worker; when `stamped`, with its `times` (the harness
        asks for the steps bench.run.process.stamping.stamped names)."""

    def trace_exchange(self, steps: range | None) -> None:
        """Trace the exchange of the local `steps` that follow, tensor by tensor, or (None, after the
        last of them) stop and write what was traced with bench.run.process.tracing.write; called
        around the steps bench.run.process.tracing.traced_steps names, when the strategy declares
        traces_exchange."""

    def finished(self, result: StepResult) -> bool:
        """True once the run has done its steps (the default counts global steps)."""
        return result.global_step >= self.config.steps

    def last_step_taken(self) -> None:
        """Called once this worker's last step is done, before its final evaluation and weights: release
        whatever other workers may still wait on (a ps-sync chief's tokens)."""

    @abstractmethod
    def evaluate(self, split: Split) -> tuple[float, float]:
        """(mean loss, accuracy) of the current weights on `split`."""

    @abstractmethod
    def weights(self) -> list[np.ndarray]:
        """Current values of the model's variables, in creation order."""

    def save_checkpoint(self, directory: str, global_step: int) -> str:
        """Save the model's variables, the optimizer's state and the global step as a checkpoint
        named for `global_step` in `directory`, in TensorFlow's own format, keeping the latest
        `config.checkpoint_keep`; returns its path prefix. Called on the chief only."""
        raise NotImplementedError(f"{self.strategy.name} cannot save checkpoints")

    def info(self) -> dict[str, Any]:
        """Facts for run.json: devices used, bytes moved per step, placement, ..."""
        return {}

    def teardown(self) -> None:
        """Release what setup acquired. Called on success and on failure."""
