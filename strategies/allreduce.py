"""allreduce: Horovod ring allreduce, one process per rank under mpirun or horovodrun.

Every rank holds all the weights; after each backward pass the gradients are
averaged across ranks (ring allreduce, fused into few large buffers) and every
rank applies the same update.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from bench import models
from bench.config import RunConfig
from bench.data import Dataset
from bench.errors import UsageError
from bench.options import Option, flag_bool, non_negative
from bench.traffic import ring_allreduce_bytes
from bench.training import feed_for, make_optimizer
from strategies._eager import EagerStrategy
from strategies.base import MPI, StepResult

CONTROLLER = Option("hvd_controller", str, "mpi", "allreduce: Horovod controller, mpi (mpirun) or gloo (horovodrun)",
                    choices=("mpi", "gloo"))
FUSION_MB = Option("hvd_fusion_threshold_mb", float, None,
                   "allreduce: Horovod tensor fusion buffer in MB (Horovod's default: 128)", check=non_negative)
CYCLE_MS = Option("hvd_cycle_time_ms", float, None,
                  "allreduce: Horovod cycle time in ms (Horovod's default: 1)", check=non_negative)
FP16 = Option("fp16_allreduce", flag_bool, False, "allreduce: send gradients as float16 (true|false)")
TIMELINE = Option("timeline", flag_bool, False, "allreduce: write Horovod's Chrome-trace timeline into the run folder")


def horovod_problem(controller: str) -> str | None:
    """Why Horovod cannot run here, or None."""
    try:
        import horovod.tensorflow as hvd
    except ImportError as exc:
        return f"Horovod is not built ({exc}); run ./run_bench.sh setup"
    built = hvd.gloo_built() if controller == "gloo" else hvd.mpi_built()
    return None if built else f"this Horovod build has no {controller} support; run ./run_bench.sh setup"


class Allreduce(EagerStrategy):
    name = "allreduce"
    description = "Horovod ring allreduce (DistributedGradientTape), one process per rank"
    launch = MPI
    options = (CONTROLLER, FUSION_MB, CYCLE_MS, FP16, TIMELINE)

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        problem = horovod_problem(config.option("hvd_controller"))
        if problem:
            raise UsageError(problem)

    @classmethod
    def horovod_environment(cls, config: RunConfig, run_dir: str | None) -> dict[str, str]:
        """Settings Horovod reads at hvd.init(), for every rank."""
        env = {}
        if config.option("hvd_fusion_threshold_mb") is not None:
            env["HOROVOD_FUSION_THRESHOLD"] = str(int(config.option("hvd_fusion_threshold_mb") * 2**20))
        if config.option("hvd_cycle_time_ms") is not None:
            env["HOROVOD_CYCLE_TIME"] = str(config.option("hvd_cycle_time_ms"))
        if config.option("timeline") and run_dir:
            env["HOROVOD_TIMELINE"] = os.path.join(run_dir, "horovod_timeline.json")
        return env

    def setup(self, data: Dataset) -> None:
        import horovod.tensorflow as hvd

        self.hvd = hvd
        model = models.build(self.config.model, self.config.seed)
        optimizer = make_optimizer(self.config)
        feed = feed_for(self.config, data, hvd.rank(), hvd.size())
        variables = model.trainables
        compression = hvd.Compression.fp16 if self.config.option("fp16_allreduce") else hvd.Compression.none

        @tf.function
        def train_step():
            x, y = feed.batch()
            with tf.GradientTape() as tape:
                loss = model.loss(x, y)
            # the gradients come back averaged over all ranks (ring allreduce)
            tape = hvd.DistributedGradientTape(tape, compression=compression)
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        # every rank starts from rank 0's weights (they are seeded alike; this makes it so)
        hvd.broadcast_variables(model.weights, root_rank=0)
        self._optimizer = optimizer
        self.use(model, train_step)

    def step(self) -> StepResult:
        result = super().step()
        if result.global_step == 1 and self._optimizer.variables():
            # optimizer slots exist only after the first step: make them rank 0's too
            self.hvd.broadcast_variables(self._optimizer.variables(), root_rank=0)
        return result

    def info(self) -> dict[str, Any]:
        size = self.hvd.size()
        gradient_bytes = self.model.gradient_bytes // (2 if self.config.option("fp16_allreduce") else 1)
        # the controller Horovod runs with, asked of Horovod rather than read back from the flag
        controller = "gloo" if self.hvd.gloo_enabled() else "mpi" if self.hvd.mpi_enabled() else "none"
        return {"ranks": size, "controller": controller,
                "gradient_bytes_per_step": gradient_bytes,
                "bytes_sent_per_rank_per_step": ring_allreduce_bytes(gradient_bytes, size),
                "horovod_environment": {k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")}}
