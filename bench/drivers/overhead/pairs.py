"""The pairs the overhead benchmark times: a strategy through distbench, and the bare loop
(bench.drivers.overhead.bare) that does the same work with nothing around it."""

from __future__ import annotations

from dataclasses import dataclass

# how a bare loop's processes are started
ONE_PROCESS = "one-process"
MPI_RANKS = "mpi-ranks"  # under mpirun, one rank per worker
TF_WORKERS = "tf-workers"  # one process per worker, a TF cluster of workers only
TF_PS_JOB = "tf-ps-job"  # ps tasks and workers of a TF cluster


@dataclass(frozen=True)
class Pair:
    strategy: str
    bare: str  # module under bench.drivers.overhead.bare
    start: str  # ONE_PROCESS, MPI_RANKS, TF_WORKERS, TF_PS_JOB
    workers: int
    batch_size: int
    steps: int  # global steps, warm-up included
    optimizer: str = "sgd"
    lr: float = 0.01
    ps: int = 0
    bare_flags: tuple[str, ...] = ()
    model: str = "mlp"
    warmup: int = 20

    def scaled(self, factor: float) -> Pair:
        from dataclasses import replace

        return replace(self, steps=max(self.warmup + 50, int(self.steps * factor)))

    def harness_argv(self, output: str) -> list[str]:
        """`python -m bench` flags of the same job."""
        argv = ["--strategy", self.strategy, "--model", self.model, "--data", "synthetic",
                "--workers", str(self.workers), "--batch-size", str(self.batch_size), "--steps", str(self.steps),
                "--warmup-steps", str(self.warmup), "--optimizer", self.optimizer, "--lr", str(self.lr),
                "--eval-every", "0", "--output", output, "--run-name", "overhead"]
        return argv + (["--ps", str(self.ps)] if self.ps else [])

    def bare_argv(self, out: str) -> list[str]:
        return [out, "--model", self.model, "--batch-size", str(self.batch_size), "--steps", str(self.steps),
                "--warmup", str(self.warmup), "--optimizer", self.optimizer, "--lr", str(self.lr),
                "--workers", str(self.workers), "--ps", str(max(self.ps, 1)), *self.bare_flags]


# MLP 784-100-10 throughout. In-process and allreduce pairs: batch 128 per worker, SGD (the
# settings of Horovod's synthetic benchmark style); ps pairs: 1 ps + 2 workers, batch 100,
# Adam 0.01 (TensorFlow's distributed MNIST example).
PAIRS = (
    Pair("single", "single", ONE_PROCESS, workers=1, batch_size=128, steps=5000),
    Pair("multi-tower", "towers", ONE_PROCESS, workers=2, batch_size=128, steps=3000),
    Pair("ps-async", "ps", TF_PS_JOB, workers=2, ps=1, batch_size=100, steps=3000, optimizer="adam"),
    Pair("ps-sync", "ps", TF_PS_JOB, workers=2, ps=1, batch_size=100, steps=1500, optimizer="adam",
         bare_flags=("--sync",)),
    Pair("allreduce", "horovod", MPI_RANKS, workers=2, batch_size=128, steps=2000),
    Pair("allreduce-tf", "collective", TF_WORKERS, workers=2, batch_size=128, steps=1000),
)


def by_strategy(names: list[str]) -> list[Pair]:
    known = {p.strategy: p for p in PAIRS}
    unknown = [n for n in names if n not in known]
    if unknown:
        from bench.errors import UsageError

        raise UsageError(f"no overhead pair for {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]
