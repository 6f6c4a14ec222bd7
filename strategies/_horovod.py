"""What the Horovod strategies share: one process per rank under mpirun, horovodrun or srun;
Horovod's controller, fusion buffer and cycle time as options; and the check that Horovod's
TensorFlow extension is installed, made without importing it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import ClassVar

from bench.config import RunConfig
from bench.errors import UsageError
from bench.infra.gpus import horovod_links_nccl
from bench.options import Option, non_negative
from bench.run.contract import GLOO_CONTROLLER, MPI_CONTROLLER, MpiRanks, Strategy

CONTROLLER = Option("hvd_controller", str, MPI_CONTROLLER,
                    "allreduce: Horovod controller, mpi (mpirun) or gloo (horovodrun)",
                    choices=(MPI_CONTROLLER, GLOO_CONTROLLER))
# Horovod's settings a run gets unless told otherwise, from `python -m bench micro --horovod-sweep`
# and allreduce runs on this project's 2-core machine (docs/micro-benchmarks.md, "Horovod at its best"): a 0.5 ms
# cycle halves the wait of an allreduce for the background thread's next cycle (64 KB at 2 ranks:
# 0.60 vs 1.12 ms); 0.1 ms lost throughput (the thread's spinning takes a core from compute);
# 5 ms costs 5 ms an allreduce. The fusion buffer stays at Horovod's 128 MB.
TUNED_CYCLE_MS, TUNED_FUSION_MB = 0.5, 128.0
FUSION_MB = Option("hvd_fusion_threshold_mb", float, TUNED_FUSION_MB,
                   "allreduce: Horovod tensor fusion buffer in MB, 0 = off (Horovod's default: 128)",
                   check=non_negative)
CYCLE_MS = Option("hvd_cycle_time_ms", float, TUNED_CYCLE_MS,
                  "allreduce: Horovod cycle time in ms (Horovod's default: 1)", check=non_negative)
SETUP_HINT = "run ./run_bench.sh setup"
TIMELINE_FILE = "horovod_timeline.json"  # in the run folder, with --timeline true
TIMELINE_SOURCE = ("Horovod's timeline with --timeline true (rank 0's, every rank's negotiation and reduction per "
                   "tensor)")
# Horovod's timeline taxes every step while HOROVOD_TIMELINE is set at hvd.init, even as DYNAMIC with
# nothing recorded: allreduce, cnn, 2 ranks, 250 steps, interleaved on the project's 2-core machine
# (2026-12-02): 2,360-2,790 examples/s with DYNAMIC (6 runs; 2,620-2,960 never started, 3) against
# 2,630-3,530 without (9). So a run traces per tensor only when it asks for the timeline.
NO_TIMELINE = ("not traced: Horovod's timeline cost allreduce 10-20 % of its examples/s while enabled (even with "
               "nothing recorded); --timeline true records it and traces the last warm-up steps from it")


def horovod_missing() -> str | None:
    """Why Horovod's TensorFlow extension is not installed, or None; asked without importing
    it (that would import TensorFlow into a launcher that only starts the ranks)."""
    try:
        spec = importlib.util.find_spec("horovod.tensorflow")
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return f"Horovod is not installed; {SETUP_HINT}"
    if not any(Path(spec.origin).parent.glob("mpi_lib*.so")):
        return f"Horovod is installed without its TensorFlow extension; {SETUP_HINT}"
    return None


HOROVOD_OPTIONS = (CONTROLLER, FUSION_MB, CYCLE_MS)


class HorovodRanks(MpiRanks):
    """Ranks that meet through Horovod's controller, with its settings in their environment."""

    @classmethod
    def rank_controller(cls, config: RunConfig) -> str:
        return config.option("hvd_controller") or MPI_CONTROLLER

    @classmethod
    def environment(cls, config: RunConfig, run_dir: str | None) -> dict[str, str]:
        """Settings Horovod reads at hvd.init(), for every rank."""
        env = {}
        if config.option("hvd_fusion_threshold_mb") is not None:
            env["HOROVOD_FUSION_THRESHOLD"] = str(int(config.option("hvd_fusion_threshold_mb") * 2**20))
        if config.option("hvd_cycle_time_ms") is not None:
            env["HOROVOD_CYCLE_TIME"] = str(config.option("hvd_cycle_time_ms"))
        return env


class HorovodStrategy(Strategy):
    """A strategy whose ranks meet through Horovod. Subclasses set name, family, worker and
    options (HOROVOD_OPTIONS and their own)."""

    runs_as = HorovodRanks
    options: ClassVar[tuple[Option, ...]] = HOROVOD_OPTIONS
    xla = True  # its gradients: strategies.workers.gradient_step.gradients; Horovod's exchange stays outside XLA

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        problem = horovod_missing()
        if problem:
            raise UsageError(problem)

    @classmethod
    def wire(cls, config: RunConfig) -> str | None:
        return cls.runs_as.rank_controller(config)  # Horovod's collectives go over its controller's transport

    @classmethod
    def nccl_on_gpus(cls, config: RunConfig) -> bool:
        return horovod_links_nccl()

    @classmethod
    def collective(cls, config: RunConfig, role: str, on_gpus: bool) -> str:
        over = f"Horovod over {cls.runs_as.rank_controller(config).upper()}"
        if not on_gpus:
            return over
        # without NCCL, Horovod copies GPU tensors to host memory and reduces them over MPI or Gloo
        if horovod_links_nccl():
            return f"{over}, NCCL among the GPUs"
        return f"{over}, GPU tensors through host memory (no NCCL)"
